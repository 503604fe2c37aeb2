package libvirt

import (
	"context"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"libvirt.org/go/libvirt"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// A static address (contract §2.2, spec entries 7 and 11): the seed holds
// a network-config matched by the MAC the provider gives the domain's
// NIC; the requested address is recorded beside the marks, so Get, from
// any provider, says Running only with exactly that address.

// testNetwork is the static network of the package's tests and of
// TestContract: any network will do on the test driver, where no guest
// boots. Not the harness's default GuestIP (192.0.2.10), which plays
// the guest reporting another address.
var testNetwork = contract.StaticNetwork{
	Address: netip.MustParsePrefix("192.0.2.50/24"),
	Gateway: netip.MustParseAddr("192.0.2.1"),
	DNS:     []netip.Addr{netip.MustParseAddr("192.0.2.53"), netip.MustParseAddr("198.51.100.53")},
}

func staticRequest(name string, n *contract.StaticNetwork) contract.CreateRequest {
	return contract.CreateRequest{Name: name, UID: "0e9d6c1a-7f3b-4d2e-9a5c-" + strings.Repeat("5", 12), Owner: testOwner, Port: 3128,
		Placement: contract.Placement{Region: testRegion, MachineType: "small", Image: "debian-12"},
		CloudInit: []byte("#cloud-config\n"), Network: n}
}

func nicMAC(t *testing.T, b *testBackend, providerID string) string {
	t.Helper()
	var mac string
	err := b.withDomain(providerID, func(dom *libvirt.Domain) error {
		def, err := persistentDefinition(dom)
		if err == nil && def.Devices != nil && len(def.Devices.Interfaces) == 1 && def.Devices.Interfaces[0].MAC != nil {
			mac = def.Devices.Interfaces[0].MAC.Address
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return mac
}

// The seed's network-config gives the NIC the requested network; two
// instances get NICs of their own MACs.
func TestCreateDeliversTheStaticNetwork(t *testing.T) {
	b := newTestBackend(t)
	p := b.provider(t)
	ctx := context.Background()
	other := testNetwork
	other.Address = netip.MustParsePrefix("192.0.2.51/24")
	var macs []string
	for _, req := range []contract.CreateRequest{staticRequest("egress-static-a", &testNetwork), staticRequest("egress-static-b", &other)} {
		inst, err := p.Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Delete(ctx, inst.ProviderID) })
		got, err := control{b}.DeliveredNetwork(ctx, inst.ProviderID)
		if err != nil {
			t.Fatalf("%s: %v", req.Name, err)
		}
		if !reflect.DeepEqual(got, *req.Network) {
			t.Errorf("%s: the guest is given %+v, want %+v", req.Name, got, *req.Network)
		}
		macs = append(macs, nicMAC(t, b, inst.ProviderID))
	}
	if macs[0] == macs[1] {
		t.Errorf("two instances' NICs share the MAC %s", macs[0])
	}
}

// Without a Network the seed holds no network-config: the guest keeps
// the image's DHCP, as before contract v0.4.0.
func TestNilNetworkKeepsDHCP(t *testing.T) {
	b := newTestBackend(t)
	p := b.provider(t)
	ctx := context.Background()
	inst, err := p.Create(ctx, staticRequest("egress-dhcp", nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Delete(ctx, inst.ProviderID) })
	iso, err := b.seed(inst.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	if doc, err := readISOFile(iso, "network-config"); err == nil {
		t.Errorf("a Create without Network wrote network-config:\n%s", doc)
	}
	if err := (control{b}).ReportIP(ctx, inst.ProviderID, "192.0.2.77"); err != nil {
		t.Fatal(err)
	}
	if got, err := b.provider(t).Get(ctx, inst.ProviderID); err != nil || got.State != contract.StateRunning || got.IP != "192.0.2.77" {
		t.Errorf("Get = %+v, %v; want Running with the address the guest reports", got, err)
	}
}

// Get and ListByTag, from a provider that did not make the domain (an
// operator restarted), say Provisioning while the guest reports another
// address than the requested one, with a Message naming both, and
// Running with exactly the requested one once the guest reports it.
func TestRunningOnlyWithTheStaticAddress(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	req := staticRequest("egress-static-wait", &testNetwork)
	inst, err := b.provider(t).Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.provider(t).Delete(ctx, inst.ProviderID) })
	check := func(when string, wantState contract.State, wantIP string, wantMessage ...string) {
		t.Helper()
		p := b.provider(t)
		got, err := p.Get(ctx, inst.ProviderID)
		if err != nil {
			t.Fatal(err)
		}
		found, err := p.ListByTag(ctx, contract.LabelUID, req.UID)
		if err != nil || len(found) != 1 {
			t.Fatalf("ListByTag: %v, %v", found, err)
		}
		for _, g := range []contract.Instance{got, found[0]} {
			if g.State != wantState || g.IP != wantIP {
				t.Errorf("%s: %s %q (%q), want %s %q", when, g.State, g.IP, g.Message, wantState, wantIP)
			}
			for _, m := range wantMessage {
				if !strings.Contains(g.Message, m) {
					t.Errorf("%s: Message %q does not name %s", when, g.Message, m)
				}
			}
		}
	}
	check("before the guest reports", contract.StateProvisioning, "", "192.0.2.50", "none")
	if err := (control{b}).ReportIP(ctx, inst.ProviderID, "192.0.2.77"); err != nil {
		t.Fatal(err)
	}
	check("the guest reports another address", contract.StateProvisioning, "", "192.0.2.50", "192.0.2.77")
	if err := (control{b}).ReportIP(ctx, inst.ProviderID, "192.0.2.50"); err != nil {
		t.Fatal(err)
	}
	check("the guest reports the static address", contract.StateRunning, "192.0.2.50")
}

// A domain Create finds again is returned as it is, with the network it
// was made with (the operator replaces it when the address differs).
func TestCreateReturnsAnInstanceOfAnotherAddressAsItIs(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	first := staticRequest("egress-static-again", &testNetwork)
	inst, err := b.provider(t).Create(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.provider(t).Delete(ctx, inst.ProviderID) })
	other := testNetwork
	other.Address = netip.MustParsePrefix("192.0.2.60/24")
	second := first
	second.Network = &other
	again, err := b.provider(t).Create(ctx, second)
	if err != nil || again.ProviderID != inst.ProviderID {
		t.Fatalf("Create again = %+v, %v", again, err)
	}
	if got, err := (control{b}).DeliveredNetwork(ctx, inst.ProviderID); err != nil || !reflect.DeepEqual(got, testNetwork) {
		t.Errorf("after a Create with another address the guest is given %+v, %v; want the first %+v", got, err, testNetwork)
	}
	if err := (control{b}).ReportIP(ctx, inst.ProviderID, "192.0.2.60"); err != nil {
		t.Fatal(err)
	}
	if got, err := b.provider(t).Get(ctx, inst.ProviderID); err != nil || got.State == contract.StateRunning {
		t.Errorf("Get = %+v, %v; want it waiting for the address it was made with", got, err)
	}
}

// A Create with a static network cut off at any call, before or after
// the call took effect, and resumed by a restarted provider, makes one
// domain whose seed gives the NIC the requested network.
func TestStaticCreateResumesAfterEveryCut(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	req := staticRequest("egress-static-cut", &testNetwork)
	var n int
	for range 2 { // the first fetches the image into the pool: count the second
		before := b.calls.Load()
		inst, err := b.provider(t).Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		n = int(b.calls.Load() - before)
		if err := b.provider(t).Delete(ctx, inst.ProviderID); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= n; i++ {
		for _, after := range []bool{false, true} {
			if err := (control{b}).CutCall(i, after); err != nil {
				t.Fatal(err)
			}
			_, _ = b.provider(t).Create(ctx, req)
			got, err := b.provider(t).Create(ctx, req)
			if err != nil {
				t.Fatalf("call %d cut (after: %v): the resumed Create: %v", i, after, err)
			}
			if n, err := (control{b}).DeliveredNetwork(ctx, got.ProviderID); err != nil || !reflect.DeepEqual(n, testNetwork) {
				t.Errorf("call %d cut (after: %v): the guest is given %+v, %v", i, after, n, err)
			}
			if err := b.provider(t).Delete(ctx, got.ProviderID); err != nil {
				t.Fatal(err)
			}
		}
	}
}
