package proxmox

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/providers/proxmox/pvefake"
)

// A zone on another node than a template on local storage cannot be
// served: PVE refuses the clone ("can't clone VM to node 'pve2' (VM uses
// local storage)", qemu-server clone_vm) and will until a person changes
// the cluster or the config. Create says so, permanently, and what to do
// (the provider refuses before sending the clone, templates.go; PVE's own
// answer is classified Permanent too, TestClassify).
func TestCloneToAnotherNodeFromLocalStorage(t *testing.T) {
	// The template on pve1 only (the fixture has one per node).
	f := startFakeOpts(t, func(o *pvefake.Options) { o.Templates = o.Templates[:1] })
	p := f.provider(t)
	req := request("far", testUID(1))
	req.Placement.Zone = "b" // pve2; debian-12's template is on pve1, local-lvm
	_, err := p.Create(context.Background(), req)
	if !errors.Is(err, contract.ErrPermanent) {
		t.Fatalf("Create in zone b from a template on pve1's local storage = %v (class %s), want ErrPermanent", err, contract.ClassOf(err))
	}
	for _, want := range []string{"VM uses local storage", "template 9000", "pve1", `zone "b"`, "shared storage"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %q", err, want)
		}
	}
	if n := countVMs(f); n != 0 {
		t.Errorf("the fake holds %d VMs after the refused clone: %v", n, f.s.Inventory())
	}
}

// A template on shared storage clones to any node: the VM is made on the
// template's node and moved to the zone's at the clone's end.
func TestCloneToAnotherNodeFromSharedStorage(t *testing.T) {
	f := startFakeWith(t, func(o *pvefake.Options) {
		o.Storages = append(o.Storages, pvefake.StorageSpec{Name: "ceph", Type: "rbd", Content: []string{"images"}, Shared: true})
		o.Templates = o.Templates[:1] // on pve1 only
		o.Templates[0].Storage = "ceph"
	}, func(*Config) {})
	p := f.provider(t)
	req := request("far", testUID(1))
	req.Placement.Zone = "b"
	inst, err := p.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	vmid, _ := vmidOf(inst.ProviderID)
	if node := f.s.Node(vmid); node != "pve2" {
		t.Errorf("VM %d is on %q, want pve2", vmid, node)
	}
	if conf, _ := f.s.Config(vmid); !strings.HasPrefix(conf["scsi0"], "ceph:base-9000-disk-0/vm-") {
		t.Errorf("VM %d's disk is %q, want a linked clone on ceph", vmid, conf["scsi0"])
	}
	assertDistinct(t, f, []contract.Instance{inst})
}

// A VMID another node took between the list and the clone fails the
// clone's task (pmxcfs refuses the temporary config); Create goes on to
// the next VMID rather than failing.
func TestCloneTaskFindsTheVMIDTaken(t *testing.T) {
	f := startFake(t)
	p := f.provider(t)
	req := request("raced", testUID(1))
	vmid := firstVMID(req.UID, f.cfg.Regions[testRegion].VMIDs)
	f.s.FailNextTask("qmclone", "close (rename) atomic file '/etc/pve/nodes/pve1/qemu-server/"+itoa(vmid)+".conf' failed: File exists")
	inst, err := p.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("Create whose first clone found its VMID taken = %v, want success at the next VMID", err)
	}
	if got, _ := vmidOf(inst.ProviderID); got == vmid {
		t.Errorf("Create made VM %d, the VMID its clone found taken", got)
	}
	assertDistinct(t, f, []contract.Instance{inst})
}

func itoa(n int) string { return strconv.Itoa(n) }
