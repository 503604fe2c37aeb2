package libvirt

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// The project's XML namespace for the domain's <metadata> element, where
// the marks live (gc-mark: written-metadata, written at define: there is
// no mark window). Only the API writes a domain's metadata; a guest
// cannot.
const (
	xmlNamespace = "https://egressproxies.io/xmlns/libvirt/v1"
	xmlPrefix    = "egressproxies"
)

// marks is the metadata element: <egressproxies:instance>.
type marks struct {
	XMLName xml.Name `xml:"https://egressproxies.io/xmlns/libvirt/v1 instance"`
	// Managed is the CreateRequest.Owner that made the domain, or
	// contract.LegacyManagedValue on a domain of an earlier release.
	Managed   string `xml:"managed"`
	UID       string `xml:"uid"`
	CreatedAt string `xml:"createdAt"`
	// Started is written just before the first start: a shut-off domain
	// without it has never run (provisioning-state: marker).
	Started string `xml:"started,omitempty"`
	// Address is the static address the domain was made with
	// (CreateRequest.Network's IP), empty for one whose address the
	// network's DHCP gives: the only address Get reports it Running with.
	Address string `xml:"address,omitempty"`
}

func (m marks) started() bool { return m.Started == "true" }

// xml renders the element for a domain definition, with an explicit
// prefix and the namespace declared, as libvirt stores it. Every value was
// validated (DNS labels, an RFC 3339 time, "true"), so none needs
// escaping; EscapeText guards anyway.
func (m marks) xml() string { return m.render(xmlPrefix + ":") }

// bare renders the element without namespace, for virDomainSetMetadata,
// which puts it in the namespace itself (and refuses one declared).
func (m marks) bare() string { return m.render("") }

func (m marks) render(prefix string) string {
	var b strings.Builder
	if prefix == "" {
		b.WriteString("<instance>")
	} else {
		fmt.Fprintf(&b, `<%sinstance xmlns:%s=%q>`, prefix, xmlPrefix, xmlNamespace)
	}
	for _, kv := range [][2]string{{"managed", m.Managed}, {"uid", m.UID}, {"createdAt", m.CreatedAt}, {"started", m.Started}, {"address", m.Address}} {
		if kv[1] == "" {
			continue
		}
		fmt.Fprintf(&b, "<%s%s>", prefix, kv[0])
		_ = xml.EscapeText(&b, []byte(kv[1]))
		fmt.Fprintf(&b, "</%s%s>", prefix, kv[0])
	}
	fmt.Fprintf(&b, "</%sinstance>", prefix)
	return b.String()
}

// parseMarks finds our element among the <metadata> children (other tools
// keep theirs there too); none is the zero marks.
func parseMarks(inner string) (marks, error) {
	dec := xml.NewDecoder(strings.NewReader(inner))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return marks{}, nil
		}
		if err != nil {
			return marks{}, err
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Space == xmlNamespace && se.Name.Local == "instance" {
			var m marks
			err := dec.DecodeElement(&m, &se)
			return m, err
		}
	}
}

// parseMetadata reads the marks from virDomainGetMetadata's answer for
// our namespace: the element alone, its namespace left off (libvirt strips
// it: https://libvirt.org/html/libvirt-libvirt-domain.html#virDomainGetMetadata).
func parseMetadata(doc string) (marks, error) {
	dec := xml.NewDecoder(strings.NewReader(doc))
	dec.DefaultSpace = xmlNamespace
	var m marks
	err := dec.Decode(&m)
	return m, err
}

// domain is what one read of a domain gives.
type domain struct {
	name   string
	state  libvirt.DomainState
	reason int
	marks  marks
	ip     string
	// seen is, for a domain with a static address whose guest has not
	// reported it, the address the guest reports instead ("" for none).
	seen string
}

// running says the guest runs, so it may have an address.
func (d domain) running() bool {
	return d.state == libvirt.DOMAIN_RUNNING || d.state == libvirt.DOMAIN_BLOCKED
}

// marked says the domain carries the operator's marks (any Owner's): an
// instance. A domain without them is a person's, whatever its name.
func (d domain) marked() bool { return d.marks.Managed != "" }

func (d domain) active() bool {
	return d.state == libvirt.DOMAIN_RUNNING || d.state == libvirt.DOMAIN_BLOCKED || d.state == libvirt.DOMAIN_PAUSED
}

// owned says the domain is this Proxy's: marked by any install or release
// (an earlier release wrote "true", a renamed entry another Owner) and
// with its UID. An unmarked domain never is, whatever its name.
func (d domain) owned(uid string) bool {
	return d.marked() && d.marks.UID == uid
}

func (d domain) instance(region string) contract.Instance {
	state, ip := stateOf(d)
	inst := contract.Instance{ProviderID: ids.Format(region, d.name), Name: d.name, State: state, IP: ip, UID: d.marks.UID, Owner: d.marks.Managed}
	if d.running() && d.ip == "" && d.marks.Address != "" {
		inst.Message = waiting(d.marks.Address, d.seen)
	}
	if t, err := time.Parse(time.RFC3339, d.marks.CreatedAt); err == nil {
		inst.CreatedAt = t
	}
	return inst
}

// read reads a domain's name, state, marks and, when it runs, address.
func (p *Provider) read(ctx context.Context, dom *libvirt.Domain) (domain, error) {
	var d domain
	var err error
	if d.name, err = dom.GetName(); err != nil {
		return d, err
	}
	if d.state, d.reason, err = dom.GetState(); err != nil {
		return d, err
	}
	if p.hooks.state != nil {
		d.state, d.reason = p.hooks.state(dom, d.state, d.reason)
	}
	if _, d.marks, err = definition(dom); err != nil {
		return d, err
	}
	if d.running() {
		d.ip, d.seen = p.address(ctx, dom, d.marks.Address)
	}
	return d, nil
}

// definition reads the domain's XML (the live one of a running domain)
// and the marks in it.
func definition(dom *libvirt.Domain) (*libvirtxml.Domain, marks, error) {
	doc, err := dom.GetXMLDesc(0)
	if err != nil {
		return nil, marks{}, err
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(doc); err != nil {
		name, _ := dom.GetName()
		return nil, marks{}, fmt.Errorf("domain %s: %w", name, err)
	}
	var m marks
	if def.Metadata != nil {
		if m, err = parseMarks(def.Metadata.XML); err != nil {
			return nil, marks{}, fmt.Errorf("domain %s metadata: %w", def.Name, err)
		}
	}
	return &def, m, nil
}

// volumesOf names the volumes the domain's disks use, by volume name (a
// disk on a pool volume) or file name (a disk on a path): Delete leaves
// them to a domain that is not the operator's.
func volumesOf(def *libvirtxml.Domain) map[string]bool {
	out := map[string]bool{}
	if def.Devices == nil {
		return out
	}
	for _, disk := range def.Devices.Disks {
		switch src := disk.Source; {
		case src == nil:
		case src.Volume != nil:
			out[src.Volume.Volume] = true
		case src.File != nil:
			out[path.Base(src.File.File)] = true
		}
	}
	return out
}

// address asks the sources in the configured order (default lease, then
// agent) for the domain's address: the first routable IPv4 of the first
// source that has one or, for a domain with a static address (want),
// exactly that address from any source, and else what the guest reports
// instead (addressPick). A source that fails (no agent in the guest yet,
// a bridged NIC without leases) is skipped: the domain is Provisioning
// until a source answers.
func (p *Provider) address(ctx context.Context, dom *libvirt.Domain, want string) (ip, seen string) {
	lookup := p.hooks.addresses
	if lookup == nil {
		lookup = (*libvirt.Domain).ListAllInterfaceAddresses
	}
	pick := addressPick{want: want}
	for _, s := range p.cfg.AddressSources {
		src := libvirt.DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE
		if s == SourceAgent {
			src = libvirt.DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT
		}
		ifaces, err := lookup(dom, src)
		if err != nil {
			logr.FromContextOrDiscard(ctx).V(contract.LogCall).Info("address source did not answer", "source", s, "error", err.Error())
			continue
		}
		var ips []string
		for _, iface := range ifaces {
			if iface.Name == "lo" {
				continue
			}
			for _, a := range iface.Addrs {
				ips = append(ips, a.Addr)
			}
		}
		if pick.offer(ips) {
			break
		}
	}
	return pick.ip, pick.seen
}

// domainXML is the definition of the instance's domain: the measured
// shape that boots the proxy image under TCG (measured by make e2e and
// make image-smoke, docs/testing.md): machine pc, virtio disk on the overlay, the seed on an IDE cdrom
// (the cloud kernel has no AHCI, so not SATA), a virtio NIC on the
// region's network, a serial console, the guest agent channel, virtio-rng
// (entropy for a guest that boots without KVM), and no balloon.
func (p *Provider) domainXML(pl plan, req contract.CreateRequest, now time.Time) (string, error) {
	port := uint(0)
	m := marks{Managed: req.Owner, UID: req.UID, CreatedAt: now.Format(time.RFC3339)}
	nic := libvirtxml.DomainInterface{
		Source: &libvirtxml.DomainInterfaceSource{Network: &libvirtxml.DomainInterfaceSourceNetwork{Network: pl.region.Network}},
		Model:  &libvirtxml.DomainInterfaceModel{Type: "virtio"},
	}
	if req.Network != nil {
		// The MAC the seed's network-config matches; without a static
		// address libvirt chooses one, as before.
		m.Address = req.Network.IP()
		nic.MAC = &libvirtxml.DomainInterfaceMAC{Address: staticMAC(req.UID, req.Name)}
	}
	serial := libvirtxml.DomainSerial{
		Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
		Target: &libvirtxml.DomainSerialTarget{Port: &port},
	}
	if p.cfg.SerialLogDir != "" {
		serial.Log = &libvirtxml.DomainChardevLog{File: path.Join(p.cfg.SerialLogDir, req.Name+".serial.log"), Append: "on"}
	}
	def := libvirtxml.Domain{
		Type:     p.domainType(pl.regionName),
		Name:     req.Name,
		Metadata: &libvirtxml.DomainMetadata{XML: m.xml()},
		Memory:   &libvirtxml.DomainMemory{Value: pl.machine.MemoryMiB, Unit: "MiB"},
		VCPU:     &libvirtxml.DomainVCPU{Value: pl.machine.CPUs},
		OS: &libvirtxml.DomainOS{
			// The host's architecture: libvirt's default when none is named.
			Type: &libvirtxml.DomainOSType{Type: "hvm", Machine: p.cfg.Machine},
		},
		OnCrash: "destroy",
		Devices: &libvirtxml.DomainDeviceList{
			Disks: []libvirtxml.DomainDisk{
				{
					Device: "disk",
					Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "qcow2"},
					Source: &libvirtxml.DomainDiskSource{Volume: &libvirtxml.DomainDiskSourceVolume{Pool: pl.region.Pool, Volume: overlayName(req.Name)}},
					Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
				},
				{
					Device:   "cdrom",
					Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
					Source:   &libvirtxml.DomainDiskSource{Volume: &libvirtxml.DomainDiskSourceVolume{Pool: pl.region.Pool, Volume: seedName(req.Name)}},
					Target:   &libvirtxml.DomainDiskTarget{Dev: "hdc", Bus: "ide"},
					ReadOnly: &libvirtxml.DomainDiskReadOnly{},
				},
			},
			Interfaces: []libvirtxml.DomainInterface{nic},
			Serials:    []libvirtxml.DomainSerial{serial},
			Consoles: []libvirtxml.DomainConsole{{
				Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
				Target: &libvirtxml.DomainConsoleTarget{Type: "serial", Port: &port},
			}},
			Channels: []libvirtxml.DomainChannel{{
				Source: &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{Mode: "bind"}},
				Target: &libvirtxml.DomainChannelTarget{VirtIO: &libvirtxml.DomainChannelTargetVirtIO{Name: "org.qemu.guest_agent.0"}},
			}},
			RNGs: []libvirtxml.DomainRNG{{
				Model:   "virtio",
				Backend: &libvirtxml.DomainRNGBackend{Random: &libvirtxml.DomainRNGBackendRandom{Device: "/dev/urandom"}},
			}},
			MemBalloon: &libvirtxml.DomainMemBalloon{Model: "none"},
		},
	}
	doc, err := def.Marshal()
	if err != nil {
		return "", contract.Permanentf("domain %s: render XML: %w", req.Name, err)
	}
	return doc, nil
}
