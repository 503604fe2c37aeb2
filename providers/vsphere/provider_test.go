package vsphere

import (
	"context"
	"testing"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// TestVanishedVMKeepsTheInventoryCache: a Delete whose destroy finds the
// VM already gone (another Delete got there first) leaves the session's
// cache of the datacenter's folder alone, so the next Get costs its two
// calls (FindChild, RetrieveProperties) and not a fresh finder lookup of
// the datacenter and folder. ConcurrentCallsAreSafe's overlapping Deletes
// timed out under load on those lookups when any ManagedObjectNotFound
// emptied the cache.
func TestVanishedVMKeepsTheInventoryCache(t *testing.T) {
	v := startVcsim(t)
	c := control{v}
	p := v.provider(t)
	ctx := context.Background()
	var ids []string
	for _, name := range []string{"vanished", "other"} {
		inst, err := p.Create(ctx, contract.CreateRequest{
			Name: name, UID: "uid-" + name, Owner: testOwner, CloudInit: []byte("#cloud-config\n"), Port: 3128,
			Placement: contract.Placement{Region: "dc0", Zone: "c0", MachineType: "small", Image: "debian-12"},
		})
		if err != nil {
			t.Fatalf("Create %s: %v", name, err)
		}
		ids = append(ids, inst.ProviderID)
	}
	vm, err := c.vm(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	// What vCenter answers a destroy of a VM another Delete destroyed
	// between this Delete's lookup and its destroy.
	v.model.Service.AddFaultRule(&simulator.FaultInjectionRule{
		MethodName: "Destroy_Task", ObjectType: "*", ObjectName: "*", FaultType: simulator.FaultTypeCustom,
		Fault: &types.ManagedObjectNotFound{Obj: vm.Reference()}, MaxCount: 1, Enabled: true, Probability: 1,
	})
	if err := p.Delete(ctx, ids[0]); err != nil {
		t.Fatalf("Delete of a VM destroyed under it = %v, want nil", err)
	}
	before := c.Calls()
	if _, err := p.Get(ctx, ids[1]); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if n := c.Calls() - before; n != 1 {
		t.Errorf("Get after a Delete met ManagedObjectNotFound for its own VM made %d SOAP calls, want 1 (the read by its reference): the folder was looked up again", n)
	}
}
