package contracttest

import (
	"slices"

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
