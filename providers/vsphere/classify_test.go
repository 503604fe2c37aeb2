package vsphere

import (
	"context"
	"net/url"
	"testing"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// TestClassify classifies errors captured from real SOAP round trips: each
// is provoked on vcsim and comes back through govmomi's own decoding, the
// same path a vCenter's faults take. Faults vcsim only raises on request
// are injected as the method's SOAP fault.
func TestClassify(t *testing.T) {
	v := startVcsim(t)
	ctx := context.Background()
	const src = "vcsim (govmomi v0.56.0) SOAP response"
	inject := func(method string, f types.BaseMethodFault) {
		v.model.Service.AddFaultRule(&simulator.FaultInjectionRule{MethodName: method, ObjectType: "*", ObjectName: "*",
			FaultType: simulator.FaultTypeCustom, Fault: f, MaxCount: 1, Enabled: true, Probability: 1})
	}
	template := func() *object.VirtualMachine {
		vm, err := find.NewFinder(v.client, true).VirtualMachine(ctx, "/DC0/vm/"+templateName)
		if err != nil {
			t.Fatal(err)
		}
		return vm
	}
	powerOn := func() error {
		vm, err := find.NewFinder(v.client, true).VirtualMachine(ctx, "/DC0/vm/DC0_C0_RP0_VM1")
		if err != nil {
			t.Fatal(err)
		}
		_, err = vm.PowerOn(ctx)
		return err
	}

	missing := object.NewVirtualMachine(v.client, types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-404"})
	_, moNotFound := missing.PowerOn(ctx)

	inject("PowerOnVM_Task", &types.InsufficientResourcesFault{})
	insufficient := powerOn()
	inject("PowerOnVM_Task", &types.NoPermission{PrivilegeId: "VirtualMachine.Interact.PowerOn"})
	noPermission := powerOn()
	inject("PowerOnVM_Task", &types.TaskInProgress{})
	inProgress := powerOn()

	anonymous, err := vim25.NewClient(ctx, soap.NewClient(v.model.Service.Listen, true))
	if err != nil {
		t.Fatal(err)
	}
	var props mo.VirtualMachine
	notAuthenticated := object.NewCommon(anonymous, template().Reference()).Properties(ctx, template().Reference(), []string{"name"}, &props)

	if !isNotAuthenticated(notAuthenticated) {
		t.Fatalf("the unauthenticated call failed otherwise: %v", notAuthenticated)
	}
	invalidLogin := session.NewManager(anonymous).Login(ctx, url.UserPassword(testUser, "wrong-password"))

	folder, err := find.NewFinder(v.client, true).Folder(ctx, testFolder)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := find.NewFinder(v.client, true).ResourcePool(ctx, "/DC0/host/DC0_C0/Resources")
	if err != nil {
		t.Fatal(err)
	}
	poolRef := pool.Reference()
	clone := func() error {
		task, err := template().Clone(ctx, folder, "twice", types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Pool: &poolRef}})
		if err != nil {
			return err
		}
		return task.Wait(ctx)
	}
	if err := clone(); err != nil {
		t.Fatal(err)
	}
	duplicate := clone()
	if !isDuplicateName(duplicate) {
		t.Fatalf("the second clone failed otherwise: %v", duplicate)
	}

	_, findMiss := find.NewFinder(v.client, true).VirtualMachine(ctx, "/DC0/vm/no-such-vm")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, cancelledErr := template().PowerOn(cancelled)

	front, _ := url.Parse(v.front.URL + "/sdk")
	_, certificate := vim25.NewClient(ctx, soap.NewClient(front, false))

	contracttest.RunClassifyTable(t, classify, []contracttest.ClassifyCase{
		{Name: "ManagedObjectNotFound", Err: moNotFound, Want: contract.ErrNotFound, Source: src},
		{Name: "finder miss", Err: findMiss, Want: contract.ErrNotFound, Source: src + " (find.NotFoundError)"},
		{Name: "InsufficientResourcesFault", Err: insufficient, Want: contract.ErrQuota, Source: src},
		{Name: "NoPermission", Err: noPermission, Want: contract.ErrPermanent, Source: src},
		{Name: "InvalidLogin", Err: invalidLogin, Want: contract.ErrPermanent, Source: src},
		{Name: "NotAuthenticated", Err: notAuthenticated, Want: nil, Source: src + " (a session that is gone: logged in again)"},
		{Name: "TaskInProgress", Err: inProgress, Want: nil, Source: src},
		{Name: "DuplicateName", Err: duplicate, Want: nil, Source: src + " (task error of CloneVM_Task: Create resumes the racing clone)"},
		{Name: "cancelled ctx", Err: cancelledErr, Want: nil, Source: "context package through soap.Client"},
		{Name: "certificate not trusted", Err: certificate, Want: contract.ErrPermanent, Source: "crypto/x509 through soap.Client against the test's TLS front"},
	})
}

func TestStateTable(t *testing.T) {
	started := &types.VirtualMachineConfigInfo{ExtraConfig: []types.BaseOptionValue{&types.OptionValue{Key: markStarted, Value: "true"}}}
	guest := func(ips ...string) *types.GuestInfo {
		return &types.GuestInfo{Net: []types.GuestNicInfo{{IpAddress: ips}}}
	}
	vm := func(power types.VirtualMachinePowerState, cfg *types.VirtualMachineConfigInfo, g *types.GuestInfo) vmRead {
		return vmRead{VirtualMachine: mo.VirtualMachine{Config: cfg, Guest: g, Runtime: types.VirtualMachineRuntimeInfo{PowerState: power}}}
	}
	destroying := func(vm vmRead) vmRead { vm.destroying = true; return vm }
	// static was made for 198.51.100.20 (markAddress) and has run.
	static := &types.VirtualMachineConfigInfo{ExtraConfig: []types.BaseOptionValue{
		&types.OptionValue{Key: markStarted, Value: "true"}, &types.OptionValue{Key: markAddress, Value: "198.51.100.20"},
	}}
	for _, tc := range []struct {
		name   string
		vm     vmRead
		want   contract.State
		wantIP string
	}{
		{"cloned, never started", vm(types.VirtualMachinePowerStatePoweredOff, nil, nil), contract.StateProvisioning, ""},
		{"on, tools not reporting yet", vm(types.VirtualMachinePowerStatePoweredOn, started, nil), contract.StateProvisioning, ""},
		{"on, link-local and IPv6 only", vm(types.VirtualMachinePowerStatePoweredOn, started, guest("fe80::1", "169.254.3.4")), contract.StateProvisioning, ""},
		{"on with an address", vm(types.VirtualMachinePowerStatePoweredOn, started, guest("fe80::1", "10.20.0.7")), contract.StateRunning, "10.20.0.7"},
		{"on, address only in guest.ipAddress", vm(types.VirtualMachinePowerStatePoweredOn, started, &types.GuestInfo{IpAddress: "10.20.0.8"}), contract.StateRunning, "10.20.0.8"},
		{"on, static address, Tools report another", vm(types.VirtualMachinePowerStatePoweredOn, static, guest("10.20.0.7")), contract.StateProvisioning, ""},
		{"on, static address, Tools report it after another", vm(types.VirtualMachinePowerStatePoweredOn, static, guest("10.20.0.7", "198.51.100.20")), contract.StateRunning, "198.51.100.20"},
		{"on, static address in guest.ipAddress, IPv4-mapped", vm(types.VirtualMachinePowerStatePoweredOn, static, &types.GuestInfo{IpAddress: "::ffff:198.51.100.20"}), contract.StateRunning, "198.51.100.20"},
		{"on, static address, Tools not reporting yet", vm(types.VirtualMachinePowerStatePoweredOn, static, nil), contract.StateProvisioning, ""},
		{"off, static address, ran before", vm(types.VirtualMachinePowerStatePoweredOff, static, nil), contract.StateStopped, ""},
		{"stopped after running", vm(types.VirtualMachinePowerStatePoweredOff, started, nil), contract.StateStopped, ""},
		{"suspended", vm(types.VirtualMachinePowerStateSuspended, started, nil), contract.StateStopped, ""},
		{"a state vSphere may add", vm("hibernated", started, nil), contract.StateStopped, ""},
		{"off, a destroy task under way", destroying(vm(types.VirtualMachinePowerStatePoweredOff, started, nil)), contract.StateTerminated, ""},
		{"on with an address, a destroy task under way", destroying(vm(types.VirtualMachinePowerStatePoweredOn, started, guest("10.20.0.7"))), contract.StateTerminated, ""},
	} {
		state, ip, _ := stateOf(tc.vm)
		if state != tc.want || ip != tc.wantIP {
			t.Errorf("%s: %s %q, want %s %q", tc.name, state, ip, tc.want, tc.wantIP)
		}
	}
}
