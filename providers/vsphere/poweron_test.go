package vsphere

import (
	"context"
	"testing"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// A clone whose power-on failed has never run: it reads Provisioning, not
// Stopped (spec entry 9, provisioning-state: marker), in Get and in a
// list, and the next Create powers it on (Create's step 3).
func TestFailedPowerOnIsNeverStopped(t *testing.T) {
	v := startVcsim(t)
	p := v.provider(t)
	ctx := context.Background()
	req := placementRequest("power-on-failed")
	v.failPowerOn(&types.InsufficientMemoryResourcesFault{})
	if _, err := p.Create(ctx, req); err == nil {
		t.Fatal("Create whose clone's power-on failed = nil, want the power-on's fault")
	}
	id := ids.Format("dc0", req.Name)
	got, err := p.Get(ctx, id)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.State != contract.StateProvisioning {
		t.Errorf("Get of a clone whose power-on failed = %s, want Provisioning: it never ran", got.State)
	}
	found, err := p.ListByTag(ctx, contract.LabelUID, req.UID)
	if err != nil || len(found) != 1 || found[0].State != contract.StateProvisioning {
		t.Errorf("ListByTag = %+v, %v: want the VM, Provisioning", found, err)
	}
	inst, err := p.Create(ctx, req)
	if err != nil {
		t.Fatalf("the next Create: %v", err)
	}
	if inst.State == contract.StateStopped || inst.State == contract.StateTerminated {
		t.Errorf("the next Create returned %s, want the VM powered on", inst.State)
	}
	if err := (control{v}).ReportIP(ctx, id, "203.0.113.7"); err != nil {
		t.Fatal(err)
	}
	// Once it has run, powering it off makes it Stopped.
	vm, err := (control{v}).vm(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := powerOff(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Get(ctx, id); err != nil || got.State != contract.StateStopped {
		t.Errorf("Get after it ran and was powered off = %s, %v: want Stopped", got.State, err)
	}
}
