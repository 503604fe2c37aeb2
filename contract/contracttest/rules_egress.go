package contracttest

import (
	"context"
	"errors"
	"slices"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// egressKeptPerReplica: a provider that keeps egress addresses
// (contract.EgressKeeper) gives each replica its own, reports it on every
// Running instance, keeps it through the replica's replacement (its
// instance deleted, a new one made under another name) and through a
// make-before-break (the newest instance takes it), lists it, and
// releases it only when asked, idempotently (§3.1).
func egressKeptPerReplica(e *env) {
	keeper := e.egressKeeper()
	if keeper == nil {
		e.t.Skip("skipped: the provider keeps no egress addresses (contract.EgressKeeper)")
	}
	r0 := e.request()
	r1 := e.request()
	r1.UID, r1.Replica = r0.UID, 1
	strays := e.strayEgress(r0.Placement.Region, r0.UID)
	a := e.running(r0)
	b := e.running(r1)
	for _, inst := range []contract.Instance{a, b} {
		if !contract.RoutableIPv4(inst.EgressIP) {
			e.t.Fatalf("%s is Running with egress address %q: a provider that keeps egress addresses reports a routable IPv4 one", inst.ProviderID, inst.EgressIP)
		}
	}
	if a.EgressIP == b.EgressIP {
		e.t.Errorf("replicas 0 and 1 of one Proxy share the egress address %s: each replica has its own", a.EgressIP)
	}
	// A replacement, break-before-make: the old instance gone first.
	if err := e.delete(e.ctx(), e.p, a.ProviderID); err != nil {
		e.t.Fatalf("Delete(%s): %v", a.ProviderID, err)
	}
	e.waitGone(e.p, a.ProviderID)
	if !slices.ContainsFunc(e.listEgress(keeper), func(x contract.Egress) bool { return x.UID == r0.UID && x.Replica == 0 && x.IP == a.EgressIP }) {
		e.t.Errorf("after its instance's Delete, replica 0's egress address %s is not listed: Delete never releases it, and ListEgress lists every kept address", a.EgressIP)
	}
	r0b := e.request()
	r0b.UID = r0.UID
	c := e.running(r0b)
	if c.EgressIP != a.EgressIP {
		e.t.Errorf("replica 0 made again (%s) has egress address %q, want the replica's %s", c.ProviderID, c.EgressIP, a.EgressIP)
	}
	// A replacement, make-before-break: the newest instance takes it.
	r0c := e.request()
	r0c.UID = r0.UID
	d := e.running(r0c)
	if d.EgressIP != a.EgressIP {
		e.t.Errorf("replica 0's newest instance (%s) has egress address %q, want the replica's %s", d.ProviderID, d.EgressIP, a.EgressIP)
	}
	if old, err := e.get(e.ctx(), e.p, c.ProviderID); err != nil || old.EgressIP == a.EgressIP {
		e.t.Errorf("Get(%s), replica 0's older instance, = egress address %q, %v: the address is on one instance at a time, the newest", c.ProviderID, old.EgressIP, err)
	}
	if got, err := e.get(e.ctx(), e.p, b.ProviderID); err != nil || got.EgressIP != b.EgressIP {
		e.t.Errorf("Get(%s) = egress address %q, %v; want replica 1's %s", b.ProviderID, got.EgressIP, err, b.EgressIP)
	}
	// Released when asked, once and again; a release cut off at any of its
	// calls fails, or has released (never nil with the address kept).
	rel := contract.Egress{Region: r0.Placement.Region, UID: r0.UID, Replica: 0}
	if cutter, ok := e.cfg.Backend.(CallCutter); ok {
		e.releaseCut(keeper, cutter, rel)
	}
	for range 2 {
		if _, err := e.op(e.ctx(), "ReleaseEgress", func(ctx context.Context) error { return keeper.ReleaseEgress(ctx, rel) }); err != nil {
			e.t.Errorf("ReleaseEgress(replica 0): %v (it is idempotent: nil when nothing is kept)", err)
		}
	}
	listed := e.listEgress(keeper)
	for _, x := range listed {
		if strays[x.IP] {
			e.t.Errorf("ListEgress(%s) lists %+v, an address with the Owner's mark and no replica mark: it is no replica's, and the GC would release it", e.owner, x)
		}
	}
	// What is listed for the Proxy is replica 1's address alone, once,
	// in its own region: a provider that read one region's addresses for
	// every region lists each of them again under another region, where
	// the GC's release would miss it.
	var ours []contract.Egress
	for _, x := range listed {
		if x.UID == r0.UID {
			ours = append(ours, x)
		}
	}
	want := contract.Egress{Region: r1.Placement.Region, UID: r0.UID, Replica: 1, Owner: e.owner, IP: b.EgressIP}
	switch {
	case slices.ContainsFunc(ours, func(x contract.Egress) bool { return x.Replica == 0 }):
		e.t.Errorf("replica 0's egress address is still listed after ReleaseEgress: %+v", ours)
	case len(ours) != 1 || ours[0] != want:
		e.t.Errorf("ListEgress(%s) lists %+v for the Proxy; want replica 1's address alone, once, in its region: %+v", e.owner, ours, want)
	}
}

// strayEgress makes, when the backend control can (StrayEgressMaker),
// two addresses in region with the rule's Owner's mark and no replica
// mark, one of them with the UID mark valued uid, before the rule's own:
// where a backend lists in the order addresses were made, a provider
// that stops at the first address without a replica mark lists none of
// the rule's. They are released when the rule ends. It returns their
// IPs.
func (e *env) strayEgress(region, uid string) map[string]bool {
	maker, ok := e.cfg.Backend.(StrayEgressMaker)
	if !ok {
		e.t.Log("the backend control makes no stray egress addresses (StrayEgressMaker): ListEgress is not checked beside them")
		return nil
	}
	ips := map[string]bool{}
	for _, u := range []string{"", uid} {
		ip, release, err := maker.MakeStrayEgress(e.ctx(), region, e.owner, u)
		if err != nil {
			e.t.Fatalf("backend control MakeStrayEgress(%s, %s, %q): %v", region, e.owner, u, err)
		}
		ips[ip] = true
		e.t.Cleanup(func() {
			if err := release(); err != nil {
				e.t.Errorf("backend control: release the stray egress address %s: %v", ip, err)
			}
		})
	}
	return ips
}

// releaseCut releases rel with its first call cut, then its second, and
// so on until a release returns nil, at which point the address must be
// gone: a provider that passes over a failed release of the backend
// returns nil with the address kept.
func (e *env) releaseCut(keeper contract.EgressKeeper, cutter CallCutter, rel contract.Egress) {
	resetter, _ := e.cfg.Backend.(Resetter)
	for n := 1; n <= maxReleaseCuts; n++ {
		if err := cutter.CutCall(n, false); err != nil {
			e.t.Fatalf("backend control CutCall(%d, false): %v", n, err)
		}
		_, err := e.op(e.ctx(), "ReleaseEgress", func(ctx context.Context) error { return keeper.ReleaseEgress(ctx, rel) })
		if resetter != nil {
			resetter.Reset()
		}
		if err != nil {
			continue
		}
		if slices.ContainsFunc(e.listEgress(keeper), func(x contract.Egress) bool { return x.UID == rel.UID && x.Replica == rel.Replica }) {
			e.t.Errorf("ReleaseEgress with its call %d cut before it arrived returned nil, and replica %d's egress address is still listed", n, rel.Replica)
		}
		return
	}
	e.t.Errorf("ReleaseEgress failed with each of its first %d calls cut in turn: one of them should have been past its last call", maxReleaseCuts)
}

// maxReleaseCuts bounds releaseCut: a release takes a listing and a
// release per address.
const maxReleaseCuts = 8

// egressKeeper is the provider as a contract.EgressKeeper whose config
// keeps egress addresses, or nil.
func (e *env) egressKeeper() contract.EgressKeeper {
	if k, ok := e.p.(contract.EgressKeeper); ok && k.KeepsEgress() {
		return k
	}
	return nil
}

// listEgress lists the rule's Owner's egress addresses, or fails the rule.
func (e *env) listEgress(keeper contract.EgressKeeper) []contract.Egress {
	e.t.Helper()
	var out []contract.Egress
	if _, err := e.op(e.ctx(), "ListEgress", func(ctx context.Context) (err error) {
		out, err = keeper.ListEgress(ctx, e.owner)
		return err
	}); err != nil {
		e.t.Fatalf("ListEgress(%s): %v", e.owner, err)
	}
	return out
}

// releaseEgress releases the egress addresses kept for the given UIDs
// under the given Owners, as the operator does once a Proxy's instances
// are gone, so that the inventory shows only what was left behind. A
// provider that keeps none is left alone.
func (e *env) releaseEgress(p contract.Provider, owners, uids []string) error {
	keeper, ok := p.(contract.EgressKeeper)
	if !ok || !keeper.KeepsEgress() {
		return nil
	}
	var errs []error
	for _, owner := range owners {
		kept, err := keeper.ListEgress(e.ctx(), owner)
		if err != nil {
			errs = append(errs, err)
		}
		for _, x := range kept {
			if slices.Contains(uids, x.UID) {
				errs = append(errs, keeper.ReleaseEgress(e.ctx(), x))
			}
		}
	}
	return errors.Join(errs...)
}
