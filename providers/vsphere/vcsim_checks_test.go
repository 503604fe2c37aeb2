package vsphere

import (
	"bytes"
	"context"
	"testing"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// The checks a vCenter makes on a clone that vcsim skips, made by the
// test's backend control: vcsim's template VM is wrapped (a method
// override, as govmomi's simulator/example_extend_test.go shows) so that
// its CloneVM_Task refuses what vCenter refuses, with vCenter's fault.

// checkedTemplate is vcsim's template VM with vCenter's placement checks.
type checkedTemplate struct {
	*simulator.VirtualMachine
	v *vcsim
}

// CloneVMTask refuses, with InvalidArgument as vCenter does:
//   - a clone into a cluster without DRS that names no host
//     (invalidProperty spec.location.host). The API reference,
//     VirtualMachineRelocateSpec.pool and .host (vim.vm.RelocateSpec;
//     govmomi vim25/types/types.go): "If a resource pool is specified, the
//     virtual machine is powered on, and the target pool represents a
//     cluster without DRS enabled, an InvalidArgument exception is
//     thrown." The same page says a clone into such a cluster gets "a
//     random compatible host"; vCenters answer spec.location.host all the
//     same (ansible/ansible#25967, ansible-modules-extras#2911), so the
//     control plays the stricter of the two and the provider must pass
//     either.
//   - a host that is not in the pool's cluster: "Host … not found in the
//     specified resource pool" (vCenter's VmProv log in
//     ansible-modules-extras#2911), invalidProperty spec.location.host.
func (vm *checkedTemplate) CloneVMTask(ctx *simulator.Context, req *types.CloneVM_Task) soap.HasFault {
	vm.v.mu.Lock()
	vm.v.clones = append(vm.v.clones, req.Spec)
	vm.v.mu.Unlock()
	if prop := placementFault(ctx, req.Spec.Location); prop != "" {
		return &methods.CloneVM_TaskBody{Fault_: simulator.Fault("A specified parameter was not correct: "+prop, &types.InvalidArgument{InvalidProperty: prop})}
	}
	return vm.VirtualMachine.CloneVMTask(ctx, req)
}

// placementFault returns the property vCenter would name refusing loc, or
// "".
func placementFault(ctx *simulator.Context, loc types.VirtualMachineRelocateSpec) string {
	if loc.Pool == nil {
		return ""
	}
	pool, ok := ctx.Map.Get(*loc.Pool).(*simulator.ResourcePool)
	if !ok || pool.Owner.Type != "ClusterComputeResource" {
		return "" // a standalone host's pool: the host is implied
	}
	cluster, ok := ctx.Map.Get(pool.Owner).(*simulator.ClusterComputeResource)
	if !ok {
		return ""
	}
	if loc.Host == nil {
		cfg, _ := cluster.ConfigurationEx.(*types.ClusterConfigInfoEx)
		if cfg == nil || cfg.DrsConfig.Enabled == nil || !*cfg.DrsConfig.Enabled {
			return "spec.location.host"
		}
		return ""
	}
	for _, h := range cluster.Host {
		if h == *loc.Host {
			return ""
		}
	}
	return "spec.location.host"
}

// checkTemplates puts the checks on every datacenter's template.
func (v *vcsim) checkTemplates(t testing.TB) {
	t.Helper()
	for _, name := range datacenters {
		tmpl, err := find.NewFinder(v.client, true).VirtualMachine(context.Background(), "/"+name+"/vm/"+templateName)
		if err != nil {
			t.Fatal(err)
		}
		obj, ok := v.model.Map().Get(tmpl.Reference()).(*simulator.VirtualMachine)
		if !ok {
			t.Fatalf("vcsim's template %s is a %T", tmpl.Reference(), v.model.Map().Get(tmpl.Reference()))
		}
		v.model.Map().Put(&checkedTemplate{VirtualMachine: obj, v: v})
	}
}

// setDRS turns DRS on or off on the cluster at path, as an administrator.
func (v *vcsim) setDRS(t *testing.T, path string, enabled bool) {
	t.Helper()
	ctx := context.Background()
	cluster, err := find.NewFinder(v.client, true).ClusterComputeResource(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	task, err := cluster.Reconfigure(ctx, &types.ClusterConfigSpecEx{DrsConfig: &types.ClusterDrsConfigInfo{Enabled: types.NewBool(enabled)}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// hostOf is the name of the host the VM runs on.
func (v *vcsim) hostOf(t *testing.T, providerID string) string {
	t.Helper()
	ctx := context.Background()
	vm, err := control{v}.vm(ctx, providerID)
	if err != nil {
		t.Fatal(err)
	}
	host, err := vm.HostSystem(ctx)
	if err != nil {
		t.Fatal(err)
	}
	name, err := host.ObjectName(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// maintenance puts the host at path into maintenance mode or out of it,
// as an administrator.
func (v *vcsim) maintenance(t *testing.T, path string, enter bool) {
	t.Helper()
	ctx := context.Background()
	host, err := find.NewFinder(v.client, true).HostSystem(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	var task *object.Task
	if enter {
		task, err = host.EnterMaintenanceMode(ctx, 0, false, nil)
	} else {
		task, err = host.ExitMaintenanceMode(ctx, 0)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// failPowerOn makes the next clone that powers on fail its power-on with
// fault: vCenter's CloneVM_Task with powerOn set makes the VM, then fails
// the task with the power-on's fault and leaves the clone powered off
// (admission control refusing it, a host out of memory). vcsim's clone
// always powers on; the front asks it for a clone without the power-on,
// and fails the task once it has ended.
func (v *vcsim) failPowerOn(fault types.BaseMethodFault) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.powerOnFault = fault
}

var powerOnTrue = []byte("<powerOn>true</powerOn>")

// takePowerOnFault returns the body to send vcsim and, when the body is
// the clone failPowerOn waits for, the fault to fail its task with.
func (v *vcsim) takePowerOnFault(body []byte) ([]byte, types.BaseMethodFault) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.powerOnFault == nil || !bytes.Contains(body, []byte("CloneVM_Task")) || !bytes.Contains(body, powerOnTrue) {
		return body, nil
	}
	f := v.powerOnFault
	v.powerOnFault = nil
	return bytes.Replace(body, powerOnTrue, []byte("<powerOn>false</powerOn>"), 1), f
}

// failTask sets the ended task answer returns to have failed with fault.
func (v *vcsim) failTask(answer []byte, fault types.BaseMethodFault) {
	m := taskRef.FindSubmatch(answer)
	if m == nil {
		return
	}
	task := v.model.Map().Get(types.ManagedObjectReference{Type: "Task", Value: string(m[1])})
	if task == nil {
		return
	}
	v.model.Map().AtomicUpdate(v.simContext(), task, []types.PropertyChange{
		{Name: "info.state", Val: types.TaskInfoStateError},
		{Name: "info.error", Val: &types.LocalizedMethodFault{Fault: fault, LocalizedMessage: "The available Memory resources in the parent resource pool are insufficient for the operation."}},
	})
}

// lastClone is the spec of the last clone asked of a template.
func (v *vcsim) lastClone(t *testing.T) types.VirtualMachineCloneSpec {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.clones) == 0 {
		t.Fatal("no clone was asked for")
	}
	return v.clones[len(v.clones)-1]
}
