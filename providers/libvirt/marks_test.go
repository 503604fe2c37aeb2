package libvirt

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// The owner marks (contract v0.3.0, spec entry 8): <managed> in the
// domain's metadata holds the Owner that made it, read back from libvirt;
// lists match it exactly; Create adopts a domain of its name and UID
// whatever its owner, legacy "true" included. test:///default is shared by
// every test of the package, so each test here has Owners of its own.

func createDomain(t *testing.T, p *Provider, name, uid, owner string) contract.Instance {
	t.Helper()
	inst, err := p.Create(context.Background(), contract.CreateRequest{
		Name: name, UID: uid, Owner: owner, CloudInit: []byte("#cloud-config\n"), Port: 3128,
		Placement: contract.Placement{Region: testRegion, MachineType: "small", Image: "debian-12"},
	})
	if err != nil {
		t.Fatalf("Create %s (owner %s): %v", name, owner, err)
	}
	t.Cleanup(func() { _ = p.Delete(context.Background(), inst.ProviderID) })
	return inst
}

// createLegacy makes a domain as the previous release left it (the
// control's CreateLegacy).
func createLegacy(t *testing.T, b *testBackend, name, uid string) contract.Instance {
	t.Helper()
	inst, err := (control{b}).CreateLegacy(context.Background(), contract.CreateRequest{
		Name: name, UID: uid, Owner: testOwner, CloudInit: []byte("#cloud-config\n"), Port: 3128,
		Placement: contract.Placement{Region: testRegion, MachineType: "small", Image: "debian-12"},
	})
	if err != nil {
		t.Fatalf("CreateLegacy %s: %v", name, err)
	}
	t.Cleanup(func() { _ = b.provider(t).Delete(context.Background(), inst.ProviderID) })
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
	b := newTestBackend(t)
	const owner = "c0ffee12-readback"
	inst := createDomain(t, b.provider(t), "egress-owned", "0e9d6c1a-7f3b-4d2e-9a5c-0000000000e1", owner)
	if inst.Owner != owner {
		t.Errorf("Create's Instance.Owner = %q, want %q", inst.Owner, owner)
	}
	if m, err := b.storedMarks(inst.ProviderID); err != nil || m.Managed != owner {
		t.Errorf("<managed> = %q in the domain's metadata (%v), want the Owner %q", m.Managed, err, owner)
	}
	got, err := b.provider(t).Get(context.Background(), inst.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Owner != owner {
		t.Errorf("a restarted provider's Get: Owner = %q, want %q", got.Owner, owner)
	}
}

// Two Owners and a domain of the previous release on one host: each list
// by the managed mark sees only its own; a list by UID sees the domain
// whatever its owner.
func TestListByTagSeparatesOwners(t *testing.T) {
	b := newTestBackend(t)
	p := b.provider(t)
	const mineOwner, theirOwner = "c0ffee12-mine", "c0ffee12-theirs"
	mine := createDomain(t, p, "egress-mine", "0e9d6c1a-7f3b-4d2e-9a5c-0000000000e2", mineOwner)
	theirs := createDomain(t, p, "egress-theirs", "0e9d6c1a-7f3b-4d2e-9a5c-0000000000e3", theirOwner)
	legacy := createLegacy(t, b, "egress-legacy", "0e9d6c1a-7f3b-4d2e-9a5c-0000000000e4")

	for _, tc := range []struct {
		key, value string
		want       map[string]string
	}{
		{contract.LabelManaged, mineOwner, map[string]string{mine.ProviderID: mineOwner}},
		{contract.LabelManaged, theirOwner, map[string]string{theirs.ProviderID: theirOwner}},
		{contract.LabelManaged, contract.LegacyManagedValue, map[string]string{legacy.ProviderID: contract.LegacyManagedValue}},
		{contract.LabelUID, theirs.UID, map[string]string{theirs.ProviderID: theirOwner}},
		{contract.LabelUID, legacy.UID, map[string]string{legacy.ProviderID: contract.LegacyManagedValue}},
	} {
		if got := listed(t, p, tc.key, tc.value); !maps.Equal(got, tc.want) {
			t.Errorf("ListByTag(%s, %s) = %v (providerID: owner), want %v", tc.key, tc.value, got, tc.want)
		}
	}
}

// A domain of this name and UID made by the previous release, or under
// another Owner (the entry renamed), is this Proxy's: Create resumes it,
// makes no second one, and leaves its mark as it found it.
func TestCreateAdoptsWhateverOwner(t *testing.T) {
	b := newTestBackend(t)
	p := b.provider(t)
	const owner = "c0ffee12-adopter"
	for i, was := range []string{contract.LegacyManagedValue, "c0ffee12-renamed"} {
		name, uid := "egress-adopt-"+was, fmt.Sprintf("0e9d6c1a-7f3b-4d2e-9a5c-0000000000f%d", i)
		var first contract.Instance
		if was == contract.LegacyManagedValue {
			first = createLegacy(t, b, name, uid)
		} else {
			first = createDomain(t, p, name, uid, owner)
			if err := b.remark(first.ProviderID, was); err != nil {
				t.Fatal(err)
			}
		}
		again, err := p.Create(context.Background(), contract.CreateRequest{
			Name: name, UID: uid, Owner: owner, CloudInit: []byte("#cloud-config\n"), Port: 3128,
			Placement: contract.Placement{Region: testRegion, MachineType: "small", Image: "debian-12"},
		})
		if err != nil {
			t.Errorf("Create over a domain marked %q: %v", was, err)
			continue
		}
		if again.ProviderID != first.ProviderID || again.Owner != was {
			t.Errorf("Create over a domain marked %q: %s owner %q, want %s owner %q", was, again.ProviderID, again.Owner, first.ProviderID, was)
		}
		if got := listed(t, p, contract.LabelUID, uid); len(got) != 1 {
			t.Errorf("after Create over a domain marked %q, ListByTag(%s, %s) = %v, want one domain", was, contract.LabelUID, uid, got)
		}
	}
}

// A domain without the operator's marks that holds an instance's name (a
// person's, made with virsh after the instance was deleted, or never the
// operator's) is not the instance: Get reports it gone and Delete leaves
// it running, with the volumes of the instance's names beside it (a
// person's disks). The harness's unmarked rules check Create and the list;
// these are the two calls that take a providerID.
func TestGetAndDeleteLeaveUnmarkedDomains(t *testing.T) {
	b := newTestBackend(t)
	p := b.provider(t)
	ctl := control{b}
	const name = "egress-not-ours"
	id, err := ctl.CreateUnmarked(context.Background(), name, contract.Placement{Region: testRegion, MachineType: "small", Image: "debian-12"})
	t.Cleanup(func() { _ = ctl.DeleteUnmarked(context.Background(), id) })
	if err != nil {
		t.Fatal(err)
	}
	vols := b.foreignVolumes(t, testRegion, overlayName(name), seedName(name))

	if inst, err := p.Get(context.Background(), id); !errors.Is(err, contract.ErrNotFound) {
		t.Errorf("Get of an unmarked domain = %+v, %v; want ErrNotFound", inst, err)
	}
	if err := p.Delete(context.Background(), id); err != nil {
		t.Errorf("Delete of an unmarked domain = %v, want nil (no instance of this name)", err)
	}
	err = b.withDomain(id, func(dom *libvirt.Domain) error {
		if active, err := dom.IsActive(); err != nil || !active {
			return fmt.Errorf("active %v (%w)", active, err)
		}
		return nil
	})
	if err != nil {
		t.Errorf("after Delete, the unmarked domain is no longer running: %v", err)
	}
	b.checkVolumes(t, vols)
}

// A domain that lost its marks (a person took the instance over: virsh
// metadata --remove, or undefined it and defined their own of the name
// on its disks) runs on the operator's volumes: they pass as the
// operator's (an overlay on its base image, the seed beside it), yet the
// domain uses them. Delete leaves the domain and every volume it uses.
func TestDeleteLeavesTheVolumesAnUnmarkedDomainUses(t *testing.T) {
	b := newTestBackend(t)
	p := b.provider(t)
	const name = "egress-taken-over"
	inst := createDomain(t, p, name, "0e9d6c1a-7f3b-4d2e-9a5c-0000000000f1", testOwner)
	err := b.withDomain(inst.ProviderID, func(dom *libvirt.Domain) error {
		return dom.SetMetadata(libvirt.DOMAIN_METADATA_ELEMENT, "", xmlPrefix, xmlNamespace, libvirt.DOMAIN_AFFECT_LIVE|libvirt.DOMAIN_AFFECT_CONFIG)
	})
	if err != nil {
		t.Fatal(err)
	}
	deleteLeavesVolumes(t, b, p, inst, name)
	err = b.withDomain(inst.ProviderID, func(dom *libvirt.Domain) error {
		if active, err := dom.IsActive(); err != nil || !active {
			return fmt.Errorf("active %v (%w)", active, err)
		}
		return nil
	})
	if err != nil {
		t.Errorf("after Delete, the unmarked domain is no longer running: %v", err)
	}
}

// The same with the disks named by file path, as virt-install and virsh
// users name them: Delete leaves the volumes at those paths.
func TestDeleteLeavesTheVolumesAnUnmarkedDomainUsesByPath(t *testing.T) {
	b := newTestBackend(t)
	p := b.provider(t)
	const name = "egress-taken-by-path"
	inst := createDomain(t, p, name, "0e9d6c1a-7f3b-4d2e-9a5c-0000000000f5", testOwner)
	conn := b.conns[testRegion]
	err := b.withDomain(inst.ProviderID, func(dom *libvirt.Domain) error {
		if err := dom.Destroy(); err != nil {
			return err
		}
		def, err := persistentDefinition(dom)
		if err != nil {
			return err
		}
		def.Metadata = nil
		for i, disk := range def.Devices.Disks {
			if disk.Source == nil || disk.Source.Volume == nil {
				continue
			}
			err := withPool(conn, disk.Source.Volume.Pool, func(pool *libvirt.StoragePool) error {
				vol, err := pool.LookupStorageVolByName(disk.Source.Volume.Volume)
				if err != nil {
					return err
				}
				defer func() { _ = vol.Free() }()
				path, err := vol.GetPath()
				def.Devices.Disks[i].Source = &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: path}}
				return err
			})
			if err != nil {
				return err
			}
		}
		doc, err := def.Marshal()
		if err != nil {
			return err
		}
		redefined, err := conn.DomainDefineXML(doc)
		if err != nil {
			return err
		}
		return redefined.Free()
	})
	if err != nil {
		t.Fatal(err)
	}
	deleteLeavesVolumes(t, b, p, inst, name)
}

// deleteLeavesVolumes takes inst, whose marks the test removed, for a
// person's domain, then checks that Delete returns nil and leaves the
// volumes of the instance's names as they were.
func deleteLeavesVolumes(t *testing.T, b *testBackend, p *Provider, inst contract.Instance, name string) {
	t.Helper()
	b.mu.Lock()
	b.foreign[inst.ProviderID] = true
	b.mu.Unlock()
	t.Cleanup(func() { _ = (control{b}).DeleteUnmarked(context.Background(), inst.ProviderID) })
	vols, err := p.instanceVolumes(context.Background(), testRegion, testPool, name)
	if err != nil {
		t.Fatal(err)
	}
	if !vols[overlayName(name)] || !vols[seedName(name)] {
		t.Fatalf("the instance's volumes = %v, want both taken for the operator's (else this test shows nothing)", vols)
	}
	if err := p.Delete(context.Background(), inst.ProviderID); err != nil {
		t.Errorf("Delete of a domain that lost its marks = %v, want nil", err)
	}
	after, err := p.instanceVolumes(context.Background(), testRegion, testPool, name)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(after, vols) {
		t.Errorf("after Delete, the volumes the unmarked domain uses = %v, want %v left as they were", after, vols)
	}
}
