package proxmox

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	pve "github.com/luthermonson/go-proxmox"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// otherOwner is a second install (or entry) sharing the fake cluster.
const otherOwner = "d00dfeed-lab"

// The managed mark's value is the request's Owner: written in the tags and
// the description, read back by Create, Get (from a fresh provider) and
// ListByTag.
func TestOwnerIsTheManagedMark(t *testing.T) {
	f := startFake(t)
	ctx := context.Background()
	req := request("owned", testUID(20))
	inst, err := f.provider(t).Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	vmid, _ := vmidOf(inst.ProviderID)
	conf, _ := f.s.Config(vmid)
	if tags := splitTags(conf["tags"]); !slices.Contains(tags, "egressproxies-managed") || !slices.Contains(tags, "egressproxies-owner-"+testOwner) {
		t.Errorf("tags %q lack egressproxies-managed and egressproxies-owner-%s", conf["tags"], testOwner)
	}
	if !strings.Contains(conf["description"], "\n"+contract.LabelManaged+"="+testOwner+"\n") {
		t.Errorf("description %q lacks %s=%s", conf["description"], contract.LabelManaged, testOwner)
	}
	if inst.Owner != testOwner {
		t.Errorf("Create returned Owner %q, want %q", inst.Owner, testOwner)
	}
	if got, err := f.provider(t).Get(ctx, inst.ProviderID); err != nil || got.Owner != testOwner {
		t.Errorf("Get from a fresh provider = %+v, %v; want Owner %q", got, err, testOwner)
	}
	if got, err := f.provider(t).ListByTag(ctx, contract.LabelManaged, testOwner); err != nil || len(got) != 1 || got[0].Owner != testOwner {
		t.Errorf("ListByTag(%s, %s) = %+v, %v; want the VM with its Owner", contract.LabelManaged, testOwner, got, err)
	}
}

// Two installs on one cluster: each lists only its own VMs by its Owner,
// neither is listed as legacy, and a UID list finds a VM whatever its owner.
func TestOwnersDoNotListEachOther(t *testing.T) {
	f := startFake(t)
	p := f.provider(t)
	mine := createRetrying(t, p, request("mine", testUID(21)))
	theirsReq := request("theirs", testUID(22))
	theirsReq.Owner = otherOwner
	theirs := createRetrying(t, p, theirsReq)
	assertListed(t, p, contract.LabelManaged, testOwner, mine)
	assertListed(t, p, contract.LabelManaged, otherOwner, theirs)
	assertListed(t, p, contract.LabelManaged, contract.LegacyManagedValue)
	assertListed(t, p, contract.LabelUID, theirsReq.UID, theirs)

	// The same Proxy under another Owner (an entry renamed, an install
	// reinstalled): its VM is adopted, marks unchanged, never cloned again.
	again := theirsReq
	again.Owner = testOwner
	if got := createRetrying(t, p, again); got.ProviderID != theirs.ProviderID || got.Owner != otherOwner {
		t.Errorf("Create under another Owner = %+v; want %s adopted with Owner %s", got, theirs.ProviderID, otherOwner)
	}
	assertDistinct(t, f, []contract.Instance{mine, theirs})
}

// A VM made by the previous release carries the managed tag without an
// owner tag and "managed=true" in its description: it is listed by LegacyManagedValue
// and by its UID, never by an Owner, Get reads its Owner as "true", and a
// Create of its name and UID from this release adopts it, marks unchanged.
func TestLegacyVM(t *testing.T) {
	f := startFake(t)
	p := f.provider(t)
	ctx := context.Background()
	req := request("legacy", testUID(23))
	made, err := control{f}.CreateLegacy(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	id := made.ProviderID
	legacy := contract.Instance{ProviderID: id, Owner: contract.LegacyManagedValue}

	assertListed(t, p, contract.LabelManaged, contract.LegacyManagedValue, legacy)
	assertListed(t, p, contract.LabelManaged, testOwner)
	assertListed(t, p, contract.LabelUID, req.UID, legacy)
	if got, err := f.provider(t).Get(ctx, id); err != nil || got.Owner != contract.LegacyManagedValue || got.UID != req.UID {
		t.Errorf("Get = %+v, %v; want Owner %q and UID %s", got, err, contract.LegacyManagedValue, req.UID)
	}
	adopted, err := f.provider(t).Create(ctx, req)
	if err != nil || adopted.ProviderID != id {
		t.Fatalf("Create over the legacy VM = %+v, %v; want it adopted as %s", adopted, err, id)
	}
	if adopted.Owner != contract.LegacyManagedValue {
		t.Errorf("the adopted VM's Owner = %q; adoption does not rewrite the marks", adopted.Owner)
	}
	assertDistinct(t, f, []contract.Instance{adopted})
}

// A VM the previous release left in the mark window (cloned, "managed=true"
// in its description, no tags yet) is listed as legacy, not by an Owner;
// this release's Create resumes it and tags it as legacy, as it was made.
func TestLegacyVMInTheMarkWindow(t *testing.T) {
	f := startFake(t)
	p := f.provider(t)
	ctx := context.Background()
	req := request("legacy-window", testUID(24))
	vmid := f.legacyClone(t, req)
	id := ids.Format(testRegion, fmt.Sprint(vmid))
	legacy := contract.Instance{ProviderID: id, Owner: contract.LegacyManagedValue}
	assertListed(t, p, contract.LabelManaged, contract.LegacyManagedValue, legacy)
	assertListed(t, p, contract.LabelManaged, testOwner)
	assertListed(t, p, contract.LabelUID, req.UID, legacy)

	inst, err := p.Create(ctx, req)
	if err != nil || inst.ProviderID != id {
		t.Fatalf("Create over the legacy VM in the mark window = %+v, %v; want it resumed as %s", inst, err, id)
	}
	conf, _ := f.s.Config(vmid)
	if tags := splitTags(conf["tags"]); !slices.Contains(tags, "egressproxies-managed") || slices.ContainsFunc(tags, func(t string) bool { return strings.HasPrefix(t, "egressproxies-owner-") }) {
		t.Errorf("tags %q: want the bare managed tag and no owner tag on a VM the previous release made", conf["tags"])
	}
	assertListed(t, p, contract.LabelManaged, contract.LegacyManagedValue, legacy)
	assertListed(t, p, contract.LabelManaged, testOwner)
}

// legacyClone makes the VM the previous release (contract v0.2) left when
// its Create was cut off in the mark window, through the PVE API as that
// release did: a clone to a VMID of the range whose description carries
// "managed=true", no tags yet.
func (f *fake) legacyClone(t *testing.T, req contract.CreateRequest) int {
	t.Helper()
	zone := f.cfg.Regions[testRegion].Zones[req.Placement.Zone]
	vmid := f.cfg.Regions[testRegion].VMIDs.Min + 50
	created := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	api, _, _, err := f.provider(t).regions[testRegion].client()
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = newVM(api, zone.Node, templateVMID).Clone(context.Background(), &pve.VirtualMachineCloneOptions{NewID: vmid, Name: req.Name,
		Description: "Egress proxy managed by egress-proxies-operator; do not edit the lines below.\n" +
			"egressproxies.io/managed=true\negressproxies.io/proxy-uid=" + req.UID + "\negressproxies.io/created-at=" + created.Format(time.RFC3339) + "\n"})
	if err != nil {
		t.Fatal(err)
	}
	f.s.WaitTasks()
	return vmid
}

// assertListed checks ListByTag(key, value) returns exactly want, by
// ProviderID, each with its Owner.
func assertListed(t *testing.T, p *Provider, key, value string, want ...contract.Instance) {
	t.Helper()
	got, err := p.ListByTag(context.Background(), key, value)
	if err != nil {
		t.Fatalf("ListByTag(%s, %s): %v", key, value, err)
	}
	owners := func(insts []contract.Instance) map[string]string {
		m := map[string]string{}
		for _, i := range insts {
			m[i.ProviderID] = i.Owner
		}
		return m
	}
	if g, w := owners(got), owners(want); len(got) != len(want) || fmt.Sprint(g) != fmt.Sprint(w) {
		t.Errorf("ListByTag(%s, %s) = %v (ProviderID: Owner), want %v", key, value, g, w)
	}
}
