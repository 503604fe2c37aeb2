package proxmox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	pve "github.com/luthermonson/go-proxmox"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// The real-cluster tests (make test-integration-proxmox). Each is skipped
// without the PROXMOX_TEST_* variables, saying which are missing:
//
//	PROXMOX_TEST_ENDPOINT, _TOKEN_ID_FILE, _TOKEN_SECRET_FILE   the API and token
//	PROXMOX_TEST_NODE, _ISO_STORAGE                            zone "test"
//	PROXMOX_TEST_TEMPLATE                                      a template name or VMID
//	optional: _CA_FILE, _VMID_MIN/_MAX, _STORAGE (full clones onto it),
//	_FORMAT (raw, qcow2, vmdk), _POOL, _BRIDGE, _VLAN, _MTU (zone "test"'s
//	net0), _NODE2 (zone "test2" on a second node, same ISO storage
//	unless _ISO_STORAGE2).
func integrationConfig(t *testing.T) Config {
	t.Helper()
	vars := contracttest.RequireEnv(t, "real Proxmox VE cluster", "PROXMOX_TEST_", []string{"ENDPOINT", "TOKEN_ID_FILE", "TOKEN_SECRET_FILE", "NODE", "ISO_STORAGE", "TEMPLATE"},
		"PROXMOX_TEST_CA_FILE", "PROXMOX_TEST_VMID_MIN/MAX", "PROXMOX_TEST_STORAGE for full clones", "PROXMOX_TEST_FORMAT", "PROXMOX_TEST_POOL",
		"PROXMOX_TEST_BRIDGE", "PROXMOX_TEST_VLAN", "PROXMOX_TEST_MTU", "PROXMOX_TEST_NODE2", "PROXMOX_TEST_ISO_STORAGE2")
	atoi := func(name string) int {
		v := os.Getenv("PROXMOX_TEST_" + name)
		if v == "" {
			return 0
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("PROXMOX_TEST_%s %q: want a number", name, v)
		}
		return n
	}
	img := Image{TemplateName: vars["TEMPLATE"]}
	if id, err := strconv.Atoi(vars["TEMPLATE"]); err == nil {
		img = Image{TemplateVMID: id}
	}
	zone := Zone{Node: vars["NODE"], ISOStorage: vars["ISO_STORAGE"], Storage: os.Getenv("PROXMOX_TEST_STORAGE"), Format: os.Getenv("PROXMOX_TEST_FORMAT")}
	if zone.Storage != "" {
		full := true
		zone.FullClone = &full
	}
	if b := os.Getenv("PROXMOX_TEST_BRIDGE"); b != "" {
		zone.Network = &Network{Bridge: b, VLAN: atoi("VLAN"), MTU: atoi("MTU")}
	}
	region := Region{
		Endpoint: vars["ENDPOINT"], TokenIDFile: vars["TOKEN_ID_FILE"], TokenSecretFile: vars["TOKEN_SECRET_FILE"],
		CAFile: os.Getenv("PROXMOX_TEST_CA_FILE"), Pool: os.Getenv("PROXMOX_TEST_POOL"),
		VMIDs: VMIDRange{Min: atoi("VMID_MIN"), Max: atoi("VMID_MAX")},
		Zones: map[string]Zone{"test": zone},
	}
	if n2 := os.Getenv("PROXMOX_TEST_NODE2"); n2 != "" {
		iso2 := os.Getenv("PROXMOX_TEST_ISO_STORAGE2")
		if iso2 == "" {
			iso2 = zone.ISOStorage
		}
		// Linked: whether it can clone the template depends on where the
		// template is, which TestIntegrationAcrossNodes reports.
		region.Zones["test2"] = Zone{Node: n2, ISOStorage: iso2}
	}
	return Config{
		Regions:      map[string]Region{"test": region},
		MachineTypes: map[string]MachineType{"small": {Cores: 1, MemoryMiB: 1024}},
		Images:       map[string]Image{"proxy": img},
	}
}

func integrationProvider(t *testing.T, cfg Config) *Provider {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range p.Check(context.Background()) {
		t.Logf("check %s: %s %s %v", r.Target, r.Reason, r.Message, r.Details)
	}
	return p
}

func integrationRequest(zone, uid string) contract.CreateRequest {
	name := fmt.Sprintf("egress-it-%d", time.Now().UnixNano()%1000000000)
	return contract.CreateRequest{
		Name: name, UID: "0e9d6c1a-7f3b-4d2e-9a5c-" + uid, Owner: "integration-test", Port: 3128,
		Placement: contract.Placement{Region: "test", Zone: zone, MachineType: "small", Image: "proxy"},
		CloudInit: []byte("#cloud-config\nhostname: " + name + "\npackages: [qemu-guest-agent, tinyproxy]\nruncmd: [[systemctl, start, qemu-guest-agent]]\n"),
	}
}

func probeProxyPort(ctx context.Context, ip string) error {
	conn, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", net.JoinHostPort(ip, "3128"))
	if err == nil {
		_ = conn.Close()
	}
	return err
}

// TestIntegration runs one real lifecycle in zone "test": the VM is
// cloned from the template (with the options the variables set), gets its
// seed, runs with an address the guest agent reports, is found by its
// tags, and is destroyed with its seed.
func TestIntegration(t *testing.T) {
	p := integrationProvider(t, integrationConfig(t))
	contracttest.RunLifecycle(t, contracttest.Lifecycle{
		Provider: p, Request: integrationRequest("test", "integration01"),
		Timeout: 15 * time.Minute, Probe: probeProxyPort,
	})
}

// TestIntegrationOptions creates one VM in zone "test" and reads back
// from PVE what the options made: the disk on PROXMOX_TEST_STORAGE (a full
// copy) or on the template's storage (linked), the pool in the cluster
// list, net0 with the bridge, tag and MTU and the clone's own MAC. Then it
// deletes the VM.
func TestIntegrationOptions(t *testing.T) {
	cfg := integrationConfig(t)
	p := integrationProvider(t, cfg)
	ctx := context.Background()
	inst, err := p.Create(ctx, integrationRequest("test", "integration02"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Delete(context.WithoutCancel(ctx), inst.ProviderID); err != nil {
			t.Errorf("cleanup Delete(%s): %v", inst.ProviderID, err)
		}
	})
	_, key, _ := ids.Parse(inst.ProviderID)
	vmid, _ := strconv.Atoi(key)
	zone := cfg.Regions["test"].Zones["test"]
	v, err := p.lookup(ctx, "test", vmid)
	if err != nil {
		t.Fatal(err)
	}
	disk := v.confString("scsi0") + v.confString("virtio0") + v.confString("sata0")
	t.Logf("VM %d on %s: disk %q, net0 %q", vmid, v.node, disk, v.confString("net0"))
	if cfg.fullClone(zone) && !strings.HasPrefix(disk, zone.Storage+":") {
		t.Errorf("full clone: disk %q is not on %s", disk, zone.Storage)
	}
	if n := zone.Network; n != nil {
		net0 := "," + v.confString("net0") + ","
		for _, want := range []string{",bridge=" + n.Bridge + ",", ",tag=" + strconv.Itoa(n.VLAN) + ",", ",mtu=" + strconv.Itoa(n.MTU) + ","} {
			if strings.HasSuffix(want, "=0,") {
				continue
			}
			if !strings.Contains(net0, want) {
				t.Errorf("net0 %q lacks %s", v.confString("net0"), strings.Trim(want, ","))
			}
		}
	}
	if pool := cfg.Regions["test"].Pool; pool != "" {
		vms, err := p.resources(ctx, "test")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range vms {
			if r != nil && int(r.VMID) == vmid && r.Pool != pool {
				t.Errorf("VM %d is in pool %q, want %q", vmid, r.Pool, pool)
			}
		}
	}
}

// TestIntegrationAcrossNodes (PROXMOX_TEST_NODE2) covers zone "test2" on a
// second node. With a template on that node (one per node, one name) or a
// template on shared storage, it runs a lifecycle there: PVE's clone
// with `target`. With the template on local storage of the other node, it
// asserts the provider refuses, Permanent, naming the zone, and clones
// nothing; and that PVE itself refuses that clone with the text pvefake
// answers ("can't clone VM to node '…' (VM uses local storage)"), the
// claim the provider's refusal rests on.
func TestIntegrationAcrossNodes(t *testing.T) {
	cfg := integrationConfig(t)
	zone2, ok := cfg.Regions["test"].Zones["test2"]
	if !ok {
		t.Skip("skipped: set PROXMOX_TEST_NODE2, a second node of the cluster, for zone test2")
	}
	p := integrationProvider(t, cfg)
	ctx := context.Background()
	vms, err := p.resources(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := p.template(ctx, "test", "test2", "proxy", cfg.Images["proxy"], vms)
	if err == nil {
		t.Logf("zone test2 clones template %s", tmpl)
		contracttest.RunLifecycle(t, contracttest.Lifecycle{
			Provider: p, Request: integrationRequest("test2", "integration03"),
			Timeout: 15 * time.Minute, Probe: probeProxyPort,
		})
		return
	}
	if !errors.Is(err, contract.ErrPermanent) || !strings.Contains(err.Error(), `zone "test2"`) {
		t.Fatalf("resolving the template for zone test2: %v", err)
	}
	t.Logf("zone test2: %v", err)
	req := integrationRequest("test2", "integration04")
	if _, err := p.Create(ctx, req); !errors.Is(err, contract.ErrPermanent) || !strings.Contains(err.Error(), `zone "test2"`) {
		t.Errorf("Create in zone test2 = %v; want the provider's refusal naming the zone", err)
	}
	if got, err := p.ListByTag(ctx, contract.LabelUID, req.UID); err != nil || len(got) != 0 {
		t.Errorf("after the refusal ListByTag(uid) = %+v, %v; want nothing cloned", got, err)
	}
	if !strings.Contains(err.Error(), "uses local storage") {
		return
	}
	// PVE's own answer to the clone the provider refuses to send.
	var found *pve.ClusterResource
	for _, r := range vms {
		if r != nil && r.Template == 1 && (int(r.VMID) == cfg.Images["proxy"].TemplateVMID || r.Name == cfg.Images["proxy"].TemplateName) {
			found = r
		}
	}
	if found == nil {
		t.Fatal("the template is not in the cluster list")
	}
	rng := p.cfg.Regions["test"].VMIDs
	var upid pve.UPID
	cloneErr := p.call(ctx, "test", "CloneVM", func(ctx context.Context, c conn) error {
		_, task, err := newVM(c.api, found.Node, int(found.VMID)).Clone(ctx, &pve.VirtualMachineCloneOptions{NewID: rng.Max, Name: "egress-it-refused", Target: zone2.Node})
		if task != nil {
			upid = task.UPID
		}
		return err
	})
	if cloneErr == nil {
		// Not the provider's VM (no marks): destroy it here.
		err := p.waitTask(ctx, "test", upid, "the clone PVE should have refused")
		if err == nil {
			err = p.call(ctx, "test", "DestroyVM", func(ctx context.Context, c conn) error {
				task, err := newVM(c.api, zone2.Node, rng.Max).Delete(ctx, &pve.VirtualMachineDeleteOptions{Purge: true, DestroyUnreferencedDisks: true})
				if err == nil {
					err = p.waitTask(ctx, "test", task.UPID, "destroy of the refused clone")
				}
				return err
			})
		}
		t.Fatalf("PVE accepted a clone of template %d on %s to %s (cleanup: %v): the provider's refusal is wrong for this cluster", found.VMID, found.Node, zone2.Node, err)
	}
	if want := "can't clone VM to node '" + zone2.Node + "' (VM uses local storage)"; !strings.Contains(cloneErr.Error(), want) {
		t.Errorf("PVE refused with %v; pvefake answers %q", cloneErr, want)
	}
}

// TestIntegrationStaticAddress (PROXMOX_TEST_STATIC_ADDRESS, a free address
// of the bridge's network with its prefix length, 192.0.2.10/24;
// PROXMOX_TEST_STATIC_GATEWAY; PROXMOX_TEST_STATIC_DNS, space-separated,
// optional) runs a lifecycle with that static address: the guest's
// cloud-init applies the seed's network-config, the guest agent reports the
// address, Get is Running at exactly it, and the proxy answers there.
func TestIntegrationStaticAddress(t *testing.T) {
	addr, gw := os.Getenv("PROXMOX_TEST_STATIC_ADDRESS"), os.Getenv("PROXMOX_TEST_STATIC_GATEWAY")
	if addr == "" || gw == "" {
		t.Skip("skipped: set PROXMOX_TEST_STATIC_ADDRESS (192.0.2.10/24, free on the VM's network) and PROXMOX_TEST_STATIC_GATEWAY")
	}
	n := &contract.StaticNetwork{}
	var err error
	if n.Address, err = netip.ParsePrefix(addr); err != nil {
		t.Fatalf("PROXMOX_TEST_STATIC_ADDRESS: %v", err)
	}
	if n.Gateway, err = netip.ParseAddr(gw); err != nil {
		t.Fatalf("PROXMOX_TEST_STATIC_GATEWAY: %v", err)
	}
	for _, d := range strings.Fields(os.Getenv("PROXMOX_TEST_STATIC_DNS")) {
		a, err := netip.ParseAddr(d)
		if err != nil {
			t.Fatalf("PROXMOX_TEST_STATIC_DNS: %v", err)
		}
		n.DNS = append(n.DNS, a)
	}
	p := integrationProvider(t, integrationConfig(t))
	req := integrationRequest("test", "integration05")
	req.Network = n
	contracttest.RunLifecycle(t, contracttest.Lifecycle{
		Provider: p, Request: req, Timeout: 15 * time.Minute,
		Probe: func(ctx context.Context, ip string) error {
			if ip != n.IP() {
				return fmt.Errorf("Running at %s, want the static %s", ip, n.IP())
			}
			return probeProxyPort(ctx, ip)
		},
	})
}
