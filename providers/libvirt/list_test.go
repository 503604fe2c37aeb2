package libvirt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// callCount counts a provider's backend calls: every step through the call
// hook, and every call a test hook stands in for inside a step (the address
// lookup, the lease table). The list before this count made every call of
// a region inside one step; the test's counter then also counted its
// GetState through the state hook, and printed 45 for 24 domains.
type callCount struct{ n atomic.Int64 }

func countCalls(p *Provider) *callCount {
	cc := &callCount{}
	call, addresses, leases := p.hooks.call, p.hooks.addresses, p.hooks.leases
	p.hooks.call = func(ctx context.Context, c backendCall, run func() error) error {
		cc.n.Add(1)
		return call(ctx, c, run)
	}
	p.hooks.addresses = func(dom *libvirt.Domain, src libvirt.DomainInterfaceAddressesSource) ([]libvirt.DomainInterface, error) {
		cc.n.Add(1)
		return addresses(dom, src)
	}
	p.hooks.leases = func(net *libvirt.Network) ([]libvirt.NetworkDHCPLease, error) {
		cc.n.Add(1)
		return leases(net)
	}
	return cc
}

// fleet is n domains of one Owner in host1, named prefix-NNNN, defined straight through the
// control's connection with the provider's own definition (the test
// driver checks no disk source at define or start, so there are no
// volumes); every third is defined and never started, the others run with
// an address reported.
type fleet struct {
	owner string
	ids   []string
	ips   map[string]string // providerID → reported address; none for the stopped
	// remove undefines the fleet (also at the test's end).
	remove func()
}

func defineFleet(tb testing.TB, b *testBackend, prefix, owner string, n int) fleet {
	tb.Helper()
	p := b.provider(tb)
	conn := b.conns[testRegion]
	f := fleet{owner: owner, ips: map[string]string{}}
	var doms []*libvirt.Domain
	f.remove = func() {
		for _, dom := range doms {
			if active, _ := dom.IsActive(); active {
				_ = dom.Destroy()
			}
			_ = dom.Undefine()
			_ = dom.Free()
		}
		doms = nil
	}
	tb.Cleanup(func() { f.remove() })
	now := time.Now().UTC()
	for i := range n {
		req := contract.CreateRequest{Name: fmt.Sprintf("%s-%04d", prefix, i), UID: fmt.Sprintf("0e9d6c1a-7f3b-4d2e-9a5c-%012x", i),
			Owner: owner, Port: 3128, CloudInit: []byte("#cloud-config\n"),
			Placement: contract.Placement{Region: testRegion, MachineType: "small", Image: "debian-12"}}
		pl, err := p.plan(req)
		if err != nil {
			tb.Fatal(err)
		}
		m := marks{Managed: req.Owner, UID: req.UID, CreatedAt: now.Format(time.RFC3339)}
		running := i%3 != 0
		if running {
			m.Started = "true"
		}
		doc, err := p.domainXML(pl, req, now)
		if err != nil {
			tb.Fatal(err)
		}
		dom, err := conn.DomainDefineXML(doc)
		if err != nil {
			tb.Fatal(err)
		}
		id := ids.Format(testRegion, req.Name)
		f.ids = append(f.ids, id)
		doms = append(doms, dom)
		if err := dom.SetMetadata(libvirt.DOMAIN_METADATA_ELEMENT, m.bare(), xmlPrefix, xmlNamespace, libvirt.DOMAIN_AFFECT_CONFIG); err != nil {
			tb.Fatal(err)
		}
		if !running {
			continue
		}
		if err := dom.Create(); err != nil {
			tb.Fatal(err)
		}
		ip := fmt.Sprintf("10.20.%d.%d", i/250, i%250+1)
		if err := (control{b}).ReportIP(context.Background(), id, ip); err != nil {
			tb.Fatal(err)
		}
		f.ips[id] = ip
	}
	return f
}

// check says what a list of the fleet's Owner got wrong.
func (f fleet) check(got []contract.Instance) error {
	if len(got) != len(f.ids) {
		return fmt.Errorf("listed %d instances, want %d", len(got), len(f.ids))
	}
	for _, inst := range got {
		ip, running := f.ips[inst.ProviderID]
		want := contract.StateProvisioning
		if running {
			want = contract.StateRunning
		}
		if inst.State != want || inst.IP != ip || inst.Owner != f.owner {
			return fmt.Errorf("%s: state %s, IP %q, owner %q; want %s, %q, %q", inst.ProviderID, inst.State, inst.IP, inst.Owner, want, ip, f.owner)
		}
	}
	return nil
}

// ListByTag's backend calls do not grow several times with the domains:
// a bulk list with the states, one read of each domain's marks, one lease
// table per network, and the agent only for a domain the leases do not
// answer. The list before read each domain's state and XML and asked the
// lease source of each running one, one call after another.
func TestListByTagCallsPerDomain(t *testing.T) {
	b := newTestBackend(t)
	const n = 24
	f := defineFleet(t, b, "egress-calls", "c0ffee12-fleet-calls", n)
	p := b.provider(t)
	cc := countCalls(p)
	got, err := p.ListByTag(context.Background(), contract.LabelManaged, f.owner)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.check(got); err != nil {
		t.Error(err)
	}
	// One read per domain on the hosts (the fleet, test:///default's own
	// "test", any other test's); per region the list; one lease table
	// (its step and the call in it) for the fleet's network.
	all := 0
	for _, conn := range b.conns {
		doms, err := conn.ListAllDomains(0)
		if err != nil {
			t.Fatal(err)
		}
		all += len(doms)
		freeAll(doms)
	}
	if calls, limit := cc.n.Load(), int64(all+len(b.conns)+2); calls > limit {
		t.Errorf("ListByTag over %d domains (%d of them the fleet's) made %d backend calls, want at most %d (one per domain and a few per region)", all, n, calls, limit)
	}
}

// BenchmarkListByTag measures one sweep over 1,000 domains of one Owner
// (a third defined and never started, the rest running with an address):
// ns/op is the time of a sweep on the in-process test driver (no network:
// a remote daemon adds a round trip per call), calls/op the backend calls
// it makes (callCount). The figures are in the spec, entry 12.
func BenchmarkListByTag(b *testing.B) {
	be := newTestBackend(b)
	for _, n := range []int{100, 1000} {
		// b.Run calls the function again for each b.N: the fleet is made
		// once, and removed when the whole benchmark ends.
		var f fleet
		b.Run(fmt.Sprintf("domains=%d", n), func(sb *testing.B) {
			if f.ids == nil {
				f = defineFleet(b, be, fmt.Sprintf("egress-bench%d", n), fmt.Sprintf("c0ffee12-bench-%d", n), n)
			}
			p := be.provider(sb)
			cc := countCalls(p)
			sb.ResetTimer()
			for range sb.N {
				got, err := p.ListByTag(context.Background(), contract.LabelManaged, f.owner)
				if err != nil {
					sb.Fatal(err)
				}
				if len(got) != n {
					sb.Fatalf("listed %d, want %d", len(got), n)
				}
			}
			sb.StopTimer()
			sb.ReportMetric(float64(cc.n.Load())/float64(sb.N), "calls/op")
			if err := f.check(mustList(sb, p, f.owner)); err != nil {
				sb.Error(err)
			}
		})
		if f.remove != nil {
			f.remove()
		}
	}
}

func mustList(tb testing.TB, p *Provider, owner string) []contract.Instance {
	tb.Helper()
	got, err := p.ListByTag(context.Background(), contract.LabelManaged, owner)
	if err != nil {
		tb.Fatal(err)
	}
	return got
}

// The agent is asked only for a running domain the lease table does not
// answer for (a NIC whose lease is gone, a bridged network without DHCP),
// and its answer is the address; the others make no agent call.
func TestListByTagAsksTheAgentOnlyWithoutALease(t *testing.T) {
	b := newTestBackend(t)
	f := defineFleet(t, b, "egress-agent", "c0ffee12-fleet-agent", 6)
	// Drop the lease of one running domain: its guest reports through the
	// agent alone.
	unleased := f.ids[1]
	err := b.withDomain(unleased, func(dom *libvirt.Domain) error {
		doc, err := dom.GetXMLDesc(0)
		if err != nil {
			return err
		}
		_, nics, err := marksAndNICs(doc)
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, n := range nics {
			delete(b.leased[n.network], n.mac)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	p := b.provider(t)
	var agent []string
	call := p.hooks.call
	p.hooks.call = func(ctx context.Context, c backendCall, run func() error) error {
		if c.step == "AgentAddresses" {
			agent = append(agent, ids.Format(c.region, c.domain))
		}
		return call(ctx, c, run)
	}
	got, err := p.ListByTag(context.Background(), contract.LabelManaged, f.owner)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.check(got); err != nil {
		t.Error(err)
	}
	if len(agent) != 1 || agent[0] != unleased {
		t.Errorf("the agent was asked for %v, want only %s (the one domain without a lease)", agent, unleased)
	}
}

// A list call that outlives the list (held past its budget: a daemon that
// answers late) must not use the domain handle the list has freed once it
// returned: libvirt caught the old code's late virDomainGetXMLDesc on the
// freed handle ("invalid domain pointer"), by luck, since the memory had
// not been reused.
func TestListByTagNeverUsesAFreedHandle(t *testing.T) {
	b := newTestBackend(t)
	f := defineFleet(t, b, "egress-late", "c0ffee12-fleet-late", 3)
	p := b.provider(t)
	p.cfg.CallTimeout.Duration = 100 * time.Millisecond
	held := ids.Format(testRegion, "egress-late-0001")
	listed, late := make(chan struct{}), make(chan error, 1)
	call := p.hooks.call
	p.hooks.call = func(ctx context.Context, c backendCall, run func() error) error {
		if c.step == "ReadDomain" && ids.Format(c.region, c.domain) == held {
			<-ctx.Done() // the list gives up on this call
			<-listed     // and returns; then the daemon answers
			err := run()
			late <- err
			return err
		}
		return call(ctx, c, run)
	}
	if _, err := p.ListByTag(context.Background(), contract.LabelManaged, f.owner); contract.ClassOf(err) != contract.ClassTransient {
		t.Errorf("ListByTag with a call held past its budget = %v, want a transient error", err)
	}
	close(listed)
	if err := <-late; code(err) == libvirt.ERR_INVALID_DOMAIN {
		t.Errorf("the call that outlived the list used a freed domain handle: %v", err)
	}
}

// A domain undefined between the bulk list and the read of its marks (a
// racing Delete, a person's virsh undefine) is gone: the list leaves it
// out and lists the rest. libvirt answers the read on the stale handle
// with ERR_NO_DOMAIN (the daemon looks the handle's UUID up again,
// virDomainObjListFindByUUID).
func TestListByTagSkipsADomainUndefinedMidSweep(t *testing.T) {
	b := newTestBackend(t)
	f := defineFleet(t, b, "egress-mid", "c0ffee12-fleet-mid", 3)
	p := b.provider(t)
	gone := ids.Format(testRegion, "egress-mid-0001")
	var once sync.Once
	call := p.hooks.call
	p.hooks.call = func(ctx context.Context, c backendCall, run func() error) error {
		if c.step == "ReadDomain" && ids.Format(c.region, c.domain) == gone {
			once.Do(func() {
				err := b.withDomain(gone, func(dom *libvirt.Domain) error {
					if err := dom.Destroy(); err != nil {
						return err
					}
					return dom.Undefine()
				})
				if err != nil {
					t.Errorf("undefining %s mid-sweep: %v", gone, err)
				}
			})
		}
		return call(ctx, c, run)
	}
	got, err := p.ListByTag(context.Background(), contract.LabelManaged, f.owner)
	if err != nil {
		t.Fatalf("ListByTag with a domain undefined mid-sweep = %v, want the others listed", err)
	}
	var listedIDs []string
	for _, inst := range got {
		listedIDs = append(listedIDs, inst.ProviderID)
	}
	slices.Sort(listedIDs)
	if want := []string{f.ids[0], f.ids[2]}; !slices.Equal(listedIDs, want) {
		t.Errorf("ListByTag with %s undefined mid-sweep listed %v, want %v", gone, listedIDs, want)
	}
}

// A domain whose marks could not be read (a call that failed, not a
// domain that is gone) fails the whole list (list-partial: fail-whole):
// a list without it would have the garbage collector and a finalizer
// take the instance for gone, and a Proxy's finalizer released with its
// VM left running.
func TestListByTagFailsWholeWhenAReadFails(t *testing.T) {
	b := newTestBackend(t)
	f := defineFleet(t, b, "egress-unread", "c0ffee12-fleet-unread", 3)
	p := b.provider(t)
	b.faults["ReadDomain"] = []error{b.provoke(nil)}
	got, err := p.ListByTag(context.Background(), contract.LabelManaged, f.owner)
	if err == nil || contract.ClassOf(err) != contract.ClassTransient || got != nil {
		t.Errorf("ListByTag with one domain's read failing = %d instances, %v; want none and a transient error", len(got), err)
	}
}

// A list call still running on a domain handle when the list returns
// (the guest agent answering past the call's budget) keeps the handle:
// the list frees it only once that call is done, so the call never runs
// on into freed memory.
func TestListByTagKeepsAHandleACallStillUses(t *testing.T) {
	b := newTestBackend(t)
	f := defineFleet(t, b, "egress-inuse", "c0ffee12-fleet-inuse", 3)
	p := b.provider(t)
	p.cfg.CallTimeout.Duration = 100 * time.Millisecond
	p.cfg.AddressSources = []string{SourceAgent}
	const held = "egress-inuse-0001"
	listed, late := make(chan struct{}), make(chan error, 1)
	addresses := p.hooks.addresses
	p.hooks.addresses = func(dom *libvirt.Domain, src libvirt.DomainInterfaceAddressesSource) ([]libvirt.DomainInterface, error) {
		if name, err := dom.GetName(); err == nil && name == held {
			<-listed // inside the call: the list gives up on it and returns
			_, err := dom.GetXMLDesc(0)
			late <- err
		}
		return addresses(dom, src)
	}
	if _, err := p.ListByTag(context.Background(), contract.LabelManaged, f.owner); err != nil {
		t.Fatal(err)
	}
	close(listed)
	if err := <-late; err != nil {
		t.Errorf("the call still running when the list returned lost its domain handle: %v", err)
	}
}

// closeConn takes the provider's connection to host1 away from it
// and closes it, saying whether that closed it: virConnectClose answers 0
// when no reference is left and 1 while one is
// (https://libvirt.org/html/libvirt-libvirt-host.html#virConnectClose),
// and every domain handle holds one on its connection until it is freed
// (virGetDomain, src/datatypes.c).
func closeConn(t *testing.T, p *Provider) bool {
	t.Helper()
	p.mu.Lock()
	c := p.conns[slotKey(testRegion, 0)]
	delete(p.conns, slotKey(testRegion, 0))
	p.mu.Unlock()
	if c == nil {
		t.Fatalf("the provider holds no connection to %s", testRegion)
	}
	left, err := c.Close()
	if err != nil {
		t.Fatal(err)
	}
	return left == 0
}

// A list frees every domain handle it took: a sweep that kept them would
// hold one more for every domain of the host every sweep (client memory,
// and a reference that keeps a dropped connection open), and so does a
// call still using a handle when the list returned, once it ends.
func TestListByTagFreesEveryHandle(t *testing.T) {
	b := newTestBackend(t)
	f := defineFleet(t, b, "egress-refs", "c0ffee12-fleet-refs", 6)
	p := b.provider(t)
	p.cfg.CallTimeout.Duration = 100 * time.Millisecond
	p.cfg.AddressSources = []string{SourceAgent}
	if _, err := p.Get(context.Background(), ids.Format(testRegion, "egress-refs-none")); !errors.Is(err, contract.ErrNotFound) {
		t.Fatal(err)
	}
	if !closeConn(t, p) {
		t.Skip("skipped: the provider's connection holds references of its own, so a leaked handle cannot show")
	}
	mustList(t, p, f.owner)
	if !closeConn(t, p) {
		t.Error("a list left references on its connection: domain handles it never freed")
	}

	// An agent call still inside its handle when the list returns.
	const held = "egress-refs-0001"
	listed, finished := make(chan struct{}), make(chan struct{})
	addresses, call := p.hooks.addresses, p.hooks.call
	p.hooks.addresses = func(dom *libvirt.Domain, src libvirt.DomainInterfaceAddressesSource) ([]libvirt.DomainInterface, error) {
		if name, err := dom.GetName(); err == nil && name == held {
			<-listed
		}
		return addresses(dom, src)
	}
	p.hooks.call = func(ctx context.Context, c backendCall, run func() error) error {
		err := call(ctx, c, run)
		if c.step == "AgentAddresses" && c.domain == held {
			close(finished) // run has returned: the call is out of the handle
		}
		return err
	}
	mustList(t, p, f.owner)
	close(listed)
	<-finished
	if !closeConn(t, p) {
		t.Error("a list whose call outlived it left references on its connection once the call ended: a handle never freed")
	}

	// A bulk list whose answer comes after the list gave up on it: the
	// connection it waits for opens only then (no connection is held:
	// closeConn took the last one).
	gaveUp, answered := make(chan struct{}), make(chan struct{})
	connect := p.hooks.connect
	p.hooks.connect = func(uri string) (*libvirt.Connect, error) {
		<-gaveUp
		return connect(uri)
	}
	p.hooks.call = func(ctx context.Context, c backendCall, run func() error) error {
		err := call(ctx, c, run)
		if c.step == "ListDomains" {
			close(answered)
		}
		return err
	}
	if _, err := p.ListByTag(context.Background(), contract.LabelManaged, f.owner); err == nil {
		t.Fatal("ListByTag whose bulk list outlived its budget = nil error")
	}
	close(gaveUp)
	<-answered
	if !closeConn(t, p) {
		t.Error("a bulk list answered after the list gave up left references on its connection: handles never freed")
	}
}

// The guest agent answers the loopback interface first (qemu-ga lists
// the guest's interfaces in the kernel's order): the list skips it and
// reads the address of the next.
func TestListByTagSkipsTheAgentsLoopback(t *testing.T) {
	b := newTestBackend(t)
	f := defineFleet(t, b, "egress-lo", "c0ffee12-fleet-lo", 3)
	p := b.provider(t)
	p.cfg.AddressSources = []string{SourceAgent}
	addresses := p.hooks.addresses
	p.hooks.addresses = func(dom *libvirt.Domain, src libvirt.DomainInterfaceAddressesSource) ([]libvirt.DomainInterface, error) {
		ifaces, err := addresses(dom, src)
		lo := libvirt.DomainInterface{Name: "lo", Hwaddr: "00:00:00:00:00:00", Addrs: []libvirt.DomainIPAddress{{Type: libvirt.IP_ADDR_TYPE_IPV4, Addr: "127.0.0.1", Prefix: 8}}}
		return append([]libvirt.DomainInterface{lo}, ifaces...), err
	}
	if err := f.check(mustList(t, p, f.owner)); err != nil {
		t.Error(err)
	}
}
