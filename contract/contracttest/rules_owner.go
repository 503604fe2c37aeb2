package contracttest

import (
	"slices"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// marked is one instance a rule made and the mark it must carry.
type marked struct {
	id, uid, owner string
}

// listByTagSeparatesOwners: two Owners sharing one backend (two installs,
// or two provider entries) each list only their own instances by
// LabelManaged, the legacy value lists neither, and LabelUID finds an
// instance whatever its Owner, from this provider and a restarted one
// (provider.go, §8). With a LegacyCreator, an older release's instance is
// listed by the legacy value alone, and by its UID.
func listByTagSeparatesOwners(e *env) {
	a := e.request()
	// The other owner's instance in another location where there is one:
	// a provider filtering one location right and another wrong is caught.
	places := e.placements()
	b := e.requestIn(places[len(places)-1])
	b.Owner = e.otherOwner()
	want := []marked{
		{e.mustCreate(a).ProviderID, a.UID, a.Owner},
		{e.mustCreate(b).ProviderID, b.UID, b.Owner},
	}
	if legacy, ok := e.cfg.Backend.(LegacyCreator); ok {
		c := e.request()
		want = append(want, marked{e.createLegacy(legacy, c), c.UID, contract.LegacyManagedValue})
	}
	for _, p := range []contract.Provider{e.p, e.cfg.NewProvider(e.t)} {
		for _, owner := range []string{a.Owner, b.Owner, contract.LegacyManagedValue} {
			found, err := e.list(e.ctx(), p, contract.LabelManaged, owner)
			if err != nil {
				e.t.Fatalf("ListByTag(%s, %s): %v", contract.LabelManaged, owner, err)
			}
			for _, m := range want {
				listed := slices.ContainsFunc(found, func(i contract.Instance) bool { return i.ProviderID == m.id })
				switch {
				case m.owner == owner && !listed:
					e.t.Errorf("ListByTag(%s, %s) misses %s, marked %q", contract.LabelManaged, owner, m.id, m.owner)
				case m.owner != owner && listed:
					e.t.Errorf("ListByTag(%s, %s) returned %s, marked %q: another owner's instance", contract.LabelManaged, owner, m.id, m.owner)
				}
			}
		}
		for _, m := range want {
			byUID, err := e.list(e.ctx(), p, contract.LabelUID, m.uid)
			switch {
			case err != nil || len(byUID) != 1 || byUID[0].ProviderID != m.id:
				e.t.Errorf("ListByTag(%s, %s) = %+v, %v; want exactly %s (marked %q), whatever its owner", contract.LabelUID, m.uid, byUID, err, m.id, m.owner)
			case byUID[0].Owner != m.owner:
				e.t.Errorf("ListByTag(%s, %s) returned %s with Owner %q, want %q as its mark says", contract.LabelUID, m.uid, m.id, byUID[0].Owner, m.owner)
			}
		}
	}
}

// createAdoptsAnyOwner: Create finds its earlier instance by name and UID
// whatever Owner marked it — another Owner (the install or the entry
// renamed) or, with a LegacyCreator, the legacy value of an older release
// — and returns it, from this provider and a restarted one, never a second
// instance and never a collision (provider.go). Get then reads an Owner
// from the backend: the mark it had or the new one, the same from a
// restarted provider.
func createAdoptsAnyOwner(e *env) {
	req := e.request()
	first := e.mustCreate(req)
	again := req
	again.Owner = e.otherOwner()
	e.expectAdopted(first.ProviderID, again, req.Owner)
	if legacy, ok := e.cfg.Backend.(LegacyCreator); ok {
		old := e.request()
		e.expectAdopted(e.createLegacy(legacy, old), old, contract.LegacyManagedValue)
	}
}

// expectAdopted creates req, whose name and UID the instance id already
// carries with the managed mark valued was, and checks that id is returned,
// from this provider and a restarted one, and is the only instance.
func (e *env) expectAdopted(id string, req contract.CreateRequest, was string) {
	e.t.Helper()
	for _, p := range []contract.Provider{e.p, e.cfg.NewProvider(e.t)} {
		inst, err := e.create(e.ctx(), p, req)
		switch {
		case err != nil:
			e.t.Errorf("Create of %s under Owner %q over its own instance %s (same name and UID, marked %q) = %v; want that instance adopted",
				req.Name, req.Owner, id, was, err)
			return
		case inst.ProviderID != id:
			e.t.Errorf("Create of %s under Owner %q returned %s, want its instance %s (same name and UID, marked %q)", req.Name, req.Owner, inst.ProviderID, id, was)
		}
	}
	e.expectOne(req)
	got, err := e.get(e.ctx(), e.p, id)
	if err != nil {
		e.t.Fatalf("Get(%s): %v", id, err)
	}
	restarted, err := e.get(e.ctx(), e.cfg.NewProvider(e.t), id)
	if err != nil {
		e.t.Fatalf("Get(%s) from a restarted provider: %v", id, err)
	}
	switch {
	case got.Owner != was && got.Owner != req.Owner:
		e.t.Errorf("Get(%s) after adoption: Owner %q, want the mark it had (%q) or the new one (%q)", id, got.Owner, was, req.Owner)
	case restarted.Owner != got.Owner:
		e.t.Errorf("Get(%s) says Owner %q, a restarted provider %q: Owner is read from the backend", id, got.Owner, restarted.Owner)
	}
}

// createLegacy makes req's instance under the legacy mark through the
// control, and has it cleaned up with the rule's own.
func (e *env) createLegacy(legacy LegacyCreator, req contract.CreateRequest) string {
	e.t.Helper()
	e.remember(req)
	inst, err := legacy.CreateLegacy(e.ctx(), req)
	if err != nil {
		e.t.Fatalf("backend control CreateLegacy: %v", err)
	}
	e.track(inst.ProviderID)
	return inst.ProviderID
}
