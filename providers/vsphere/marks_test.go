package vsphere

import (
	"context"
	"maps"
	"testing"

	"github.com/vmware/govmomi/vim25/mo"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// The owner marks (contract v0.3.0, spec entry 8): the value of
// egressproxies.managed is the Owner that made the VM, read back from
// vSphere; lists match it exactly; Create adopts a VM of its name and UID
// whatever its owner, legacy "true" included.

const otherOwner = "c0ffee12-other"

func createVM(t testing.TB, p *Provider, name, uid, owner string) contract.Instance {
	t.Helper()
	inst, err := p.Create(context.Background(), contract.CreateRequest{
		Name: name, UID: uid, Owner: owner, CloudInit: []byte("#cloud-config\n"), Port: 3128,
		Placement: contract.Placement{Region: "dc0", Zone: "c0", MachineType: "small", Image: "debian-12"},
	})
	if err != nil {
		t.Fatalf("Create %s (owner %s): %v", name, owner, err)
	}
	return inst
}

// remark sets the VM's managed mark as another install left it.
func remark(t *testing.T, v *vcsim, providerID, owner string) {
	t.Helper()
	if err := (control{v}).reconfigure(context.Background(), providerID, markManaged, owner); err != nil {
		t.Fatal(err)
	}
}

// createLegacy makes a VM as the previous release left it (the control's
// CreateLegacy).
func createLegacy(t *testing.T, v *vcsim, name, uid string) contract.Instance {
	t.Helper()
	inst, err := (control{v}).CreateLegacy(context.Background(), contract.CreateRequest{
		Name: name, UID: uid, Owner: testOwner, CloudInit: []byte("#cloud-config\n"), Port: 3128,
		Placement: contract.Placement{Region: "dc0", Zone: "c0", MachineType: "small", Image: "debian-12"},
	})
	if err != nil {
		t.Fatalf("CreateLegacy %s: %v", name, err)
	}
	return inst
}

func listed(t *testing.T, p *Provider, key, value string) map[string]string {
	t.Helper()
	found, err := p.ListByTag(context.Background(), key, value)
	if err != nil {
		t.Fatalf("ListByTag(%s, %s): %v", key, value, err)
	}
	out := map[string]string{}
	for _, inst := range found {
		out[inst.ProviderID] = inst.Owner
	}
	return out
}

func TestOwnerIsTheManagedMark(t *testing.T) {
	v := startVcsim(t)
	inst := createVM(t, v.provider(t), "owned", "uid-owned", testOwner)
	if inst.Owner != testOwner {
		t.Errorf("Create's Instance.Owner = %q, want %q", inst.Owner, testOwner)
	}
	vm, err := (control{v}).vm(context.Background(), inst.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	var props mo.VirtualMachine
	if err := vm.Properties(context.Background(), vm.Reference(), []string{"config.extraConfig"}, &props); err != nil {
		t.Fatal(err)
	}
	if got := extra(props)[markManaged]; got != testOwner {
		t.Errorf("extraConfig %s = %q on vSphere, want the Owner %q", markManaged, got, testOwner)
	}
	got, err := v.provider(t).Get(context.Background(), inst.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Owner != testOwner {
		t.Errorf("a restarted provider's Get: Owner = %q, want %q", got.Owner, testOwner)
	}
}

// Two Owners and a VM of the previous release in one folder: each list by
// the managed mark sees only its own; a list by UID sees the VM whatever
// its owner.
func TestListByTagSeparatesOwners(t *testing.T) {
	v := startVcsim(t)
	p := v.provider(t)
	mine := createVM(t, p, "mine", "uid-mine", testOwner)
	theirs := createVM(t, p, "theirs", "uid-theirs", otherOwner)
	legacy := createLegacy(t, v, "legacy", "uid-legacy")

	for _, tc := range []struct {
		key, value string
		want       map[string]string
	}{
		{contract.LabelManaged, testOwner, map[string]string{mine.ProviderID: testOwner}},
		{contract.LabelManaged, otherOwner, map[string]string{theirs.ProviderID: otherOwner}},
		{contract.LabelManaged, contract.LegacyManagedValue, map[string]string{legacy.ProviderID: contract.LegacyManagedValue}},
		{contract.LabelUID, "uid-theirs", map[string]string{theirs.ProviderID: otherOwner}},
		{contract.LabelUID, "uid-legacy", map[string]string{legacy.ProviderID: contract.LegacyManagedValue}},
	} {
		if got := listed(t, p, tc.key, tc.value); !maps.Equal(got, tc.want) {
			t.Errorf("ListByTag(%s, %s) = %v (providerID: owner), want %v", tc.key, tc.value, got, tc.want)
		}
	}
}

// A VM of this name and UID made by the previous release, or under another
// Owner (the entry renamed), is this Proxy's: Create resumes it, makes no
// second VM, and leaves its mark as it found it.
func TestCreateAdoptsWhateverOwner(t *testing.T) {
	v := startVcsim(t)
	p := v.provider(t)
	for _, was := range []string{contract.LegacyManagedValue, otherOwner} {
		name, uid := "adopt-"+was, "uid-adopt-"+was
		var first contract.Instance
		if was == contract.LegacyManagedValue {
			first = createLegacy(t, v, name, uid)
		} else {
			first = createVM(t, p, name, uid, testOwner)
			remark(t, v, first.ProviderID, was)
		}
		again := createVM(t, p, name, uid, testOwner)
		if again.ProviderID != first.ProviderID || again.Owner != was {
			t.Errorf("Create over a VM marked %q: %s owner %q, want %s owner %q", was, again.ProviderID, again.Owner, first.ProviderID, was)
		}
		if got := listed(t, p, contract.LabelUID, uid); len(got) != 1 {
			t.Errorf("after Create over a VM marked %q, ListByTag(%s, %s) = %v, want one VM", was, contract.LabelUID, uid, got)
		}
	}
}
