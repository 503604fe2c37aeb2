package vsphere

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vmware/govmomi/find"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// A location the config names (datacenter, folder, template, resource
// pool, datastore) that vSphere does not show the user is not the instance
// being gone: read as NotFound, Get would have the operator recreate the
// VM and Delete would return nil without deleting it, so a replacement
// leaks the old VM. vCenter hides what the user may not read, so "missing"
// and "unreadable" look the same to the finder; both are Permanent, naming
// the config field and the path (spec entry 13).

// withConfig is a provider on v's config changed by edit.
func withConfig(t *testing.T, v *vcsim, edit func(*Config)) *Provider {
	t.Helper()
	cfg := v.cfg
	cfg.Regions = map[string]Region{}
	for name, r := range v.cfg.Regions {
		zones := map[string]Zone{}
		for zn, z := range r.Zones {
			zones[zn] = z
		}
		r.Zones = zones
		cfg.Regions[name] = r
	}
	cfg.Images = map[string]string{}
	for k, img := range v.cfg.Images {
		cfg.Images[k] = img
	}
	edit(&cfg)
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// wantLocationError checks err is Permanent, never NotFound, and names
// the field and the path.
func wantLocationError(t *testing.T, what string, err error, field, path string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s = nil, want a Permanent error naming %s %q", what, field, path)
	case errors.Is(err, contract.ErrNotFound):
		t.Errorf("%s = %v (class %s): a missing location read as the instance gone", what, err, contract.ClassOf(err))
	case !errors.Is(err, contract.ErrPermanent):
		t.Errorf("%s = %v (class %s), want Permanent", what, err, contract.ClassOf(err))
	case !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), path):
		t.Errorf("%s = %v: want the field %s and the path %q named", what, err, field, path)
	}
}

func TestMissingLocationIsNotInstanceGone(t *testing.T) {
	v := startVcsim(t)
	ctx := context.Background()
	inst := createVM(t, v.provider(t), "kept", "uid-kept", testOwner)
	req := contract.CreateRequest{
		Name: "new", UID: "uid-new", Owner: testOwner, CloudInit: []byte("#cloud-config\n"), Port: 3128,
		Placement: contract.Placement{Region: "dc0", Zone: "c0", MachineType: "small", Image: "debian-12"},
	}

	const folder = "/DC0/vm/egress-proxies-moved"
	p := withConfig(t, v, func(c *Config) { r := c.Regions["dc0"]; r.Folder = folder; c.Regions["dc0"] = r })
	_, err := p.Get(ctx, inst.ProviderID)
	wantLocationError(t, "Get with the folder missing", err, `regions["dc0"].folder`, folder)
	wantLocationError(t, "Delete with the folder missing", p.Delete(ctx, inst.ProviderID), `regions["dc0"].folder`, folder)
	_, err = p.ListByTag(ctx, contract.LabelManaged, testOwner)
	wantLocationError(t, "ListByTag with the folder missing", err, `regions["dc0"].folder`, folder)
	_, err = p.Create(ctx, req)
	wantLocationError(t, "Create with the folder missing", err, `regions["dc0"].folder`, folder)

	p = withConfig(t, v, func(c *Config) { r := c.Regions["dc0"]; r.Datacenter = "DC9"; c.Regions["dc0"] = r })
	_, err = p.Get(ctx, inst.ProviderID)
	wantLocationError(t, "Get with the datacenter missing", err, `regions["dc0"].datacenter`, "DC9")

	p = withConfig(t, v, func(c *Config) { c.Images["debian-12"] = "no-such-template" })
	_, err = p.Create(ctx, req)
	wantLocationError(t, "Create with the template missing", err, `images["debian-12"]`, "no-such-template")

	const pool = "/DC0/host/DC0_C0/Resources/gone"
	p = withConfig(t, v, func(c *Config) {
		r := c.Regions["dc0"]
		z := r.Zones["c0"]
		z.ResourcePool = pool
		r.Zones["c0"] = z
	})
	_, err = p.Create(ctx, req)
	wantLocationError(t, "Create with the resource pool missing", err, `regions["dc0"].zones["c0"].resourcePool`, pool)

	p = withConfig(t, v, func(c *Config) {
		r := c.Regions["dc0"]
		z := r.Zones["c0"]
		z.Datastore = "NoSuchDS"
		r.Zones["c0"] = z
	})
	_, err = p.Create(ctx, req)
	wantLocationError(t, "Create with the datastore missing", err, `regions["dc0"].zones["c0"].datastore`, "NoSuchDS")

	// The VM was never touched by any of them.
	if got, err := v.provider(t).Get(ctx, inst.ProviderID); err != nil || got.State == contract.StateTerminated {
		t.Errorf("Get from the right config = %+v, %v: want the VM unchanged", got, err)
	}
}

// A folder the session has cached and an administrator then removed: the
// cached reference meets ManagedObjectNotFound naming the folder, not the
// VM. That is the location gone, Permanent, not the instance gone.
func TestRemovedCachedFolderIsNotInstanceGone(t *testing.T) {
	v := startVcsim(t)
	ctx := context.Background()
	f := find.NewFinder(v.client, true)
	vmFolder, err := f.Folder(ctx, "/DC0/vm")
	if err != nil {
		t.Fatal(err)
	}
	other, err := vmFolder.CreateFolder(ctx, "egress-other")
	if err != nil {
		t.Fatal(err)
	}
	const folder = "/DC0/vm/egress-other"
	p := withConfig(t, v, func(c *Config) { r := c.Regions["dc0"]; r.Folder = folder; c.Regions["dc0"] = r })
	// The first Get caches the folder; there is no VM of the name yet.
	if _, err := p.Get(ctx, "dc0/later"); !errors.Is(err, contract.ErrNotFound) {
		t.Fatalf("Get of a VM never made = %v, want NotFound", err)
	}
	task, err := other.Destroy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = p.Get(ctx, "dc0/later")
	wantLocationError(t, "Get once the cached folder was removed", err, `regions["dc0"].folder`, folder)
	wantLocationError(t, "Delete once the cached folder was removed", p.Delete(ctx, "dc0/later"), `regions["dc0"].folder`, folder)
}
