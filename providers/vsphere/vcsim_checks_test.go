package vsphere

import (
	"bytes"
	"context"
	"slices"
	"strings"
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
//
// and, on a named host that does not see them (vcsim never checks):
//   - the clone's datastore: InvalidDatastore, which the API reference
//     lists for CloneVM_Task ("Thrown if the operation cannot be
//     performed on the target datastores"); a host sees the datastores in
//     its `datastore` property (HostSystem, vim.HostSystem).
//   - a network a card of the clone is backed by: CannotAccessNetwork
//     ("a network … is not accessible" from the host; vim.fault, a
//     CannotAccessVmDevice), as vCenter's compatibility check answers; a
//     host sees the networks in its `network` property.
func (vm *checkedTemplate) CloneVMTask(ctx *simulator.Context, req *types.CloneVM_Task) soap.HasFault {
	vm.v.mu.Lock()
	vm.v.clones = append(vm.v.clones, req.Spec)
	vm.v.mu.Unlock()
	if prop := placementFault(ctx, req.Spec.Location); prop != "" {
		return &methods.CloneVM_TaskBody{Fault_: simulator.Fault("A specified parameter was not correct: "+prop, &types.InvalidArgument{InvalidProperty: prop})}
	}
	if fault := visibilityFault(ctx, req.Spec); fault != nil {
		return &methods.CloneVM_TaskBody{Fault_: fault}
	}
	return vm.VirtualMachine.CloneVMTask(ctx, req)
}

// visibilityFault is vCenter's fault for a clone onto a named host that
// does not see its datastore or one of its cards' networks, or nil.
func visibilityFault(ctx *simulator.Context, spec types.VirtualMachineCloneSpec) *soap.Fault {
	if spec.Location.Host == nil {
		return nil
	}
	host, ok := ctx.Map.Get(*spec.Location.Host).(*simulator.HostSystem)
	if !ok {
		return nil
	}
	if ds := spec.Location.Datastore; ds != nil && !slices.Contains(host.Datastore, *ds) {
		return simulator.Fault("The operation is not supported on the object: datastore "+ds.Value+" is not accessible from host "+host.Name,
			&types.InvalidDatastore{Datastore: ds})
	}
	if spec.Config == nil {
		return nil
	}
	for _, change := range spec.Config.DeviceChange {
		nic, ok := change.GetVirtualDeviceConfigSpec().Device.(types.BaseVirtualEthernetCard)
		if !ok {
			continue
		}
		var net types.ManagedObjectReference
		switch b := nic.GetVirtualEthernetCard().Backing.(type) {
		case *types.VirtualEthernetCardDistributedVirtualPortBackingInfo:
			net = types.ManagedObjectReference{Type: "DistributedVirtualPortgroup", Value: b.Port.PortgroupKey}
		case *types.VirtualEthernetCardNetworkBackingInfo:
			if b.Network == nil {
				continue
			}
			net = *b.Network
		default:
			continue
		}
		if !slices.Contains(host.Network, net) {
			return simulator.Fault("Network "+net.Value+" is not accessible from host "+host.Name,
				&types.CannotAccessNetwork{CannotAccessVmDevice: types.CannotAccessVmDevice{Device: "ethernet"}, Network: &net})
		}
	}
	return nil
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

// disableDRS turns DRS off on cluster DC0_C0 (zone c0's), as an
// administrator.
func (v *vcsim) disableDRS(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	cluster, err := find.NewFinder(v.client, true).ClusterComputeResource(ctx, "/DC0/host/DC0_C0")
	if err != nil {
		t.Fatal(err)
	}
	task, err := cluster.Reconfigure(ctx, &types.ClusterConfigSpecEx{DrsConfig: &types.ClusterDrsConfigInfo{Enabled: types.NewBool(false)}}, true)
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

// hide makes the host at path see neither the datastore nor the network
// named (either may be ""), as a host without that local datastore or
// port group does.
func (v *vcsim) hide(t *testing.T, path, datastore, network string) {
	t.Helper()
	ctx := context.Background()
	f := find.NewFinder(v.client, true)
	h, err := f.HostSystem(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := f.Datacenter(ctx, "/"+strings.Split(strings.TrimPrefix(path, "/"), "/")[0])
	if err != nil {
		t.Fatal(err)
	}
	f.SetDatacenter(dc)
	host := v.model.Map().Get(h.Reference()).(*simulator.HostSystem)
	var changes []types.PropertyChange
	if datastore != "" {
		ds, err := f.Datastore(ctx, datastore)
		if err != nil {
			t.Fatal(err)
		}
		changes = append(changes, types.PropertyChange{Name: "datastore", Val: slices.DeleteFunc(slices.Clone(host.Datastore), func(r types.ManagedObjectReference) bool { return r == ds.Reference() })})
	}
	if network != "" {
		n, err := f.Network(ctx, network)
		if err != nil {
			t.Fatal(err)
		}
		changes = append(changes, types.PropertyChange{Name: "network", Val: slices.DeleteFunc(slices.Clone(host.Network), func(r types.ManagedObjectReference) bool { return r == n.Reference() })})
	}
	v.model.Map().AtomicUpdate(v.simContext(), host, changes)
}
