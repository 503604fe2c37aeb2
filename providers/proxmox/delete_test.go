package proxmox

import (
	"context"
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
