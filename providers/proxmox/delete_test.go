package proxmox

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/providers/proxmox/pvefake"
)

// A Delete depends on the VM's own storages only. With
// destroy-unreferenced-disks, qemu-server's destroy_vm lists the VMID's
// disks on every enabled storage outside any eval, after it freed the
// VM's own disks and before it removes the config: one unreachable
// storage elsewhere in the cluster (an NFS archive) failed every destroy
// task, each retry again, and the Proxy's finalizer never ended.
func TestDeleteWithAnUnrelatedStorageOffline(t *testing.T) {
	f := startFakeOpts(t, func(o *pvefake.Options) {
		o.Storages = append(o.Storages, pvefake.StorageSpec{Name: "archive", Type: "nfs", Content: []string{"images", "backup"}, Shared: true, Offline: true})
	})
	p := f.provider(t)
	ctx := context.Background()
	inst := createRetrying(t, p, request("storage-offline", testUID(21)))
	if err := p.Delete(ctx, inst.ProviderID); err != nil {
		t.Fatalf("Delete with storage archive offline: %v (class %s)", err, contract.ClassOf(err))
	}
	f.s.WaitTasks()
	if left := f.s.Inventory(); len(left) != 0 {
		t.Errorf("left behind after Delete: %v", left)
	}
}

// A Delete depends on the VM's own node only. Its seed is on the ISO
// storage of the node it was made on; listing every zone's node for
// seeds made one node down fail every Delete in the region, and with it
// every replacement of a Proxy on an address pool.
func TestDeleteWithAnotherNodeDown(t *testing.T) {
	f := startFake(t)
	p := f.provider(t)
	ctx := context.Background()
	inst := createRetrying(t, p, inZone("node-down", 22, "a")) // on pve1
	f.s.NodeDown("pve2", true)
	if err := p.Delete(ctx, inst.ProviderID); err != nil {
		t.Fatalf("Delete of a VM on pve1 with pve2 down: %v (class %s)", err, contract.ClassOf(err))
	}
	f.s.WaitTasks()
	if left := f.s.Inventory(); len(left) != 0 {
		t.Errorf("left behind after Delete: %v", left)
	}
	// A Delete that finds the VM gone (a retry after the destroy) does not
	// know its node: a down node's seeds, if any, wait for the node, and
	// the Delete is done.
	if err := p.Delete(ctx, inst.ProviderID); err != nil {
		t.Errorf("Delete again with pve2 down: %v (class %s)", err, contract.ClassOf(err))
	}
}

// A VM on a node that cannot be reached is reported, not an error: Get
// says Stopped with the node named in the message (contract §3: a state
// unknown to the provider is Stopped), from what the cluster still lists
// of it, so a Proxy's serving VM there leaves the Service and a lone
// replica says why it is not Ready. Its Delete cannot run until the node
// is back (the VM's config and disks are the node's): a transient error
// naming the node. Once the node is back, Get reads the VM as before and
// Delete deletes it.
func TestVMOnADownNodeIsReportedStopped(t *testing.T) {
	f := startFake(t)
	p := f.provider(t)
	ctx := context.Background()
	inst := createRetrying(t, p, inZone("on-down-node", 23, "b")) // on pve2
	before, err := p.Get(ctx, inst.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	f.s.NodeDown("pve2", true)

	got, err := p.Get(ctx, inst.ProviderID)
	if err != nil {
		t.Fatalf("Get of a VM on a down node: %v (class %s); want it reported", err, contract.ClassOf(err))
	}
	if got.State != contract.StateStopped || got.UID != inst.UID || got.Name != inst.Name || !strings.Contains(got.Message, "pve2") {
		t.Errorf("Get = %+v; want Stopped, UID %s, name %s, a message naming node pve2", got, inst.UID, inst.Name)
	}
	err = p.Delete(ctx, inst.ProviderID)
	if contract.ClassOf(err) != contract.ClassTransient || !strings.Contains(fmt.Sprint(err), "pve2") {
		t.Errorf("Delete of a VM on a down node = %v (class %s); want a transient error naming pve2", err, contract.ClassOf(err))
	}

	f.s.NodeDown("pve2", false)
	if got, err := p.Get(ctx, inst.ProviderID); err != nil || got.State != before.State {
		t.Errorf("Get once the node is back = %+v, %v; want %s, as before", got, err, before.State)
	}
	if err := p.Delete(ctx, inst.ProviderID); err != nil {
		t.Fatalf("Delete once the node is back: %v", err)
	}
	f.s.WaitTasks()
	if left := f.s.Inventory(); len(left) != 0 {
		t.Errorf("left behind after Delete: %v", left)
	}
}
