package proxmox

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/providers/proxmox/pvefake"
)

// inZone is request(name, uid) placed in zone.
func inZone(name string, uid int, zone string) contract.CreateRequest {
	req := request(name, testUID(uid))
	req.Placement.Zone = zone
	return req
}

// lastClone is the fake's last clone request.
func lastClone(t *testing.T, f *fake) map[string]string {
	t.Helper()
	reqs := f.s.CloneRequests()
	if len(reqs) == 0 {
		t.Fatal("no clone request reached the fake")
	}
	out := map[string]string{}
	for k, v := range reqs[len(reqs)-1] {
		out[k] = v[0]
	}
	return out
}

// An image named by a template on each node: each zone clones its own
// node's template, locally, without `target`, and Check names the one
// per zone. Before per-node templates, two templates of one name were
// refused as ambiguous ("2 templates named").
func TestTemplatePerNode(t *testing.T) {
	f := startFake(t) // debian-12-proxy: 9000 on pve1, 9001 on pve2
	p := f.provider(t)
	for _, tc := range []struct {
		zone, node string
		template   int
	}{{"a", "pve1", templateVMID}, {"b", "pve2", templateVMID + 1}} {
		inst, err := p.Create(context.Background(), inZone("per-node-"+tc.zone, 40, tc.zone))
		if err != nil {
			t.Fatalf("zone %s: %v", tc.zone, err)
		}
		vmid, _ := vmidOf(inst.ProviderID)
		clone := lastClone(t, f)
		if clone["vmid"] != strconv.Itoa(tc.template) || clone["node"] != tc.node || clone["target"] != "" {
			t.Errorf("zone %s: cloned %s on %s with target %q; want template %d on %s, no target", tc.zone, clone["vmid"], clone["node"], clone["target"], tc.template, tc.node)
		}
		if node := f.s.Node(vmid); node != tc.node {
			t.Errorf("zone %s: VM %d is on %s, want %s", tc.zone, vmid, node, tc.node)
		}
	}
	img := checkResult(t, p, "region/lab/image/debian-12")
	if !img.OK || img.Details["zone.a"] != "9000 on pve1" || img.Details["zone.b"] != "9001 on pve2" {
		t.Errorf("Check image = %+v; want zone.a 9000 on pve1, zone.b 9001 on pve2", img)
	}
}

// One template on shared storage serves every zone: a zone on another
// node clones it with `target`.
func TestSharedTemplateClonedWithTarget(t *testing.T) {
	f := startFakeOpts(t, func(o *pvefake.Options) {
		o.Storages = append(o.Storages, pvefake.StorageSpec{Name: "ceph", Type: "rbd", Content: []string{"images"}, Shared: true})
		o.Templates = []pvefake.Template{{VMID: templateVMID, Name: "debian-12-proxy", Node: "pve1", Storage: "ceph"}}
	})
	p := f.provider(t)
	inst, err := p.Create(context.Background(), inZone("shared", 41, "b"))
	if err != nil {
		t.Fatal(err)
	}
	vmid, _ := vmidOf(inst.ProviderID)
	clone := lastClone(t, f)
	if clone["node"] != "pve1" || clone["target"] != "pve2" {
		t.Errorf("cloned on %s with target %q; want on pve1 with target pve2", clone["node"], clone["target"])
	}
	if node := f.s.Node(vmid); node != "pve2" {
		t.Errorf("VM %d is on %s, want pve2", vmid, node)
	}
	if img := checkResult(t, p, "region/lab/image/debian-12"); !img.OK || img.Details["zone.b"] != "9000 on pve1 to pve2" {
		t.Errorf("Check image = %+v; want zone.b 9000 on pve1 to pve2", img)
	}
}

// A template on local storage of another node is never cloned there:
// PVE refuses it ("can't clone VM to node 'pve2' (VM uses local
// storage)", qemu-server clone_vm), and the provider refuses first,
// Permanent, naming the zone, its node and the template — also when the
// template's CD-ROM is the only local volume. Check reports it per zone.
func TestLocalTemplateOnAnotherNodeRefused(t *testing.T) {
	for _, tc := range []struct {
		name      string
		templates []pvefake.Template
		local     string
	}{
		{"disk on local-lvm", []pvefake.Template{{VMID: templateVMID, Name: "debian-12-proxy", Node: "pve1"}}, "local-lvm"},
		{"disk shared, CD-ROM on local", []pvefake.Template{{VMID: templateVMID, Name: "debian-12-proxy", Node: "pve1", Storage: "ceph"}}, "local"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFakeOpts(t, func(o *pvefake.Options) {
				o.Storages = append(o.Storages, pvefake.StorageSpec{Name: "ceph", Type: "rbd", Content: []string{"images"}, Shared: true})
				o.Templates = tc.templates
			})
			if tc.local == "local" {
				if err := f.s.SetConfig(templateVMID, "ide2", "local:iso/debian-12.iso,media=cdrom"); err != nil {
					t.Fatal(err)
				}
			}
			p := f.provider(t)
			// A tripwire: a clone request reaching the fake fails with it.
			f.s.FailNext(pvefake.OpClone, 500, "tripwire: the clone was sent")
			_, err := p.Create(context.Background(), inZone("far", 42, "b"))
			if !errors.Is(err, contract.ErrPermanent) {
				t.Fatalf("Create in zone b = %v (class %s), want ErrPermanent", err, contract.ClassOf(err))
			}
			for _, want := range []string{`zone "b"`, "node pve2", "template 9000", "node pve1", "local storage (" + tc.local + ")", "can't clone VM to node 'pve2' (VM uses local storage)"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not name %q: %v", want, err)
				}
			}
			if reqs := f.s.CloneRequests(); len(reqs) != 0 {
				t.Errorf("a clone was sent: %v", reqs)
			}
			img := checkResult(t, p, "region/lab/image/debian-12")
			if img.OK || img.Reason != contract.ReasonMisconfigured || !strings.Contains(img.Message, `zone "b"`) {
				t.Errorf("Check image = %+v; want Misconfigured naming zone b", img)
			}
			f.s.Reset()
			if _, err := p.Create(context.Background(), inZone("near", 43, "a")); err != nil {
				t.Errorf("Create in zone a, the template's node: %v", err)
			}
		})
	}
}

// A full clone to another node goes onto shared storage only (clone_vm:
// "can't clone to non-shared storage '…'"): a zone naming local storage
// is refused before the clone; naming shared storage, it is cloned.
func TestFullCloneAcrossNodesNeedsSharedStorage(t *testing.T) {
	full := true
	f := startFakeWith(t, func(o *pvefake.Options) {
		o.Storages = append(o.Storages, pvefake.StorageSpec{Name: "ceph", Type: "rbd", Content: []string{"images"}, Shared: true})
		o.Templates = []pvefake.Template{{VMID: templateVMID, Name: "debian-12-proxy", Node: "pve1", Storage: "ceph"}}
	}, func(c *Config) {
		r := c.Regions[testRegion]
		r.Zones = map[string]Zone{
			"a": {Node: "pve1", ISOStorage: "local"},
			"b": {Node: "pve2", ISOStorage: "local", FullClone: &full, Storage: "local-lvm"},
		}
		c.Regions[testRegion] = r
	})
	_, err := f.provider(t).Create(context.Background(), inZone("local-target", 44, "b"))
	if !errors.Is(err, contract.ErrPermanent) || !strings.Contains(err.Error(), `zones["b"].storage "local-lvm": not shared`) {
		t.Errorf("a full clone across nodes onto local storage = %v; want ErrPermanent naming zones[\"b\"].storage", err)
	}
	if reqs := f.s.CloneRequests(); len(reqs) != 0 {
		t.Errorf("a clone was sent: %v", reqs)
	}

	r := f.cfg.Regions[testRegion]
	r.Zones["b"] = Zone{Node: "pve2", ISOStorage: "local", FullClone: &full, Storage: "ceph"}
	inst, err := f.provider(t).Create(context.Background(), inZone("shared-target", 45, "b"))
	if err != nil {
		t.Fatal(err)
	}
	clone := lastClone(t, f)
	if clone["full"] != "1" || clone["storage"] != "ceph" || clone["target"] != "pve2" {
		t.Errorf("clone full=%q storage=%q target=%q; want 1, ceph, pve2", clone["full"], clone["storage"], clone["target"])
	}
	vmid, _ := vmidOf(inst.ProviderID)
	if conf, _ := f.s.Config(vmid); !strings.HasPrefix(conf["scsi0"], "ceph:vm-") {
		t.Errorf("disk %q, want a full copy on ceph", conf["scsi0"])
	}
}

func checkResult(t *testing.T, p *Provider, target string) contract.CheckResult {
	t.Helper()
	for _, r := range p.Check(context.Background()) {
		if r.Target == target {
			return r
		}
	}
	t.Fatalf("Check has no target %s", target)
	return contract.CheckResult{}
}

// /cluster/resources?type=vm lists LXC containers with the VMs: a
// container template of the image's name is not the image, a container
// is never a Proxy's VM, and a container's VMID is never cloned onto.
func TestContainersAreNotVMs(t *testing.T) {
	f := startFake(t)
	// The range is 1000–1099; the request's first pick is
	// firstVMID(uid, range): every VMID but 1099 is a container's.
	for id := 1000; id < 1099; id++ {
		f.s.AddContainer(id, "pve1", "ct", false)
	}
	f.s.AddContainer(8000, "pve1", "debian-12-proxy", true)
	p := f.provider(t)
	inst, err := p.Create(context.Background(), inZone("beside-cts", 41, "a"))
	if err != nil {
		t.Fatalf("Create beside containers: %v", err)
	}
	if clone := lastClone(t, f); clone["vmid"] != strconv.Itoa(templateVMID) {
		t.Errorf("cloned %s, want the VM template %d, not the container template 8000", clone["vmid"], templateVMID)
	}
	if vmid, _ := vmidOf(inst.ProviderID); vmid != 1099 {
		t.Errorf("the VM has VMID %d, want 1099, the one no container has", vmid)
	}
	found, err := p.ListByTag(context.Background(), contract.LabelUID, testUID(41))
	if err != nil || len(found) != 1 {
		t.Errorf("ListByTag beside containers = %v, %v; want the one VM", found, err)
	}
	img := checkResult(t, p, "region/lab/image/debian-12")
	if !img.OK || img.Details["zone.a"] != "9000 on pve1" {
		t.Errorf("Check image = %+v; want zone.a 9000 on pve1", img)
	}
}
