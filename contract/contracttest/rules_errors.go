package contracttest

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// errorsCarryTheirClass: a backend failure of each class reaches the
// caller as that class and only that class, wrapping the backend's own
// error rather than replacing it (§5): the provider's classify is wired
// into every method. A backend's "not found" on Delete is success.
func errorsCarryTheirClass(e *env) {
	faults := need[FaultInjector](e.t, e.cfg.Backend)
	inst := e.mustCreate(e.request())
	create := func() error { _, err := e.create(e.ctx(), e.p, e.request()); return err }
	get := func() error { _, err := e.get(e.ctx(), e.p, inst.ProviderID); return err }
	list := func() error {
		_, err := e.list(e.ctx(), e.p, contract.LabelManaged, e.owner)
		return err
	}
	del := func() error { return e.delete(e.ctx(), e.p, inst.ProviderID) }
	cases := []struct {
		op    Op
		class error
		call  func() error
	}{
		{OpCreate, contract.ErrQuota, create},
		{OpCreate, contract.ErrPermanent, create},
		{OpCreate, nil, create},
		{OpGet, contract.ErrNotFound, get},
		{OpGet, contract.ErrPermanent, get},
		{OpGet, nil, get},
		{OpList, contract.ErrPermanent, list},
		{OpList, nil, list},
		{OpDelete, contract.ErrPermanent, del},
		{OpDelete, nil, del},
	}
	for _, c := range cases {
		want := contract.ClassOf(c.class)
		if c.class == nil {
			want = contract.ClassTransient
		}
		if err := faults.FailNext(c.op, c.class); err != nil {
			e.t.Fatalf("backend control FailNext(%s, %v): %v", c.op, c.class, err)
		}
		if problem := classProblem(c.call(), want); problem != "" {
			e.t.Errorf("%s with a %s fault %s", c.op, want, problem)
		}
	}
	// The instance is still there: a backend's "not found" on Delete means
	// it is gone, which Delete reports as done.
	if err := faults.FailNext(OpDelete, contract.ErrNotFound); err != nil {
		e.t.Fatalf("backend control FailNext(%s, %v): %v", OpDelete, contract.ErrNotFound, err)
	}
	if err := del(); err != nil {
		e.t.Errorf("Delete answered \"not found\" by the backend = %v (class %s), want nil: the instance is already gone", err, contract.ClassOf(err))
	}
	faultsOnLaterCalls(e)
}

// classProblem says what is wrong with err, the answer to a call whose
// backend failed with an error of class want, or "" when nothing is.
func classProblem(err error, want contract.Class) string {
	switch {
	case err == nil:
		return "returned no error"
	case contract.ClassOf(err) != want:
		return fmt.Sprintf("= %v (class %s), want %s", err, contract.ClassOf(err), want)
	case len(classesOf(err)) > 1:
		return fmt.Sprintf("= %v, which is of the classes %v at once: one error, one class", err, classesOf(err))
	case !wrapsBackendError(err):
		return fmt.Sprintf("returned %q, a bare class: the backend's error must stay reachable (errors.As)", err)
	}
	return ""
}

// maxFailedCalls bounds the later calls faultsOnLaterCalls fails per
// operation and class, drawn among the operation's second call and after:
// nine failed operations at most, a few seconds on the fakes.
const maxFailedCalls = 2

// faultsOnLaterCalls: a quota or permission failure on a later backend
// call of an operation (a volume's create after the VM's, a port's delete
// after the server's) reaches the caller in its class too, as the first
// call's does (§5): a step that wraps its error with %v, or passes it over,
// loses it. Skipped without CallFailer and CallCounter, and for an
// operation of one call.
func faultsOnLaterCalls(e *env) {
	failer, ok := e.cfg.Backend.(CallFailer)
	counter, counts := e.cfg.Backend.(CallCounter)
	if !ok || !counts {
		e.t.Logf("faults on a later call of an operation are not played: the backend control lacks CallFailer or CallCounter")
		return
	}
	inst := e.mustCreate(e.request())
	// One in every location, so that a list that drops a refused
	// location answers differently.
	for _, pl := range e.placements()[1:] {
		e.mustCreate(e.requestIn(pl))
	}
	var victim, got contract.Instance
	inv, hasInventory := e.cfg.Backend.(Inventory)
	var baseline []string // the backend's resources before the victim
	newVictim := func() {
		if hasInventory {
			baseline = resources(e, inv)
		}
		victim = e.mustCreate(e.request())
	}
	get := func() (err error) { got, err = e.get(e.ctx(), e.p, inst.ProviderID); return err }
	var listed []contract.Instance
	list := func() (err error) { listed, err = e.list(e.ctx(), e.p, contract.LabelManaged, e.owner); return err }
	// warm makes the call once, so that what a first call does once (a
	// region's service discovery, a login) is not counted among its steps.
	warm := func(call func() error) func() {
		return func() {
			if err := call(); err != nil {
				e.t.Fatalf("without a fault: %v", err)
			}
		}
	}
	cases := []struct {
		op      Op
		classes []error
		setup   func() // before each call: what the call works on
		call    func() error
	}{
		{OpCreate, []error{contract.ErrQuota, contract.ErrPermanent}, func() {},
			func() error { _, err := e.create(e.ctx(), e.p, e.request()); return err }},
		{OpGet, []error{contract.ErrPermanent}, warm(get), get},
		{OpList, []error{contract.ErrPermanent}, warm(list), list},
		{OpDelete, []error{contract.ErrPermanent}, newVictim,
			func() error { return e.delete(e.ctx(), e.p, victim.ProviderID) }},
	}
	for _, c := range cases {
		c.setup()
		steps := e.callsOf(counter, func() {
			if err := c.call(); err != nil {
				e.t.Fatalf("%s without a fault: %v", c.op, err)
			}
		})
		if steps < 2 {
			e.t.Logf("%s makes one backend call: no later call to fail", c.op)
			continue
		}
		unfaulted, unfaultedList := got, listed
		for _, class := range c.classes {
			want := contract.ClassOf(class)
			for _, n := range e.drawCalls(steps, maxFailedCalls) {
				c.setup()
				if err := failer.FailCall(n, class); err != nil {
					e.t.Fatalf("backend control FailCall(%d, %v): %v", n, class, err)
				}
				before := counter.Calls()
				err := c.call()
				made := counter.Calls() - before
				switch {
				case made < n && err == nil:
					// This call needed fewer backend calls than the one
					// counted (a session or a lookup the provider kept):
					// the fault was never met, and must not meet the next.
					e.t.Logf("%s made %d calls, fewer than the %d-th the fault was set on: not played", c.op, made, n)
					if r, ok := e.cfg.Backend.(Resetter); ok {
						r.Reset()
					}
				case err == nil && (c.op == OpGet && sameAnswer(got, unfaulted) || c.op == OpList && sameAnswers(listed, unfaultedList)):
					// A read that only refines the answer (OpenStack's
					// instance actions, libvirt's lease table) may be
					// passed over, logged, when the answer is the one
					// given without the fault: nothing reads as gone or
					// done (§5).
					e.t.Logf("%s passed over a %s fault on its call %d of %d and answered as without it", c.op, want, n, steps)
				case c.op == OpDelete && err == nil:
					// A Delete may find, after a refused call, that its
					// instance is gone all the same (Proxmox's task poll
					// refused after the destroy finished): nil is right
					// when nothing is left of it (§4.9), and only then.
					e.waitGone(e.p, victim.ProviderID)
					if hasInventory {
						e.expectNoMoreThan(inv, baseline, fmt.Sprintf("a Delete that returned nil after a %s fault on its call %d of %d", want, n, steps))
					}
					e.t.Logf("Delete with a %s fault on its call %d of %d returned nil with its instance gone", want, n, steps)
				case made < n:
					e.t.Errorf("%s failed after %d calls, before the %d-th the backend control's FailCall(%d, %v) was to fail: %v", c.op, made, n, n, class, err)
				default:
					if problem := classProblem(err, want); problem != "" {
						e.t.Errorf("%s with a %s fault on its call %d of %d %s", c.op, want, n, steps, problem)
					} else {
						e.t.Logf("%s with a %s fault on its call %d of %d: %v", c.op, want, n, steps, err)
					}
				}
			}
		}
	}
}

// sameAnswer reports whether two Gets of one instance said the same.
func sameAnswer(a, b contract.Instance) bool {
	return a.State == b.State && a.IP == b.IP && a.EgressIP == b.EgressIP && a.UID == b.UID && a.Owner == b.Owner
}

// sameAnswers reports whether two lists said the same of the same
// instances.
func sameAnswers(a, b []contract.Instance) bool {
	byID := func(x, y contract.Instance) int { return strings.Compare(x.ProviderID, y.ProviderID) }
	a, b = slices.SortedFunc(slices.Values(a), byID), slices.SortedFunc(slices.Values(b), byID)
	return slices.EqualFunc(a, b, func(x, y contract.Instance) bool { return x.ProviderID == y.ProviderID && sameAnswer(x, y) })
}

// drawCalls draws up to most call numbers among 2..steps, the calls after
// an operation's first.
func (e *env) drawCalls(steps, most int) []int {
	calls := make([]int, 0, steps-1)
	for n := 2; n <= steps; n++ {
		calls = append(calls, n)
	}
	e.draw.Shuffle(len(calls), func(i, j int) { calls[i], calls[j] = calls[j], calls[i] })
	return calls[:min(len(calls), most)]
}

// classesOf lists every named class err carries.
func classesOf(err error) []contract.Class {
	var out []contract.Class
	for _, class := range []error{contract.ErrNotFound, contract.ErrQuota, contract.ErrPermanent} {
		if errors.Is(err, class) {
			out = append(out, contract.ClassOf(class))
		}
	}
	return out
}

// wrapsBackendError reports whether err's chain holds an error besides the
// contract's class sentinels and plain text wrappers of them: the error the
// backend or its SDK returned.
func wrapsBackendError(err error) bool {
	sentinels := []error{contract.ErrNotFound, contract.ErrQuota, contract.ErrPermanent}
	for stack := []error{err}; len(stack) > 0; {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch u := cur.(type) { //nolint:errorlint // this walks the chain itself
		case interface{ Unwrap() error }:
			if next := u.Unwrap(); next != nil {
				stack = append(stack, next)
				continue
			}
		case interface{ Unwrap() []error }:
			stack = append(stack, u.Unwrap()...)
			continue
		}
		// A leaf: the backend's error, unless it is a sentinel or a bare
		// text that only repeats a sentinel.
		isSentinel := false
		for _, s := range sentinels {
			if cur == s || strings.TrimSpace(cur.Error()) == s.Error() { //nolint:errorlint // identity is meant
				isSentinel = true
			}
		}
		if !isSentinel {
			return true
		}
	}
	return false
}

// rejectedCredentialIsNotGone: when the backend refuses the credential,
// nothing reads as gone or done: Get is not ErrNotFound (the operator
// would recreate), Delete does not return nil (it would release the Proxy
// and leak the instance), ListByTag fails rather than returning an empty
// scope (the garbage collector would see nothing), and Create fails with a
// class that is not ErrNotFound. The instance survives (§5, §7).
func rejectedCredentialIsNotGone(e *env) {
	rejecter := need[CredentialRejecter](e.t, e.cfg.Backend)
	inst := e.mustCreate(e.request())
	rejecter.RejectCredentials(true)
	p := e.cfg.NewProvider(e.t)
	for _, prov := range []contract.Provider{e.p, p} {
		if got, err := e.get(e.ctx(), prov, inst.ProviderID); err == nil || errors.Is(err, contract.ErrNotFound) {
			e.t.Errorf("Get with the credential refused = %v, %v (class %s); want an error that is not ErrNotFound", got.State, err, contract.ClassOf(err))
		}
		if err := e.delete(e.ctx(), prov, inst.ProviderID); err == nil || errors.Is(err, contract.ErrNotFound) {
			e.t.Errorf("Delete with the credential refused = %v (class %s); want an error that is not ErrNotFound", err, contract.ClassOf(err))
		}
		if found, err := e.list(e.ctx(), prov, contract.LabelManaged, e.owner); err == nil {
			e.t.Errorf("ListByTag with the credential refused returned %d instances and no error; want an error", len(found))
		}
		if _, err := e.create(e.ctx(), prov, e.request()); err == nil || errors.Is(err, contract.ErrNotFound) {
			e.t.Errorf("Create with the credential refused = %v (class %s); want an error that is not ErrNotFound", err, contract.ClassOf(err))
		}
	}
	rejecter.RejectCredentials(false)
	if _, err := e.get(e.ctx(), e.cfg.NewProvider(e.t), inst.ProviderID); err != nil {
		e.t.Errorf("Get once the credential is accepted again: %v; the instance must have survived", err)
	}
	rejectedMidDelete(e, rejecter)
}

// maxRefusedCalls bounds the Delete calls rejectedMidDelete refuses from,
// drawn among the Delete's second call and after: a Create and two
// Deletes each, a few seconds on the fakes.
const maxRefusedCalls = 3

// rejectedMidDelete: the credential refused from a later call of a Delete
// on (a seed's or a volume's delete after the VM's, a Neutron port's after
// the server's) is an error, never nil or ErrNotFound, and the next Delete
// with the credential back finishes the job (§5: a refused permission is
// never passed over). Skipped without CredentialRejecterFrom and
// CallCounter, or for a Delete of one call.
func rejectedMidDelete(e *env, rejecter CredentialRejecter) {
	from, ok := e.cfg.Backend.(CredentialRejecterFrom)
	counter, counts := e.cfg.Backend.(CallCounter)
	if !ok || !counts {
		e.t.Logf("the credential refused partway through a Delete is not played: the backend control lacks CredentialRejecterFrom or CallCounter")
		return
	}
	probe := e.mustCreate(e.request())
	steps := e.callsOf(counter, func() {
		if err := e.delete(e.ctx(), e.p, probe.ProviderID); err != nil {
			e.t.Fatalf("Delete: %v", err)
		}
	})
	e.waitGone(e.p, probe.ProviderID)
	for _, n := range e.drawCalls(steps, maxRefusedCalls) {
		inst := e.mustCreate(e.request())
		if err := from.RejectCredentialsFrom(n); err != nil {
			e.t.Fatalf("backend control RejectCredentialsFrom(%d): %v", n, err)
		}
		before := counter.Calls()
		err := e.delete(e.ctx(), e.p, inst.ProviderID)
		made := counter.Calls() - before
		rejecter.RejectCredentials(false)
		switch {
		case err == nil && made < n:
			// This Delete needed fewer calls than the one counted (a
			// session or a lookup the provider kept): the refusal was
			// never met.
			e.t.Logf("Delete made %d calls, fewer than the %d-th the refusal began at: not played", made, n)
		case err != nil && made < n:
			// Nothing else fails here: the control refused before the
			// call it was asked to, and the later-call shape went unplayed.
			e.t.Errorf("Delete failed after %d calls, before the %d-th the backend control's RejectCredentialsFrom(%d) was to refuse from: %v", made, n, n, err)
		case err == nil || errors.Is(err, contract.ErrNotFound):
			e.t.Errorf("Delete with the credential refused from its call %d of %d = %v (class %s); want an error that is not ErrNotFound: a refused credential is never passed over (§5)", n, steps, err, contract.ClassOf(err))
		}
		if err := e.retryTransient(func() error { return e.delete(e.ctx(), e.cfg.NewProvider(e.t), inst.ProviderID) }); err != nil {
			e.t.Errorf("Delete once the credential is accepted again, after it was refused from call %d: %v", n, err)
			continue
		}
		e.waitGone(e.p, inst.ProviderID)
	}
}
