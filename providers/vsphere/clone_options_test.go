package vsphere

import (
	"context"
	"strings"
	"testing"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// The clone options (spec entries 4 and 15). vcsim makes every clone a
// full copy whatever the spec asks, and ignores storage policies: these
// tests read the spec the provider sent (the control records it) and,
// for the datastore cluster, where vcsim's storage DRS put the VM.

func TestLinkedCloneFromSnapshot(t *testing.T) {
	v := startVcsim(t)
	ctx := context.Background()
	for _, snapshot := range []string{baseSnapshot, ""} {
		p := withConfig(t, v, func(c *Config) { c.CloneMode, c.Snapshot = linkedClone, snapshot })
		name := "linked-" + map[string]string{"": "current"}[snapshot] + snapshot
		if _, err := p.Create(ctx, placementRequest(name)); err != nil {
			t.Fatalf("Create, linked clone from %q: %v", snapshot, err)
		}
		spec := v.lastClone(t)
		if spec.Snapshot == nil || spec.Location.DiskMoveType != string(types.VirtualMachineRelocateDiskMoveOptionsCreateNewChildDiskBacking) {
			t.Errorf("linked clone from %q sent snapshot %v, diskMoveType %q: want the template's snapshot and createNewChildDiskBacking", snapshot, spec.Snapshot, spec.Location.DiskMoveType)
		}
	}
	// A full clone (the default) names no snapshot.
	if _, err := v.provider(t).Create(ctx, placementRequest("full")); err != nil {
		t.Fatal(err)
	}
	if spec := v.lastClone(t); spec.Snapshot != nil || spec.Location.DiskMoveType != "" {
		t.Errorf("a full clone sent snapshot %v, diskMoveType %q", spec.Snapshot, spec.Location.DiskMoveType)
	}
}

// A template without a snapshot, or a snapshot it does not have, is a
// config to fix: Permanent, naming the field, no clone asked.
func TestLinkedCloneWithoutSnapshotIsPermanent(t *testing.T) {
	v := startVcsim(t)
	ctx := context.Background()
	req := placementRequest("no-snapshot")
	req.Placement.Region = "dc1" // DC1's template has no snapshot
	p := withConfig(t, v, func(c *Config) { c.CloneMode = linkedClone })
	_, err := p.Create(ctx, req)
	if contract.ClassOf(err) != contract.ClassPermanent || !strings.Contains(err.Error(), "cloneMode linkedClone") {
		t.Errorf("linked clone of a template without a snapshot = %v (class %s), want Permanent naming cloneMode", err, contract.ClassOf(err))
	}
	p = withConfig(t, v, func(c *Config) { c.CloneMode, c.Snapshot = linkedClone, "gone" })
	_, err = p.Create(ctx, placementRequest("bad-snapshot"))
	if contract.ClassOf(err) != contract.ClassPermanent || !strings.Contains(err.Error(), `snapshot "gone"`) {
		t.Errorf("linked clone from a missing snapshot = %v (class %s), want Permanent naming the snapshot", err, contract.ClassOf(err))
	}
}

// The zone's storage policy goes into the clone's relocate spec (vcsim
// ignores it: what vCenter does with it is untested here).
func TestStoragePolicyInTheCloneSpec(t *testing.T) {
	v := startVcsim(t)
	const policy = "aa6d5a82-1c88-45da-85d3-3d74b91a5bad"
	p := withConfig(t, v, func(c *Config) {
		r := c.Regions["dc0"]
		z := r.Zones["c0"]
		z.StoragePolicyID = policy
		r.Zones["c0"] = z
	})
	if _, err := p.Create(context.Background(), placementRequest("policy")); err != nil {
		t.Fatal(err)
	}
	spec := v.lastClone(t)
	if len(spec.Location.Profile) != 1 {
		t.Fatalf("the clone's profile = %v, want the zone's policy", spec.Location.Profile)
	}
	if got, ok := spec.Location.Profile[0].(*types.VirtualMachineDefinedProfileSpec); !ok || got.ProfileId != policy {
		t.Errorf("the clone's profile = %#v, want VirtualMachineDefinedProfileSpec %s", spec.Location.Profile[0], policy)
	}
}

// A zone on a datastore cluster: storage DRS picks the datastore
// (vcsim's RecommendDatastores recommends each datastore of the pod).
func TestDatastoreClusterPlacesTheClone(t *testing.T) {
	v := startVcsim(t)
	ctx := context.Background()
	f := find.NewFinder(v.client, true)
	dc, err := f.Datacenter(ctx, "DC0")
	if err != nil {
		t.Fatal(err)
	}
	f.SetDatacenter(dc)
	folders, err := dc.Folders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := folders.DatastoreFolder.CreateStoragePod(ctx, "pod0")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := f.Datastore(ctx, "LocalDS_0")
	if err != nil {
		t.Fatal(err)
	}
	task, err := pod.MoveInto(ctx, []types.ManagedObjectReference{ds.Reference()})
	if err != nil || task.Wait(ctx) != nil {
		t.Fatalf("move the datastore into the pod: %v", err)
	}
	p := withConfig(t, v, func(c *Config) {
		r := c.Regions["dc0"]
		z := r.Zones["c0"]
		z.Datastore, z.DatastoreCluster = "", "pod0"
		r.Zones["c0"] = z
	})
	if _, err := p.Create(ctx, placementRequest("on-pod")); err != nil {
		t.Fatalf("Create on a datastore cluster: %v", err)
	}
	if got := v.lastClone(t).Location.Datastore; got == nil || *got != ds.Reference() {
		t.Errorf("the clone's datastore = %v, want LocalDS_0 (%s), the pod's one datastore", got, ds.Reference())
	}
}
