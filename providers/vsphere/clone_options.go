package vsphere

import (
	"context"
	"fmt"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// The clone options users of CAPV expect (spec entries 4 and 15): linked
// clones from a snapshot, a storage policy, a datastore cluster.

// cloneOptions sets the clone mode and the storage policy on spec. A
// linked clone's disks are children of the snapshot's (diskMoveType
// createNewChildDiskBacking with the snapshot, as CAPV's clone.go): the
// named snapshot, or the template's current one. A template without one
// is a config to fix, not a reason to fall back to a full clone silently
// (CAPV falls back; here the admin chose linkedClone and is told).
func (p *Provider) cloneOptions(ctx context.Context, plan plan, tmpl *object.VirtualMachine, spec *types.VirtualMachineCloneSpec) error {
	if id := plan.zone.StoragePolicyID; id != "" {
		profile := []types.BaseVirtualMachineProfileSpec{&types.VirtualMachineDefinedProfileSpec{ProfileId: id}}
		spec.Location.Profile = profile
	}
	if p.cfg.CloneMode != linkedClone {
		return nil
	}
	var snap *types.ManagedObjectReference
	if p.cfg.Snapshot != "" {
		found, err := tmpl.FindSnapshot(ctx, p.cfg.Snapshot)
		if err != nil {
			return contract.Permanentf("snapshot %q of %s %q: %w", p.cfg.Snapshot, imageField(plan.image), plan.template, err)
		}
		snap = found
	} else {
		var vm mo.VirtualMachine
		if err := tmpl.Properties(ctx, tmpl.Reference(), []string{"snapshot"}, &vm); err != nil {
			return err
		}
		if vm.Snapshot == nil || vm.Snapshot.CurrentSnapshot == nil {
			return contract.Permanentf("cloneMode %s: %s %q has no snapshot to clone from: take one, or name one in snapshot", linkedClone, imageField(plan.image), plan.template)
		}
		snap = vm.Snapshot.CurrentSnapshot
	}
	spec.Snapshot = snap
	spec.Location.DiskMoveType = string(types.VirtualMachineRelocateDiskMoveOptionsCreateNewChildDiskBacking)
	return nil
}

// placeStorage sets the clone's datastore: the zone's, or the one storage
// DRS recommends in the zone's datastore cluster for this clone, as govc's
// vm.clone -datastore-cluster asks (RecommendDatastores, then the first
// recommendation's destination).
func (p *Provider) placeStorage(ctx context.Context, c *vim25.Client, plan plan, tmpl *object.VirtualMachine, folder *object.Folder, name string, spec *types.VirtualMachineCloneSpec) error {
	if plan.zone.Datastore != "" {
		ds, err := ref(ctx, p, c, plan.regionName, plan.field("datastore"), plan.zone.Datastore, (*find.Finder).Datastore)
		if err != nil {
			return err
		}
		r := ds.Reference()
		spec.Location.Datastore = &r
		return nil
	}
	pod, err := ref(ctx, p, c, plan.regionName, plan.field("datastoreCluster"), plan.zone.DatastoreCluster, (*find.Finder).DatastoreCluster)
	if err != nil {
		return err
	}
	podRef, vmRef, folderRef := pod.Reference(), tmpl.Reference(), folder.Reference()
	result, err := object.NewStorageResourceManager(c).RecommendDatastores(ctx, types.StoragePlacementSpec{
		Type:      string(types.StoragePlacementSpecPlacementTypeClone),
		Vm:        &vmRef,
		Folder:    &folderRef,
		CloneName: name,
		CloneSpec: spec,
		PodSelectionSpec: types.StorageDrsPodSelectionSpec{
			StoragePod: &podRef,
			// The VM's home in the pod too; vcsim recommends only for
			// the pods listed here.
			InitialVmConfig: []types.VmPodConfigForPlacement{{StoragePod: podRef}},
		},
	})
	if err != nil {
		return err
	}
	for _, rec := range result.Recommendations {
		for _, action := range rec.Action {
			if place, ok := action.(*types.StoragePlacementAction); ok {
				dest := place.Destination
				spec.Location.Datastore = &dest
				return nil
			}
		}
	}
	// Storage DRS off, or no datastore with room: an admin must act, but
	// room may come back; not Permanent.
	return fmt.Errorf("%s %q: storage DRS recommended no datastore", plan.field("datastoreCluster"), plan.zone.DatastoreCluster)
}
