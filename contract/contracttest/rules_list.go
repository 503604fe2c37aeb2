package contracttest

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// listByTagExcludesUnmarked: ListByTag never returns an instance that does
// not carry the mark, even one whose name looks like the operator's, by
// the rule's Owner, the legacy value or its UID (§8).
func listByTagExcludesUnmarked(e *env) {
	foreign := need[UnmarkedCreator](e.t, e.cfg.Backend)
	req := e.request()
	foreignID, err := foreign.CreateUnmarked(e.ctx(), req.Name+"-x", req.Placement)
	if err != nil {
		e.t.Fatalf("backend control CreateUnmarked: %v", err)
	}
	e.trackForeign(foreignID)
	foreigners := map[string]string{foreignID: "the unmarked instance"}
	if uidOnly, ok := e.cfg.Backend.(UIDMarkedCreator); ok {
		id, err := uidOnly.CreateUIDMarked(e.ctx(), req.Name+"-u", req.Placement, req.UID)
		if err != nil {
			e.t.Fatalf("backend control CreateUIDMarked: %v", err)
		}
		e.trackForeign(id)
		foreigners[id] = "the instance with the UID mark and no managed mark"
	}
	e.mustCreate(req)
	for _, filter := range [][2]string{
		{contract.LabelManaged, e.owner}, {contract.LabelManaged, contract.LegacyManagedValue}, {contract.LabelUID, req.UID},
	} {
		found, err := e.list(e.ctx(), e.p, filter[0], filter[1])
		if err != nil {
			e.t.Fatalf("ListByTag(%s, %s): %v", filter[0], filter[1], err)
		}
		for _, inst := range found {
			if what, ok := foreigners[inst.ProviderID]; ok {
				e.t.Errorf("ListByTag(%s, %s) returned %s %s", filter[0], filter[1], what, inst.ProviderID)
			}
		}
	}
}

// listByTagFindsMarked: ListByTag finds every marked instance by
// LabelManaged and each by its LabelUID, and nothing else for a UID. A
// Proxy of several replicas has an instance per replica under one UID, so
// one UID carries one or two more instances (drawn): the first in the same
// placement, the second in one drawn from those the harness was given. A
// provider whose list by UID stops at its first match, or at one per
// location, misses one.
func listByTagFindsMarked(e *env) {
	reqs := []contract.CreateRequest{e.request(), e.request()}
	places := e.placements()
	for replica := range 1 + e.draw.IntN(2) {
		pl := places[0]
		if replica > 0 {
			pl = places[e.draw.IntN(len(places))]
		}
		sibling := e.requestIn(pl)
		sibling.UID, sibling.Replica = reqs[0].UID, int32(replica+1)
		reqs = append(reqs, sibling)
	}
	ids := map[string]string{}
	for _, req := range reqs {
		ids[e.mustCreate(req).ProviderID] = req.UID
	}
	managed, err := e.list(e.ctx(), e.p, contract.LabelManaged, e.owner)
	if err != nil {
		e.t.Fatalf("ListByTag(%s): %v", contract.LabelManaged, err)
	}
	seen := map[string]bool{}
	for _, inst := range managed {
		seen[inst.ProviderID] = true
	}
	for id := range ids {
		if !seen[id] {
			e.t.Errorf("ListByTag(%s, %s) misses %s", contract.LabelManaged, e.owner, id)
		}
	}
	for _, uid := range []string{reqs[0].UID, reqs[1].UID} {
		var want []string
		for id, u := range ids {
			if u == uid {
				want = append(want, id)
			}
		}
		found, err := e.list(e.ctx(), e.p, contract.LabelUID, uid)
		if err != nil {
			e.t.Fatalf("ListByTag(%s, %s): %v", contract.LabelUID, uid, err)
		}
		got := make([]string, 0, len(found))
		for _, inst := range found {
			e.track(inst.ProviderID)
			got = append(got, inst.ProviderID)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			e.t.Errorf("ListByTag(%s, %s) = %v; want exactly %v, the instances made under that UID", contract.LabelUID, uid, got, want)
		}
	}
	none, err := e.list(e.ctx(), e.p, contract.LabelUID, newUID())
	if err != nil || len(none) != 0 {
		e.t.Errorf("ListByTag for a UID nobody has = %d instances, %v; want none", len(none), err)
	}
}

// listByTagCoversEveryLocation: ListByTag searches the provider's whole
// scope: an instance in each configured location is found by LabelManaged
// and by its LabelUID, from this provider and a restarted one (§4.11).
func listByTagCoversEveryLocation(e *env) {
	if len(e.cfg.OtherPlacements) == 0 {
		e.t.Skip("skipped: Config.OtherPlacements is empty; give a placement in a second location")
	}
	want := map[string]contract.CreateRequest{}
	for _, pl := range e.placements() {
		req := e.requestIn(pl)
		want[e.mustCreate(req).ProviderID] = req
	}
	holder, counts := e.cfg.Backend.(ListingHolder)
	for _, p := range []contract.Provider{e.p, e.cfg.NewProvider(e.t)} {
		var before int
		if counts {
			before = holder.Listings()
		}
		managed, err := e.list(e.ctx(), p, contract.LabelManaged, e.owner)
		if err != nil {
			e.t.Fatalf("ListByTag(%s): %v", contract.LabelManaged, err)
		}
		// SharedListsAreFresh trusts this count: one that never grows
		// would pass a provider that begins listings while one is held.
		if counts && holder.Listings() <= before {
			e.t.Errorf("the backend control's Listings() read %d before a ListByTag and %d after: it does not count the listings the provider begins", before, holder.Listings())
		}
		seen := map[string]bool{}
		for _, inst := range managed {
			seen[inst.ProviderID] = true
		}
		for id, req := range want {
			if !seen[id] {
				e.t.Errorf("ListByTag(%s, %s) misses %s in %+v", contract.LabelManaged, e.owner, id, req.Placement)
			}
			byUID, err := e.list(e.ctx(), p, contract.LabelUID, req.UID)
			if err != nil || len(byUID) != 1 || byUID[0].ProviderID != id {
				e.t.Errorf("ListByTag(%s, %s) = %+v, %v; want exactly %s in %+v", contract.LabelUID, req.UID, byUID, err, id, req.Placement)
			}
		}
	}
}

// sharedListsAreFresh: a provider that shares its listings
// (contract.SharedLister) answers every ListByTag with a listing begun
// after the call, and runs at most one listing of a location at a time
// (§1.3). With listings of the scope always in flight, an instance made
// just before a call is in the call's answer: a call that joined the
// listing under way would miss it. With a ListingHolder, a listing is
// then held after its snapshot while an instance is deleted and callers
// more calls arrive: none may begin a listing of its own while the one
// under way is held, nor be answered by it.
func sharedListsAreFresh(e *env) {
	if s, ok := e.p.(contract.SharedLister); !ok || !s.SharesLists() {
		e.t.Skip("skipped: the provider does not share its listings (contract.SharedLister)")
	}
	e.listWhileOthersList()
	holder, ok := e.cfg.Backend.(ListingHolder)
	if !ok {
		e.t.Log("the backend control does not hold listings (ListingHolder): calls arriving while a listing is under way are not checked")
		return
	}
	e.listWhileAListingIsHeld(holder)
}

// listWhileAListingIsHeld holds a listing after its snapshot, deletes an
// instance the snapshot holds, and lists with callers calls at once: a
// provider that shares listings begins none while the one under way is
// held (the calls wait for the next, which they share), and answers none
// with it (the instance would be live in the answer).
func (e *env) listWhileAListingIsHeld(holder ListingHolder) {
	gone := e.mustCreate(e.request())
	release := holder.HoldListings()
	defer release()
	first := make(chan error, 1)
	go func() {
		_, err := e.list(e.ctx(), e.p, contract.LabelManaged, e.owner)
		first <- err
	}()
	for deadline := time.Now().Add(e.cfg.WaitTimeout); holder.HeldListings() == 0; {
		if time.Now().After(deadline) {
			e.t.Fatalf("no listing reached the backend within %s of a ListByTag", e.cfg.WaitTimeout)
		}
		time.Sleep(time.Millisecond)
	}
	begun := holder.Listings()
	if err := e.delete(e.ctx(), e.p, gone.ProviderID); err != nil {
		e.t.Fatalf("Delete while a listing is held: %v", err)
	}
	e.waitGone(e.p, gone.ProviderID)
	answers := make([][]contract.Instance, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { answers[i], errs[i] = e.list(e.ctx(), e.p, contract.LabelManaged, e.owner) })
	}
	time.Sleep(gatherFor) // the calls reach the provider and wait
	if n := holder.Listings() - begun; n > 0 {
		e.t.Errorf("%d ListByTag calls arriving while a listing was under way began %d listings of their own: a provider that shares its listings runs one at a time", callers, n)
	}
	release()
	wg.Wait()
	if err := <-first; err != nil {
		e.t.Errorf("ListByTag whose listing was held: %v", err)
	}
	for i := range callers {
		if errs[i] != nil {
			e.t.Errorf("ListByTag called while a listing was under way: %v", errs[i])
			continue
		}
		for _, inst := range answers[i] {
			if inst.ProviderID == gone.ProviderID && inst.State != contract.StateTerminated {
				e.t.Errorf("ListByTag called after %s was deleted lists it %s: the call was answered by the listing under way, begun before the Delete", gone.ProviderID, inst.State)
			}
		}
	}
}

// listWhileOthersList lists, three times, right after a Create while
// callers goroutines list the same scope without pause.
func (e *env) listWhileOthersList() {
	ctx, stop := context.WithCancel(e.ctx())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for range callers {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, _ = e.p.ListByTag(ctx, contract.LabelManaged, e.owner)
			}
		})
	}
	for range 3 {
		made := e.mustCreate(e.request())
		found, err := e.list(e.ctx(), e.p, contract.LabelManaged, e.owner)
		if err != nil {
			e.t.Fatalf("ListByTag(%s, %s) while others list: %v", contract.LabelManaged, e.owner, err)
		}
		if !slices.ContainsFunc(found, func(inst contract.Instance) bool { return inst.ProviderID == made.ProviderID }) {
			e.t.Errorf("ListByTag(%s, %s), called after Create returned %s, misses it: the call was answered by a listing begun before it",
				contract.LabelManaged, e.owner, made.ProviderID)
		}
	}
}
