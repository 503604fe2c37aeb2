package proxmox

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	pve "github.com/luthermonson/go-proxmox"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// testNetwork is a static address the tests request (TEST-NET-1).
func testNetwork(host int) *contract.StaticNetwork {
	return &contract.StaticNetwork{
		Address: netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(host)}), 24),
		Gateway: netip.MustParseAddr("192.0.2.1"),
		DNS:     []netip.Addr{netip.MustParseAddr("192.0.2.53"), netip.MustParseAddr("192.0.2.54")},
	}
}

// Create with a static address writes it as PVE's cloud-init settings
// (ipconfig0, nameserver: the record Get reads) and into the seed's
// network-config (what the guest's cloud-init reads), matched by the
// clone's MAC, in the calls a Create without one makes: no extra call.
func TestStaticAddressDelivered(t *testing.T) {
	f := startFake(t)
	p := f.provider(t)
	ctx := context.Background()

	before := f.s.CallsBesidesTaskPolls()
	if _, err := p.Create(ctx, request("dhcp", testUID(1))); err != nil {
		t.Fatal(err)
	}
	plain := f.s.CallsBesidesTaskPolls() - before

	req := request("static", testUID(2))
	req.Network = testNetwork(10)
	before = f.s.CallsBesidesTaskPolls()
	inst, err := p.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if n := f.s.CallsBesidesTaskPolls() - before; n != plain {
		t.Errorf("Create with a static address made %d calls, without %d; want the same", n, plain)
	}
	vmid, _ := vmidOf(inst.ProviderID)
	conf, _ := f.s.Config(vmid)
	if conf["ipconfig0"] != "ip=192.0.2.10/24,gw=192.0.2.1" || conf["nameserver"] != "192.0.2.53 192.0.2.54" {
		t.Errorf("ipconfig0 %q, nameserver %q; want \"ip=192.0.2.10/24,gw=192.0.2.1\", \"192.0.2.53 192.0.2.54\"", conf["ipconfig0"], conf["nameserver"])
	}
	got, mac, err := seedNetwork(f, vmid)
	if err != nil {
		t.Fatal(err)
	}
	if !sameNetwork(got, *req.Network) {
		t.Errorf("the seed's network-config says %+v; want %+v", got, *req.Network)
	}
	model, _, _ := strings.Cut(conf["net0"], ",")
	if _, want, _ := strings.Cut(model, "="); mac == "" || !strings.EqualFold(mac, want) {
		t.Errorf("the seed's network-config matches MAC %q; net0 is %q", mac, conf["net0"])
	}

	dhcpConf, _ := f.s.Config(vmid - 1)
	if _, ok := dhcpConf["ipconfig0"]; ok {
		t.Errorf("a Create without a static address wrote ipconfig0 %q", dhcpConf["ipconfig0"])
	}
}

// Get reports Running only at the requested address: while the guest
// agent reports another (the DHCP lease before cloud-init ran) or none,
// the VM is Provisioning with a Message naming both; a provider that
// restarted knows the address from the VM's ipconfig0.
func TestGetWaitsForTheStaticAddress(t *testing.T) {
	f := startFake(t)
	p := f.provider(t)
	ctx := context.Background()
	req := request("static", testUID(3))
	req.Network = testNetwork(10)
	inst, err := p.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	vmid, _ := vmidOf(inst.ProviderID)

	got, err := p.Get(ctx, inst.ProviderID)
	if err != nil || got.State != contract.StateProvisioning || got.IP != "" || !strings.Contains(got.Message, "192.0.2.10") {
		t.Errorf("Get before the agent answers = %+v, %v; want Provisioning, a Message naming 192.0.2.10", got, err)
	}
	if err := f.s.ReportIP(vmid, "198.51.100.77"); err != nil {
		t.Fatal(err)
	}
	for _, prov := range []*Provider{p, f.provider(t)} {
		got, err := prov.Get(ctx, inst.ProviderID)
		if err != nil || got.State != contract.StateProvisioning || got.IP != "" ||
			!strings.Contains(got.Message, "192.0.2.10") || !strings.Contains(got.Message, "198.51.100.77") {
			t.Errorf("Get with the agent at another address = %+v, %v; want Provisioning, a Message naming 192.0.2.10 and 198.51.100.77", got, err)
		}
	}
	if err := f.s.ReportIP(vmid, "198.51.100.77", "192.0.2.10"); err != nil {
		t.Fatal(err)
	}
	for _, prov := range []*Provider{p, f.provider(t)} {
		got, err := prov.Get(ctx, inst.ProviderID)
		if err != nil || got.State != contract.StateRunning || got.IP != "192.0.2.10" || got.Message != "" {
			t.Errorf("Get with the agent at the address = %+v, %v; want Running at 192.0.2.10", got, err)
		}
	}
}

// A template's own cloud-init address is not a request: a Create without
// one removes it in its config write, so Get never waits for it; a Create
// with one replaces it.
func TestTemplateIPConfigIsNotARequest(t *testing.T) {
	f := startFake(t)
	for _, tmpl := range []int{templateVMID, templateVMID + 1} {
		if err := f.s.SetConfig(tmpl, "ipconfig0", "ip=198.51.100.5/24,gw=198.51.100.1"); err != nil {
			t.Fatal(err)
		}
	}
	p := f.provider(t)
	ctx := context.Background()
	inst, err := p.Create(ctx, request("plain", testUID(4)))
	if err != nil {
		t.Fatal(err)
	}
	vmid, _ := vmidOf(inst.ProviderID)
	if conf, _ := f.s.Config(vmid); conf["ipconfig0"] != "" {
		t.Errorf("the template's ipconfig0 stayed: %q", conf["ipconfig0"])
	}
	if err := f.s.ReportIP(vmid, "192.0.2.20"); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Get(ctx, inst.ProviderID); err != nil || got.State != contract.StateRunning || got.IP != "192.0.2.20" {
		t.Errorf("Get = %+v, %v; want Running at the agent's 192.0.2.20", got, err)
	}

	req := request("static", testUID(5))
	req.Network = testNetwork(11)
	inst, err = p.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	vmid, _ = vmidOf(inst.ProviderID)
	if conf, _ := f.s.Config(vmid); conf["ipconfig0"] != "ip=192.0.2.11/24,gw=192.0.2.1" {
		t.Errorf("ipconfig0 %q; want the request's", conf["ipconfig0"])
	}
}

// A static address needs a NIC to put it on: a template without net0
// fails the Create, Permanent, naming net0 and the address, before the
// seed is uploaded or the VM started.
func TestStaticAddressNeedsANIC(t *testing.T) {
	f := startFake(t)
	p := f.provider(t)
	api, _, _, err := p.regions[testRegion].client()
	if err != nil {
		t.Fatal(err)
	}
	for _, tmpl := range []int{templateVMID, templateVMID + 1} {
		// As a person removes the template's NIC in the web UI.
		if err := newVM(api, f.s.Node(tmpl), tmpl).ConfigSync(context.Background(), pve.VirtualMachineOption{Name: "delete", Value: "net0"}); err != nil {
			t.Fatal(err)
		}
	}
	req := request("nonic", testUID(6))
	req.Network = testNetwork(12)
	_, err = p.Create(context.Background(), req)
	if !errors.Is(err, contract.ErrPermanent) || !strings.Contains(err.Error(), "net0") || !strings.Contains(err.Error(), "192.0.2.12/24") {
		t.Fatalf("Create from a template without a NIC = %v; want Permanent naming net0 and 192.0.2.12/24", err)
	}
	for _, r := range f.s.Inventory() {
		if strings.Contains(r, ".iso") {
			t.Errorf("a seed was uploaded: %s", r)
		}
	}
}
