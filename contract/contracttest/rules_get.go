package contracttest

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// malformedIDs are providerIDs no provider's format accepts: wrong shapes,
// characters no pattern allows, a valid-looking ID with something before
// or after it, and one over the length bound.
var malformedIDs = []string{
	"", "/", "//", "x/", "/x", "x//y", "no/such/shape/at/all", "../../etc/passwd",
	"white space/x", " x/y", "x/y ", "x/y\n", "X/Y?z=1", "x/y#frag", "x/y%2F",
	"x/" + strings.Repeat("a", contract.MaxProviderIDLength), "\x00/\xff",
}

// malformedID: Get and Delete reject a malformed providerID with
// ErrPermanent naming it, before any backend call (§6).
func malformedID(e *env) {
	for _, id := range malformedIDs {
		before := e.calls()
		_, getErr := e.get(e.ctx(), e.p, id)
		delErr := e.delete(e.ctx(), e.p, id)
		for call, err := range map[string]error{"Get": getErr, "Delete": delErr} {
			switch {
			case contract.ClassOf(err) != contract.ClassPermanent:
				e.t.Errorf("%s(%q) = %v (class %s), want ErrPermanent", call, id, err, contract.ClassOf(err))
			case strings.TrimSpace(id) != "" && len(id) < 64 && strconv.Quote(id) == `"`+id+`"` && !strings.Contains(err.Error(), strings.TrimSpace(id)):
				e.t.Errorf("%s(%q) = %v: the error does not name the providerID", call, id, err)
			}
		}
		if after := e.calls(); before >= 0 && after != before {
			e.t.Errorf("Get and Delete of malformed %q made %d backend calls, want 0", id, after-before)
		}
	}
}

// unknownStateIsStopped: a backend state the provider's table does not know
// maps to StateStopped, without an error (§3).
func unknownStateIsStopped(e *env) {
	injector := need[StateInjector](e.t, e.cfg.Backend)
	inst := e.running(e.request())
	if err := injector.SetUnknownState(e.ctx(), inst.ProviderID); err != nil {
		e.t.Fatalf("backend control SetUnknownState: %v", err)
	}
	got, err := e.get(e.ctx(), e.p, inst.ProviderID)
	if err != nil || got.State != contract.StateStopped {
		e.t.Errorf("Get of an instance in an unknown state = %s, %v; want Stopped, nil", got.State, err)
	}
}

// poweredOffIsStopped: an instance that ran and was powered off on the
// backend is Stopped, from Get and from ListByTag, never Terminated nor
// still Running (§3): the operator replaces a Stopped instance and deletes
// it, while a Terminated one it takes for going on its own and forgets,
// and a dead proxy would stay in the Service. Delete then removes it (a
// backend may want a powered-off instance deleted another way).
func poweredOffIsStopped(e *env) {
	powerer := need[PowerOffer](e.t, e.cfg.Backend)
	inst := e.running(e.request())
	if err := powerer.PowerOff(e.ctx(), inst.ProviderID); err != nil {
		e.t.Fatalf("backend control PowerOff: %v", err)
	}
	got, err := e.get(e.ctx(), e.p, inst.ProviderID)
	if err != nil || got.State != contract.StateStopped {
		e.t.Errorf("Get of an instance powered off = %s (%q), %v; want Stopped, nil", got.State, got.Message, err)
	}
	listed, err := e.list(e.ctx(), e.p, contract.LabelUID, inst.UID)
	if err != nil {
		e.t.Fatalf("ListByTag: %v", err)
	}
	i := slices.IndexFunc(listed, func(l contract.Instance) bool { return l.ProviderID == inst.ProviderID })
	switch {
	case i < 0:
		e.t.Errorf("ListByTag(UID) does not list the instance powered off: %v", listed)
	case listed[i].State != contract.StateStopped:
		e.t.Errorf("ListByTag(UID) lists the instance powered off as %s, want Stopped", listed[i].State)
	}
	if err := e.delete(e.ctx(), e.p, inst.ProviderID); err != nil {
		e.t.Fatalf("Delete of an instance powered off: %v", err)
	}
	e.waitGone(e.p, inst.ProviderID)
}

// runningRequiresIP: an instance is Running only with a routable IPv4
// address; before the guest reports one it is Provisioning (§3). Every Get
// in every rule also checks the first half.
func runningRequiresIP(e *env) {
	guest := need[GuestReporter](e.t, e.cfg.Backend)
	inst := e.mustCreate(e.request())
	got, err := e.get(e.ctx(), e.p, inst.ProviderID)
	if err != nil {
		e.t.Fatalf("Get: %v", err)
	}
	if e.cfg.IPAssignedAtCreate && got.State == contract.StateRunning && got.IP != "" {
		// The backend's own address; the invariant check has done its part.
		return
	}
	if got.State != contract.StateProvisioning {
		e.t.Errorf("before the guest reported an address Get = %s, want Provisioning", got.State)
	}
	if err := guest.ReportIP(e.ctx(), inst.ProviderID, e.cfg.GuestIP); err != nil {
		e.t.Fatalf("backend control ReportIP: %v", err)
	}
	running := e.waitState(inst.ProviderID, contract.StateRunning)
	// With assigned-at-create the address is the backend's own (a real
	// cloud's port); the report only played its assignment ending, and the
	// invariant check holds it to a routable IPv4.
	if running.IP != e.cfg.GuestIP && !e.cfg.IPAssignedAtCreate {
		e.t.Errorf("Running with IP %q, the guest reported %q", running.IP, e.cfg.GuestIP)
	}
}

// onlyRoutableIPv4: loopback, link-local and IPv6 addresses the guest
// reports are never Instance.IP, and do not make the instance Running.
func onlyRoutableIPv4(e *env) {
	guest := need[GuestReporter](e.t, e.cfg.Backend)
	inst := e.mustCreate(e.request())
	for _, ip := range []string{"127.0.0.1", "169.254.7.7", "0.0.0.0", "224.0.0.5", "255.255.255.255", "2001:db8::7", "fe80::7"} {
		if err := guest.ReportIP(e.ctx(), inst.ProviderID, ip); err != nil {
			e.t.Fatalf("backend control ReportIP(%s): %v", ip, err)
		}
		got, err := e.get(e.ctx(), e.p, inst.ProviderID)
		if err != nil {
			e.t.Fatalf("Get: %v", err)
		}
		if got.IP == ip || (got.State == contract.StateRunning && got.IP == "") {
			e.t.Errorf("with only %s reported, Get = %s with IP %q", ip, got.State, got.IP)
		}
	}
}

// uidAndCreatedAtReadBack: UID, Owner and CreatedAt come back from the
// backend, through Create, Get, ListByTag, and a restarted provider: Owner
// is the request's Owner, read from the managed mark; CreatedAt is the
// instance's own time, the same on every read, however much later (§4.5,
// §8).
func uidAndCreatedAtReadBack(e *env) {
	req := e.request()
	// Backends keep time at second or coarser resolution, and a remote
	// backend's clock differs from ours: allow a margin either side.
	const skew = 2 * time.Minute
	before := time.Now().Add(-skew)
	inst := e.mustCreate(req)
	after := time.Now().Add(skew)
	if inst.Owner != req.Owner {
		e.t.Errorf("Create: Owner %q, want the request's %q", inst.Owner, req.Owner)
	}
	first, err := e.get(e.ctx(), e.p, inst.ProviderID)
	if err != nil {
		e.t.Fatalf("Get: %v", err)
	}
	// Long enough that a time taken at each read differs at a backend's
	// whole-second resolution.
	time.Sleep(1100 * time.Millisecond)

	restarted, err := e.get(e.ctx(), e.cfg.NewProvider(e.t), inst.ProviderID)
	if err != nil {
		e.t.Fatalf("Get from a restarted provider: %v", err)
	}
	listed, err := e.list(e.ctx(), e.cfg.NewProvider(e.t), contract.LabelUID, req.UID)
	if err != nil || len(listed) != 1 {
		e.t.Fatalf("ListByTag(%s, %s) = %d instances, %v; want 1", contract.LabelUID, req.UID, len(listed), err)
	}
	for _, got := range []struct {
		source string
		inst   contract.Instance
	}{{"Get", first}, {"Get from a restarted provider", restarted}, {"ListByTag from a restarted provider", listed[0]}} {
		if got.inst.UID != req.UID {
			e.t.Errorf("%s: UID %q, want %q", got.source, got.inst.UID, req.UID)
		}
		if got.inst.Owner != req.Owner {
			e.t.Errorf("%s: Owner %q, want the request's %q, read from the %s mark", got.source, got.inst.Owner, req.Owner, contract.LabelManaged)
		}
		if got.inst.Name != req.Name {
			e.t.Errorf("%s: Name %q, want %q", got.source, got.inst.Name, req.Name)
		}
		if got.inst.CreatedAt.Before(before) || got.inst.CreatedAt.After(after) {
			e.t.Errorf("%s: CreatedAt %s, want between %s and %s", got.source, got.inst.CreatedAt, before, after)
		}
		if !got.inst.CreatedAt.Equal(first.CreatedAt) {
			e.t.Errorf("%s: CreatedAt %s, but the first Get said %s: it is the instance's creation time, the same on every read",
				got.source, got.inst.CreatedAt, first.CreatedAt)
		}
	}
}

// getDuringLock: while the backend holds a lock or runs a task on an
// instance that has not yet run, Get returns Provisioning (or a transient
// error), never Stopped and never a class that stops the reconcile; a
// repeat Create meanwhile makes no second instance, and once the lock is
// gone Create finishes the same instance (§4.6, §4.8). A Delete while a
// lock holds either fails transiently, or returns nil and the instance
// goes once the lock is gone with no other Delete (§4.9): a lock's
// refusal read as done would leave the instance for good.
func getDuringLock(e *env) {
	creator := need[UnstartedCreator](e.t, e.cfg.Backend)
	locker := need[Locker](e.t, e.cfg.Backend)
	req := e.request()
	id, err := creator.CreateUnstarted(e.ctx(), req)
	if err != nil {
		e.t.Fatalf("backend control CreateUnstarted: %v", err)
	}
	e.track(id)
	unlock, err := locker.Lock(e.ctx(), id)
	if err != nil {
		e.t.Fatalf("backend control Lock: %v", err)
	}
	for _, p := range []contract.Provider{e.p, e.cfg.NewProvider(e.t)} {
		got, err := e.get(e.ctx(), p, id)
		switch {
		case err != nil && contract.ClassOf(err) != contract.ClassTransient:
			e.t.Errorf("Get of a locked, never-run instance = %v (class %s), want Provisioning or a transient error", err, contract.ClassOf(err))
		case err == nil && got.State != contract.StateProvisioning:
			e.t.Errorf("Get of a locked, never-run instance = %s, want Provisioning", got.State)
		}
		if _, err := e.create(e.ctx(), p, req); err != nil && contract.ClassOf(err) != contract.ClassTransient {
			e.t.Errorf("repeat Create of a locked instance = %v (class %s), want success or transient", err, contract.ClassOf(err))
		}
	}
	e.expectOne(req)
	unlock()
	inst, err := e.create(e.ctx(), e.p, req)
	if err != nil {
		e.t.Fatalf("Create once the lock is gone: %v", err)
	}
	if inst.ProviderID != id {
		e.t.Errorf("Create once the lock is gone returned %s, want the locked instance %s", inst.ProviderID, id)
	}
	e.expectOne(req)

	unlock, err = locker.Lock(e.ctx(), id)
	if err != nil {
		e.t.Fatalf("backend control Lock, a second time: %v", err)
	}
	err = e.delete(e.ctx(), e.p, id)
	unlock()
	switch {
	case err == nil:
		e.waitGone(e.p, id)
	case contract.ClassOf(err) != contract.ClassTransient:
		e.t.Errorf("Delete of a locked instance = %v (class %s), want nil or a transient error", err, contract.ClassOf(err))
	default:
		if err := e.retryTransient(func() error { return e.delete(e.ctx(), e.p, id) }); err != nil {
			e.t.Errorf("Delete once the lock is gone: %v", err)
		}
		e.waitGone(e.p, id)
	}
}

// neverStartedIsNeverStopped: an instance that exists but has never run is
// Provisioning, never Stopped, and Create finishes it rather than making
// another (§3).
func neverStartedIsNeverStopped(e *env) {
	creator := need[UnstartedCreator](e.t, e.cfg.Backend)
	req := e.request()
	id, err := creator.CreateUnstarted(e.ctx(), req)
	if err != nil {
		e.t.Fatalf("backend control CreateUnstarted: %v", err)
	}
	e.track(id)
	got, err := e.get(e.ctx(), e.p, id)
	if err != nil || got.State != contract.StateProvisioning {
		e.t.Errorf("Get of a never-started instance = %s, %v; want Provisioning, nil", got.State, err)
	}
	inst, err := e.create(e.ctx(), e.p, req)
	if err != nil {
		e.t.Fatalf("Create over its own never-started instance: %v", err)
	}
	if inst.ProviderID != id {
		e.t.Errorf("Create returned %s, want the never-started %s", inst.ProviderID, id)
	}
	e.expectOne(req)
}
