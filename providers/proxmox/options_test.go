package proxmox

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/providers/proxmox/pvefake"
)

// Linked or full per zone, the full clone's storage and format, and the
// pool per region or zone reach the clone request; the VM joins the pool.
func TestCloneOptionsPerZone(t *testing.T) {
	linked := false
	f := startFakeWith(t, func(o *pvefake.Options) {
		o.Pools = []string{"egress", "egress/zone-b"}
	}, func(c *Config) {
		c.FullClone = true // config-wide; zone b overrides it
		r := c.Regions[testRegion]
		r.Pool = "egress"
		r.Zones = map[string]Zone{
			"a": {Node: "pve1", ISOStorage: "local", Storage: "local-lvm", Format: "raw"},
			"b": {Node: "pve2", ISOStorage: "local", FullClone: &linked, Pool: "egress/zone-b"},
		}
		c.Regions[testRegion] = r
	})
	p := f.provider(t)
	for _, tc := range []struct {
		zone string
		want map[string]string
	}{
		{"a", map[string]string{"full": "1", "storage": "local-lvm", "format": "raw", "pool": "egress"}},
		{"b", map[string]string{"full": "", "storage": "", "format": "", "pool": "egress/zone-b"}},
	} {
		inst, err := p.Create(context.Background(), inZone("opts-"+tc.zone, 50, tc.zone))
		if err != nil {
			t.Fatalf("zone %s: %v", tc.zone, err)
		}
		clone := lastClone(t, f)
		for k, v := range tc.want {
			if clone[k] != v {
				t.Errorf("zone %s: clone %s=%q, want %q (request %v)", tc.zone, k, clone[k], v, clone)
			}
		}
		vmid, _ := vmidOf(inst.ProviderID)
		if pool := f.s.Pool(vmid); pool != tc.want["pool"] {
			t.Errorf("zone %s: VM %d is in pool %q, want %q", tc.zone, vmid, pool, tc.want["pool"])
		}
		conf, _ := f.s.Config(vmid)
		if linkedDisk := strings.Contains(conf["scsi0"], "base-"); linkedDisk != (tc.want["full"] == "") {
			t.Errorf("zone %s: disk %q; want a full copy %v", tc.zone, conf["scsi0"], tc.want["full"] == "1")
		}
	}
	if zone := checkResult(t, p, "region/lab/zone/a"); zone.Details["clone"] != "full to local-lvm" || zone.Details["pool"] != "egress" {
		t.Errorf("Check zone a details %v; want clone full to local-lvm, pool egress", zone.Details)
	}
	if zone := checkResult(t, p, "region/lab/zone/b"); zone.Details["clone"] != "linked" || zone.Details["pool"] != "egress/zone-b" {
		t.Errorf("Check zone b details %v; want clone linked, pool egress/zone-b", zone.Details)
	}
}

// A pool that does not exist: PVE refuses the clone with 403 (clone_vm
// checks it before the fork), which no retry heals.
func TestMissingPoolIsPermanent(t *testing.T) {
	f := startFakeWith(t, nil, func(c *Config) {
		r := c.Regions[testRegion]
		r.Pool = "nowhere"
		c.Regions[testRegion] = r
	})
	_, err := f.provider(t).Create(context.Background(), request("no-pool", testUID(51)))
	if !errors.Is(err, contract.ErrPermanent) || !strings.Contains(err.Error(), "pool 'nowhere' does not exist") {
		t.Errorf("Create into a missing pool = %v (class %s); want ErrPermanent with PVE's text", err, contract.ClassOf(err))
	}
}

// The zone's network is written to net0, keeping the clone's model and
// MAC; a zone without one keeps the template's NIC.
func TestNetworkFromConfig(t *testing.T) {
	fw := true
	f := startFakeWith(t, nil, func(c *Config) {
		r := c.Regions[testRegion]
		r.Zones["a"] = Zone{Node: "pve1", ISOStorage: "local", Network: &Network{Bridge: "vmbr1", VLAN: 42, MTU: 1, Firewall: &fw}}
		c.Regions[testRegion] = r
	})
	p := f.provider(t)
	for _, tc := range []struct {
		zone, bridge, rest string
	}{
		{"a", "vmbr1", ",tag=42,mtu=1,firewall=1"},
		{"b", "vmbr0", ""},
	} {
		inst, err := p.Create(context.Background(), inZone("net-"+tc.zone, 52, tc.zone))
		if err != nil {
			t.Fatal(err)
		}
		vmid, _ := vmidOf(inst.ProviderID)
		conf, _ := f.s.Config(vmid)
		model, _, _ := strings.Cut(conf["net0"], ",")
		if !strings.HasPrefix(model, "virtio=BC:24:11:") || model == "virtio=BC:24:11:00:00:01" {
			t.Errorf("zone %s: net0 %q lost the clone's own MAC", tc.zone, conf["net0"])
		}
		if want := model + ",bridge=" + tc.bridge + tc.rest; conf["net0"] != want {
			t.Errorf("zone %s: net0 %q, want %q", tc.zone, conf["net0"], want)
		}
	}
	if zone := checkResult(t, p, "region/lab/zone/a"); zone.Details["bridge"] != "vmbr1" || zone.Details["vlan"] != "42" {
		t.Errorf("Check zone a details %v; want bridge vmbr1, vlan 42", zone.Details)
	}
}

func TestNet0(t *testing.T) {
	off := false
	for _, tc := range []struct {
		name    string
		n       Network
		current string
		want    string
	}{
		{"bridge only", Network{Bridge: "vmbr1"}, "virtio=BC:24:11:00:00:02,bridge=vmbr0", "virtio=BC:24:11:00:00:02,bridge=vmbr1"},
		{"a template's tag goes without vlan", Network{Bridge: "vmbr1"}, "virtio=BC:24:11:00:00:02,bridge=vmbr0,tag=10", "virtio=BC:24:11:00:00:02,bridge=vmbr1"},
		{"tag replaced in place", Network{Bridge: "vmbr0", VLAN: 20}, "e1000=BC:24:11:00:00:02,bridge=vmbr0,tag=10,queues=4", "e1000=BC:24:11:00:00:02,bridge=vmbr0,tag=20,queues=4"},
		{"other options kept", Network{Bridge: "vnet1", Firewall: &off}, "virtio=BC:24:11:00:00:02,bridge=vmbr0,firewall=1,link_down=1,rate=10,mtu=9000", "virtio=BC:24:11:00:00:02,bridge=vnet1,firewall=0,link_down=1,rate=10,mtu=9000"},
		{"no bridge yet", Network{Bridge: "vmbr2", VLAN: 4094, MTU: 1500}, "virtio=BC:24:11:00:00:02", "virtio=BC:24:11:00:00:02,bridge=vmbr2,tag=4094,mtu=1500"},
	} {
		if got := tc.n.net0(tc.current); got != tc.want {
			t.Errorf("%s: net0(%q) = %q, want %q", tc.name, tc.current, got, tc.want)
		}
	}
}
