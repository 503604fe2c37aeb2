package contracttest

import (
	"errors"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// errorsCarryTheirClass: a backend failure of each class reaches the
// caller as that class (§5): the provider's classify is wired into every
// method.
func errorsCarryTheirClass(e *env) {
	faults := need[FaultInjector](e.t, e.cfg.Backend)
	inst := e.mustCreate(e.request())
	cases := []struct {
		op    Op
		class error
		call  func() error
	}{
		{OpCreate, contract.ErrQuota, func() error { _, err := e.create(e.ctx(), e.p, e.request()); return err }},
		{OpCreate, contract.ErrPermanent, func() error { _, err := e.create(e.ctx(), e.p, e.request()); return err }},
		{OpCreate, nil, func() error { _, err := e.create(e.ctx(), e.p, e.request()); return err }},
		{OpGet, contract.ErrNotFound, func() error { _, err := e.get(e.ctx(), e.p, inst.ProviderID); return err }},
		{OpGet, nil, func() error { _, err := e.get(e.ctx(), e.p, inst.ProviderID); return err }},
		{OpList, nil, func() error {
			_, err := e.list(e.ctx(), e.p, contract.LabelManaged, contract.ManagedValue)
			return err
		}},
		{OpDelete, contract.ErrPermanent, func() error { return e.delete(e.ctx(), e.p, inst.ProviderID) }},
		{OpDelete, nil, func() error { return e.delete(e.ctx(), e.p, inst.ProviderID) }},
	}
	for _, c := range cases {
		want := contract.ClassOf(c.class)
		if c.class == nil {
			want = contract.ClassTransient
		}
		if err := faults.FailNext(c.op, c.class); err != nil {
			e.t.Fatalf("backend control FailNext(%s, %v): %v", c.op, c.class, err)
		}
		err := c.call()
		switch {
		case err == nil:
			e.t.Errorf("%s with a %s fault injected returned no error", c.op, want)
		case contract.ClassOf(err) != want:
			e.t.Errorf("%s with a %s fault = %v (class %s), want %s", c.op, want, err, contract.ClassOf(err), want)
		case c.class != nil && errors.Is(c.class, err):
			e.t.Errorf("%s with a %s fault returned the bare class, not the backend's error wrapped in it", c.op, want)
		}
	}
}
