package libvirt

import (
	"context"
	"encoding/xml"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"libvirt.org/go/libvirt"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// ListByTag lists every region's domains and keeps the marked ones whose
// mark has exactly the value: an Owner (or "true") for <managed>, so
// installs sharing a host never list each other's domains; any owner's
// for <uid>. libvirt cannot filter on metadata, so the scan reads each
// domain's marks (list-partial: fail-whole: a region that cannot be read
// fails the list, so the garbage collector never takes it for empty).
//
// Per region the calls are: one bulk list with every domain's state
// (virConnectGetAllDomainStats), one read of each domain's marks, one
// lease table per network a listed running domain is on
// (virNetworkGetDHCPLeases), and the guest agent only for a domain the
// leases do not answer: about one call a domain, where reading each
// domain's state, XML and address sources took three to five.
func (p *Provider) ListByTag(ctx context.Context, key, value string) ([]contract.Instance, error) {
	if key != contract.LabelManaged && key != contract.LabelUID {
		return nil, contract.InvalidField("key", key, "one of "+contract.LabelManaged+", "+contract.LabelUID)
	}
	match := func(m marks) bool {
		return m.Managed != "" && (key == contract.LabelManaged && m.Managed == value || key == contract.LabelUID && m.UID == value)
	}
	var out []contract.Instance
	for _, region := range slices.Sorted(maps.Keys(p.cfg.Regions)) {
		found, err := p.listRegion(ctx, region, match)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}

// listedDomain is one domain of a region's list: what was read of it,
// its handle, and the NICs of a running one (MAC and network).
type listedDomain struct {
	domain
	h    *handle
	nics []nic
}

// handle is a domain handle from the bulk list, shared by the list and
// the calls it makes on the domain. A call that outlives its budget (a
// daemon that answers late) runs on after the list returned, so the
// handle is freed when the list has closed it and no call uses it: a
// late call on a freed handle uses freed memory (libvirt's object
// check caught one: "invalid domain pointer in virDomainGetXMLDesc").
type handle struct {
	dom    *libvirt.Domain
	mu     sync.Mutex
	using  int
	closed bool
}

// errListEnded is a call's error when the list it belonged to has
// returned before the call started: it does not run.
var errListEnded = errors.New("the list this call belonged to has ended")

// with runs fn on the domain unless the list has closed the handle.
func (h *handle) with(fn func(*libvirt.Domain) error) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return errListEnded
	}
	h.using++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.using--; h.using == 0 && h.closed {
			_ = h.dom.Free()
		}
	}()
	return fn(h.dom)
}

// close is the list's end: the handle is freed now, or by the last call
// still using it.
func (h *handle) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		if h.using == 0 {
			_ = h.dom.Free()
		}
	}
}

type nic struct{ mac, network string }

// listRegion lists one region's domains whose marks match.
func (p *Provider) listRegion(ctx context.Context, region string, match func(marks) bool) ([]contract.Instance, error) {
	listed, err := p.listDomains(ctx, region)
	defer func() {
		for _, l := range listed {
			l.h.close()
		}
	}()
	if err != nil {
		return nil, err
	}
	var doms []*listedDomain
	for _, l := range listed {
		d, err := p.readListed(ctx, region, l)
		if isNotFound(err) {
			continue // undefined since the list was taken
		}
		if err != nil {
			return nil, err
		}
		if match(d.marks) {
			doms = append(doms, d)
		}
	}
	p.addresses(ctx, region, doms)
	out := make([]contract.Instance, 0, len(doms))
	for _, d := range doms {
		out = append(out, d.instance(region))
	}
	return out, nil
}

// listedState is a domain of the bulk list before its marks are read.
type listedState struct {
	h      *handle
	state  libvirt.DomainState
	reason int
}

// listDomains takes the bulk list: every domain (no filter flags) with
// the "state" group, state.state and state.reason as virDomainGetState
// gives them
// (https://libvirt.org/html/libvirt-libvirt-domain.html#virConnectGetAllDomainStats).
// An answer that comes after the list gave up on it is freed where it
// arrives.
func (p *Provider) listDomains(ctx context.Context, region string) ([]listedState, error) {
	var (
		mu        sync.Mutex
		got       []libvirt.DomainStats
		abandoned bool
	)
	err := p.do(ctx, region, "ListDomains", p.cfg.CallTimeout.Duration, func(c *libvirt.Connect) error {
		stats, err := c.GetAllDomainStats(nil, libvirt.DOMAIN_STATS_STATE, 0)
		mu.Lock()
		defer mu.Unlock()
		freeStats(got) // a first attempt's, on a retry
		got = nil
		if abandoned {
			freeStats(stats)
			return errListEnded
		}
		got = stats
		return err
	})
	mu.Lock()
	defer mu.Unlock()
	abandoned = true
	if err != nil {
		freeStats(got)
		return nil, err
	}
	listed := make([]listedState, len(got))
	for i, st := range got {
		listed[i].h = &handle{dom: st.Domain}
		if st.State != nil {
			listed[i].state, listed[i].reason = st.State.State, st.State.Reason
		}
	}
	return listed, nil
}

// readListed reads one listed domain's marks: from the live XML of a
// running one, which also names its NICs for the lease table; from
// virDomainGetMetadata of our namespace for any other, a few hundred
// bytes instead of the whole definition
// (https://libvirt.org/html/libvirt-libvirt-domain.html#virDomainGetMetadata;
// no element in the namespace is ERR_NO_DOMAIN_METADATA: unmarked).
func (p *Provider) readListed(ctx context.Context, region string, l listedState) (*listedDomain, error) {
	d := &listedDomain{h: l.h}
	d.state, d.reason = l.state, l.reason
	var err error
	if d.name, err = l.h.dom.GetName(); err != nil { // held by the handle: no call
		return nil, err
	}
	if p.hooks.state != nil {
		d.state, d.reason = p.hooks.state(l.h.dom, d.state, d.reason)
	}
	// got and nics are read only when the call returned in time: one that
	// runs on after its budget writes them when no one reads them any more.
	var got marks
	var nics []nic
	err = p.call(ctx, backendCall{step: "ReadDomain", region: region, domain: d.name}, p.cfg.CallTimeout.Duration, func(*libvirt.Connect) error {
		return l.h.with(func(dom *libvirt.Domain) error {
			if d.running() {
				doc, err := dom.GetXMLDesc(0)
				if err != nil {
					return err
				}
				m, n, err := marksAndNICs(doc)
				got, nics = m, n
				return err
			}
			doc, err := dom.GetMetadata(libvirt.DOMAIN_METADATA_ELEMENT, xmlNamespace, libvirt.DOMAIN_AFFECT_CURRENT)
			if code(err) == libvirt.ERR_NO_DOMAIN_METADATA {
				got = marks{}
				return nil
			}
			if err != nil {
				return err
			}
			got, err = parseMetadata(doc)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	d.marks, d.nics = got, nics
	return d, nil
}

// listedXML is the part of a domain's XML the list needs: decoding only
// it, not the whole libvirtxml.Domain, is most of the list's own CPU time
// saved (BenchmarkListByTag).
type listedXML struct {
	Metadata struct {
		XML string `xml:",innerxml"`
	} `xml:"metadata"`
	Interfaces []struct {
		MAC struct {
			Address string `xml:"address,attr"`
		} `xml:"mac"`
		Source struct {
			Network string `xml:"network,attr"`
		} `xml:"source"`
	} `xml:"devices>interface"`
}

// marksAndNICs reads the marks and the NICs on a libvirt network (the
// only ones a lease table answers for) from a domain's XML.
func marksAndNICs(doc string) (marks, []nic, error) {
	var x listedXML
	if err := xml.Unmarshal([]byte(doc), &x); err != nil {
		return marks{}, nil, err
	}
	m, err := parseMarks(x.Metadata.XML)
	if err != nil {
		return marks{}, nil, err
	}
	var nics []nic
	for _, iface := range x.Interfaces {
		if iface.MAC.Address != "" && iface.Source.Network != "" {
			nics = append(nics, nic{mac: iface.MAC.Address, network: iface.Source.Network})
		}
	}
	return m, nics, nil
}

// addresses finds the address of each running domain, source by source
// in the configured order: the lease source from one lease table per
// network, read when first needed; the agent one domain at a time, only
// for a domain no earlier source answered. A source that fails is
// skipped, as for Get (address).
func (p *Provider) addresses(ctx context.Context, region string, doms []*listedDomain) {
	tables := map[string]map[string][]string{} // network → MAC → addresses
	for _, d := range doms {
		if !d.running() {
			continue
		}
		pick := addressPick{want: d.marks.Address}
		for _, s := range p.cfg.AddressSources {
			var ips []string
			if s == SourceAgent {
				ips = p.agentAddresses(ctx, region, d)
			} else {
				for _, n := range d.nics {
					table, ok := tables[n.network]
					if !ok {
						table = p.leaseTable(ctx, region, n.network)
						tables[n.network] = table
					}
					ips = append(ips, table[n.mac]...)
				}
			}
			if pick.offer(ips) {
				break
			}
		}
		d.ip, d.seen = pick.ip, pick.seen
	}
}

// leaseTable reads a network's DHCP leases, by MAC; nil when the network
// has none to give (no DHCP, gone, or the call failed).
func (p *Provider) leaseTable(ctx context.Context, region, network string) map[string][]string {
	var leases []libvirt.NetworkDHCPLease
	err := p.do(ctx, region, "ListLeases", p.cfg.CallTimeout.Duration, func(c *libvirt.Connect) error {
		net, err := c.LookupNetworkByName(network)
		if err != nil {
			return err
		}
		defer func() { _ = net.Free() }()
		if p.hooks.leases != nil {
			leases, err = p.hooks.leases(net)
		} else {
			// The table the per-domain lease source reads inside the
			// daemon: for that source the drivers' virDomainInterfaceAddresses
			// calls virDomainNetDHCPInterfaces, which asks
			// virNetworkGetDHCPLeases for each NIC's MAC.
			leases, err = net.GetDHCPLeases()
		}
		return err
	})
	if err != nil {
		logr.FromContextOrDiscard(ctx).V(contract.LogCall).Info("address source did not answer", "source", SourceLease, "network", network, "error", err.Error())
		return nil
	}
	table := map[string][]string{}
	for _, l := range leases {
		table[l.Mac] = append(table[l.Mac], l.IPaddr)
	}
	return table
}

// agentAddresses asks the domain's guest agent for its addresses.
func (p *Provider) agentAddresses(ctx context.Context, region string, d *listedDomain) []string {
	lookup := p.hooks.addresses
	if lookup == nil {
		lookup = (*libvirt.Domain).ListAllInterfaceAddresses
	}
	var ips []string
	err := p.call(ctx, backendCall{step: "AgentAddresses", region: region, domain: d.name}, p.cfg.CallTimeout.Duration, func(*libvirt.Connect) error {
		var ifaces []libvirt.DomainInterface
		err := d.h.with(func(dom *libvirt.Domain) (err error) {
			ifaces, err = lookup(dom, libvirt.DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT)
			return err
		})
		if err != nil {
			return err
		}
		for _, iface := range ifaces {
			if iface.Name == "lo" {
				continue
			}
			for _, a := range iface.Addrs {
				ips = append(ips, a.Addr)
			}
		}
		return nil
	})
	if err != nil {
		// ips stays the late call's, if it runs on past its budget.
		logr.FromContextOrDiscard(ctx).V(contract.LogCall).Info("address source did not answer", "source", SourceAgent, "error", err.Error())
		return nil
	}
	return ips
}

func freeStats(stats []libvirt.DomainStats) {
	for i := range stats {
		if stats[i].Domain != nil {
			_ = stats[i].Domain.Free()
		}
	}
}
