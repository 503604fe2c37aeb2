package vsphere

import (
	"context"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// A Delete powers the VM off before it destroys it (vCenter refuses to
// destroy a powered-on VM); between the two the VM is off and no destroy
// task is on it yet, and a read would take it for stopped. So Delete
// first writes markDeleting, the time it began, and a powered-off VM whose
// mark is younger than deleteWindow reads Terminated. A Delete cut off
// leaves a VM that reads Terminated and that nothing on vCenter finishes:
// the operator deletes its Terminated instances again (Delete is
// idempotent), which finishes it. The mark also expires rather than
// holding for good, so a VM whose Delete nobody repeats reads by its power
// state again once the window has passed (the garbage collector leaves
// Terminated instances alone).

// deleteWindow bounds a Delete from its mark to its destroy task: the
// power-off task and the destroy call.
func (p *Provider) deleteWindow() time.Duration {
	return p.cfg.TaskTimeout.Duration + p.cfg.CallTimeout.Duration
}

// deleting says a Delete marked the VM within deleteWindow and powered it
// off: the gap before its destroy task. A marked VM still on reads by its
// power state (the power-off is under way, or was cut off before it took
// effect); so does one whose mark expired. The mark's time is the clock of
// the operator replica that wrote it.
func (p *Provider) deleting(vm vmRead) bool {
	began, err := time.Parse(time.RFC3339Nano, extra(vm.VirtualMachine)[markDeleting])
	return err == nil && time.Since(began) < p.deleteWindow() && vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOff
}

// instance is the VM as the contract reports it, Terminated while a
// Delete is under way on it.
func (p *Provider) instance(regionName string, vm vmRead) contract.Instance {
	vm.destroying = vm.destroying || p.deleting(vm)
	return instance(regionName, vm)
}

// markDeleting writes the time the Delete begins into the VM's markDeleting.
func (p *Provider) markDeleting(ctx context.Context, vm vmRead) error {
	return p.do(ctx, "MarkDeleting", p.cfg.TaskTimeout.Duration, func(ctx context.Context, c *vim25.Client) error {
		task, err := object.NewVirtualMachine(c, vm.Reference()).Reconfigure(ctx, types.VirtualMachineConfigSpec{ExtraConfig: []types.BaseOptionValue{
			&types.OptionValue{Key: markDeleting, Value: time.Now().UTC().Format(time.RFC3339Nano)},
		}})
		if err != nil {
			return err
		}
		return waitTask(ctx, task)
	})
}
