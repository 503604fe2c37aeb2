package contracttest

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// getAfterDelete: after Delete, Get reports Terminated until it reports
// ErrNotFound, from the same and from a restarted provider (§4.9).
func getAfterDelete(e *env) {
	inst := e.mustCreate(e.request())
	if err := e.delete(e.ctx(), e.p, inst.ProviderID); err != nil {
		e.t.Fatalf("Delete: %v", err)
	}
	e.waitGone(e.p, inst.ProviderID)
	e.waitGone(e.cfg.NewProvider(e.t), inst.ProviderID)
}

// deleteTwice: Delete is idempotent: a second Delete, while the first is
// under way and after it finished, returns nil (§4.9).
func deleteTwice(e *env) {
	inst := e.mustCreate(e.request())
	for i := range 2 {
		if err := e.delete(e.ctx(), e.p, inst.ProviderID); err != nil {
			e.t.Fatalf("Delete #%d: %v", i+1, err)
		}
	}
	e.waitGone(e.p, inst.ProviderID)
	if err := e.delete(e.ctx(), e.cfg.NewProvider(e.t), inst.ProviderID); err != nil {
		e.t.Errorf("Delete of an instance already gone = %v (class %s), want nil", err, contract.ClassOf(err))
	}
}

// getDuringDelete: while the backend is deleting, Get reports Terminated or
// ErrNotFound and Delete succeeds at once ("already deleting" is success).
func getDuringDelete(e *env) {
	starter := need[DeleteStarter](e.t, e.cfg.Backend)
	inst := e.mustCreate(e.request())
	finish, err := starter.BeginDelete(e.ctx(), inst.ProviderID)
	if err != nil {
		e.t.Fatalf("backend control BeginDelete: %v", err)
	}
	got, err := e.get(e.ctx(), e.p, inst.ProviderID)
	switch {
	case err != nil && !isNotFound(err):
		e.t.Errorf("Get during a delete = %v (class %s), want Terminated or ErrNotFound", err, contract.ClassOf(err))
	case err == nil && got.State != contract.StateTerminated:
		e.t.Errorf("Get during a delete = %s, want Terminated or ErrNotFound", got.State)
	}
	if err := e.delete(e.ctx(), e.p, inst.ProviderID); err != nil {
		e.t.Errorf("Delete during a delete = %v, want nil", err)
	}
	finish()
	e.waitGone(e.p, inst.ProviderID)
}

// deleteResumesAfterFailure: a Delete cut off at any of its backend calls
// (the request lost, or the answer lost after the backend acted) is
// finished by the next Delete, from a restarted provider, which returns nil;
// the instance and everything made for it are then gone (§4.9, §4.10,
// template entry 11).
func deleteResumesAfterFailure(e *env) {
	cutter := need[CallCutter](e.t, e.cfg.Backend)
	counter := need[CallCounter](e.t, e.cfg.Backend)
	resetter := need[Resetter](e.t, e.cfg.Backend)
	inv, hasInventory := e.cfg.Backend.(Inventory)
	first := e.mustCreate(e.request())
	steps := e.callsOf(counter, func() {
		if err := e.delete(e.ctx(), e.p, first.ProviderID); err != nil {
			e.t.Fatalf("Delete: %v", err)
		}
	})
	e.waitGone(e.p, first.ProviderID)
	failed := map[bool]int{} // cuts that made the Delete fail, by after
	for n := 1; n <= steps; n++ {
		for _, after := range []bool{false, true} {
			cut := fmt.Sprintf("call %d of %d cut %s", n, steps, cutWhen(after))
			var before []string
			if hasInventory {
				before = resources(e, inv)
			}
			inst := e.mustCreate(e.request())
			if err := cutter.CutCall(n, after); err != nil {
				e.t.Fatalf("backend control CutCall(%d, %v): %v", n, after, err)
			}
			err := e.delete(e.ctx(), e.p, inst.ProviderID)
			resetter.Reset()
			switch {
			case err != nil && contract.ClassOf(err) != contract.ClassTransient:
				e.t.Errorf("Delete with %s failed with class %s, want Transient (a lost connection is retried): %v", cut, contract.ClassOf(err), err)
				continue
			case err == nil:
				// It says it is done, and the operator releases the Proxy on
				// that: everything must go without another Delete.
				e.waitGone(e.p, inst.ProviderID)
				if hasInventory {
					e.releaseKept(inst)
					e.expectNoMoreThan(inv, before, "a Delete that returned nil with "+cut)
				}
				continue
			}
			failed[after]++
			// The operator comes back later: whatever the cut-off Delete set
			// going on the backend has finished by then.
			e.waitSettled(inst.ProviderID)
			restarted := e.cfg.NewProvider(e.t)
			if err := e.retryTransient(func() error { return e.delete(e.ctx(), restarted, inst.ProviderID) }); err != nil {
				e.t.Errorf("Delete resumed after %s: %v", cut, err)
				continue
			}
			e.waitGone(restarted, inst.ProviderID)
			if hasInventory {
				e.releaseKept(inst)
				e.expectNoMoreThan(inv, before, "Delete resumed after "+cut)
			}
		}
	}
	e.cutsTookEffect("Delete", failed)
}

// releaseKept releases what the provider keeps for inst's replica
// (an egress address), which Delete leaves by design.
func (e *env) releaseKept(inst contract.Instance) {
	e.t.Helper()
	if err := e.releaseEgress(e.p, []string{e.owner}, []string{inst.UID}); err != nil {
		e.t.Errorf("releasing the egress address kept for %s: %v", inst.UID, err)
	}
}

// waitSettled polls Get until the instance is gone or in a state other
// than Terminated: a deletion the backend was running has finished.
func (e *env) waitSettled(id string) {
	e.t.Helper()
	deadline := time.Now().Add(e.cfg.WaitTimeout)
	for time.Now().Before(deadline) {
		inst, err := e.get(e.ctx(), e.p, id)
		if errors.Is(err, contract.ErrNotFound) || (err == nil && inst.State != contract.StateTerminated) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// deleteLeavesNothing: after a full lifecycle every resource the provider
// made for the instance (volumes, seeds, tags) is gone (§4.10).
func deleteLeavesNothing(e *env) {
	inv := need[Inventory](e.t, e.cfg.Backend)
	before := resources(e, inv)
	inst := e.running(e.request())
	if during := resources(e, inv); len(during) <= len(before) {
		e.t.Errorf("the inventory did not grow with a running instance: %v", during)
	}
	if err := e.delete(e.ctx(), e.p, inst.ProviderID); err != nil {
		e.t.Fatalf("Delete: %v", err)
	}
	e.waitGone(e.p, inst.ProviderID)
	e.releaseKept(inst)
	after := resources(e, inv)
	for _, r := range after {
		if !slices.Contains(before, r) {
			e.t.Errorf("left behind after Delete: %s", r)
		}
	}
}

func resources(e *env, inv Inventory) []string {
	e.t.Helper()
	r, err := inv.Resources(e.ctx())
	if err != nil {
		e.t.Fatalf("backend control Resources: %v", err)
	}
	return r
}

func isNotFound(err error) bool { return contract.ClassOf(err) == contract.ClassNotFound }
