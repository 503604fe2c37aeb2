package vsphere

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Host placement (spec entry 3): on a cluster without DRS a clone must
// name a host (the control refuses one that does not, as vCenter does:
// vcsim_checks_test.go); the provider picks one, or takes the zone's.

func placementRequest(name string) contract.CreateRequest {
	return contract.CreateRequest{
		Name: name, UID: "uid-" + name, Owner: testOwner, CloudInit: []byte("#cloud-config\n"), Port: 3128,
		Placement: contract.Placement{Region: "dc0", Zone: "c0", MachineType: "small", Image: "debian-12"},
	}
}

func TestCloneOnClusterWithoutDRSPicksAHost(t *testing.T) {
	v := startVcsim(t)
	v.disableDRS(t)
	inst, err := v.provider(t).Create(context.Background(), placementRequest("no-drs"))
	if err != nil {
		t.Fatalf("Create on a cluster without DRS: %v", err)
	}
	if host := v.hostOf(t, inst.ProviderID); !strings.HasPrefix(host, "DC0_C0_H") {
		t.Errorf("the VM runs on %q, want a host of cluster DC0_C0", host)
	}
}

// A host in maintenance mode is not picked; with every host of the
// cluster in it there is none to pick, which is not Permanent: hosts come
// back.
func TestCloneWithoutDRSSkipsHostsInMaintenance(t *testing.T) {
	v := startVcsim(t)
	v.disableDRS(t)
	v.maintenance(t, "/DC0/host/DC0_C0/DC0_C0_H0", true)
	v.maintenance(t, "/DC0/host/DC0_C0/DC0_C0_H1", true)
	p := v.provider(t)
	inst, err := p.Create(context.Background(), placementRequest("skip-mm"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if host := v.hostOf(t, inst.ProviderID); host != "DC0_C0_H2" {
		t.Errorf("the VM runs on %q, want DC0_C0_H2, the one host out of maintenance", host)
	}
	v.maintenance(t, "/DC0/host/DC0_C0/DC0_C0_H2", true)
	_, err = p.Create(context.Background(), placementRequest("no-host"))
	if err == nil || contract.ClassOf(err) != contract.ClassTransient || !strings.Contains(err.Error(), "DC0_C0") {
		t.Errorf("Create with every host in maintenance = %v (class %s), want a transient error naming the cluster", err, contract.ClassOf(err))
	}
}

func TestZoneHostPinsTheClone(t *testing.T) {
	v := startVcsim(t)
	v.disableDRS(t)
	p := withConfig(t, v, func(c *Config) {
		r := c.Regions["dc0"]
		z := r.Zones["c0"]
		z.Host = "/DC0/host/DC0_C0/DC0_C0_H1"
		r.Zones["c0"] = z
	})
	inst, err := p.Create(context.Background(), placementRequest("pinned"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if host := v.hostOf(t, inst.ProviderID); host != "DC0_C0_H1" {
		t.Errorf("the VM runs on %q, want the zone's host DC0_C0_H1", host)
	}
}

// A zone's host that is not in the zone's pool's cluster: vCenter's
// InvalidArgument, Permanent.
func TestZoneHostOutsideThePoolIsPermanent(t *testing.T) {
	v := startVcsim(t)
	p := withConfig(t, v, func(c *Config) {
		r := c.Regions["dc0"]
		z := r.Zones["c0"]
		z.Host = "/DC0/host/DC0_H0"
		r.Zones["c0"] = z
	})
	_, err := p.Create(context.Background(), placementRequest("elsewhere"))
	if contract.ClassOf(err) != contract.ClassPermanent {
		t.Errorf("Create with a host outside the pool's cluster = %v (class %s), want Permanent", err, contract.ClassOf(err))
	}
}

// On a cluster without DRS the provider picks a host that sees the zone's
// datastore and network (the control refuses a clone onto one that does
// not, as vCenter does: vcsim_checks_test.go). H0, first by name with the
// fewest VMs, sees neither here; H1 lacks the port group only.
func TestCloneWithoutDRSPicksAHostThatSeesTheStorageAndNetwork(t *testing.T) {
	v := startVcsim(t)
	v.disableDRS(t)
	v.hide(t, "/DC0/host/DC0_C0/DC0_C0_H0", "LocalDS_0", "DC0_DVPG0")
	v.hide(t, "/DC0/host/DC0_C0/DC0_C0_H1", "", "DC0_DVPG0")
	p := v.provider(t)
	inst, err := p.Create(context.Background(), placementRequest("sees"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if host := v.hostOf(t, inst.ProviderID); host != "DC0_C0_H2" {
		t.Errorf("the VM runs on %q, want DC0_C0_H2, the one host that sees LocalDS_0 and DC0_DVPG0", host)
	}
	// No host left that sees them: an administrator must act, and the
	// error names the zone and what no host sees.
	v.hide(t, "/DC0/host/DC0_C0/DC0_C0_H2", "LocalDS_0", "")
	_, err = p.Create(context.Background(), placementRequest("sees-none"))
	if contract.ClassOf(err) != contract.ClassPermanent {
		t.Fatalf("Create with no host that sees the zone's datastore = %v (class %s), want Permanent", err, contract.ClassOf(err))
	}
	for _, want := range []string{`regions["dc0"].zones["c0"]:`, "DC0_C0", "LocalDS_0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not name %s", err, want)
		}
	}
}

// A linked clone's disks are children of the template's, so without DRS
// its host must see the template's datastores as well as the clone's
// (placement.go). Here the template's disks are on a datastore only one
// host mounts, the one the pick's own order comes to last (the most VMs;
// vcsim spreads its VMs at random, so it is read, not assumed): a full
// clone goes elsewhere, a linked one must go there.
func TestLinkedCloneWithoutDRSPicksAHostThatSeesTheTemplatesDatastore(t *testing.T) {
	v := startVcsim(t)
	v.disableDRS(t)
	last := v.lastPicked(t, "/DC0/host/DC0_C0")
	v.templateOnlyOn(t, "/DC0/host/DC0_C0/"+last)
	ctx := context.Background()
	full, err := v.provider(t).Create(ctx, placementRequest("full-clone"))
	if err != nil {
		t.Fatalf("Create, full clone: %v", err)
	}
	if host := v.hostOf(t, full.ProviderID); host == last {
		t.Fatalf("the full clone went to %s too: this setup cannot tell the template's datastore from the pick's own order", host)
	}
	p := withConfig(t, v, func(c *Config) { c.CloneMode, c.Snapshot = linkedClone, baseSnapshot })
	linked, err := p.Create(ctx, placementRequest("linked-clone"))
	if err != nil {
		t.Fatalf("Create, linked clone: %v", err)
	}
	if host := v.hostOf(t, linked.ProviderID); host != last {
		t.Errorf("the linked clone runs on %q, want %s, the one host that sees the template's datastore", host, last)
	}
}

// lastPicked is the host of the cluster at path that pickHost's order
// (fewest VMs, then name) comes to last.
func (v *vcsim) lastPicked(t *testing.T, path string) string {
	t.Helper()
	ctx := context.Background()
	hosts, err := find.NewFinder(v.client, true).HostSystemList(ctx, path+"/*")
	if err != nil {
		t.Fatal(err)
	}
	var all []mo.HostSystem
	for _, h := range hosts {
		var m mo.HostSystem
		if err := h.Properties(ctx, h.Reference(), []string{"name", "vm"}, &m); err != nil {
			t.Fatal(err)
		}
		all = append(all, m)
	}
	return slices.MaxFunc(all, func(a, b mo.HostSystem) int {
		return cmp.Or(cmp.Compare(len(a.Vm), len(b.Vm)), cmp.Compare(a.Name, b.Name))
	}).Name
}

// templateOnlyOn makes a datastore that only the host at path mounts
// (vcsim's CreateLocalDatastore, as vCenter's) and records it as DC0's
// template's datastore.
func (v *vcsim) templateOnlyOn(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	f := find.NewFinder(v.client, true)
	h, err := f.HostSystem(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	dss, err := h.ConfigManager().DatastoreSystem(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := dss.CreateLocalDatastore(ctx, "TemplateDS", t.TempDir())
	if err != nil {
		t.Fatalf("create a datastore on %s: %v", path, err)
	}
	dc, err := f.Datacenter(ctx, "/DC0")
	if err != nil {
		t.Fatal(err)
	}
	f.SetDatacenter(dc)
	tmpl, err := f.VirtualMachine(ctx, templateName)
	if err != nil {
		t.Fatal(err)
	}
	vm := v.model.Map().Get(tmpl.Reference()).(*checkedTemplate).VirtualMachine
	v.model.Map().AtomicUpdate(v.simContext(), vm, []types.PropertyChange{{Name: "datastore", Val: []types.ManagedObjectReference{ds.Reference()}}})
}
