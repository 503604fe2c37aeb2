package contracttest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// stalledCalls returns one closure per provider method, aimed at inst,
// for the rules that run every method against a hanging backend.
func stalledCalls(e *env, inst contract.Instance) []struct {
	name string
	call func(context.Context) error
} {
	calls := []struct {
		name string
		call func(context.Context) error
	}{
		{"Create", func(ctx context.Context) error { _, err := e.create(ctx, e.p, e.request()); return err }},
		{"Get", func(ctx context.Context) error { _, err := e.get(ctx, e.p, inst.ProviderID); return err }},
		{"Delete", func(ctx context.Context) error { return e.delete(ctx, e.p, inst.ProviderID) }},
		{"ListByTag", func(ctx context.Context) error {
			_, err := e.list(ctx, e.p, contract.LabelManaged, e.owner)
			return err
		}},
	}
	return calls
}

// cancelledContextReturnsPromptly: once ctx is cancelled or past its
// deadline, every method returns within PromptBound with a transient error
// that wraps the context's, even while the backend hangs (§1.5).
func cancelledContextReturnsPromptly(e *env) {
	staller := need[Staller](e.t, e.cfg.Backend)
	inst := e.mustCreate(e.request())
	release := staller.Stall()
	var pending sync.WaitGroup
	defer func() { release(); pending.Wait() }()
	const after = 50 * time.Millisecond
	for _, c := range stalledCalls(e, inst) {
		for _, how := range []string{"cancelled", "past its deadline"} {
			var ctx context.Context
			var cancel context.CancelFunc
			if how == "cancelled" {
				ctx, cancel = context.WithCancel(e.ctx())
				time.AfterFunc(after, cancel)
			} else {
				ctx, cancel = context.WithTimeout(e.ctx(), after)
			}
			returned, err := within(&pending, after+PromptBound, func() error { return c.call(ctx) })
			cancel()
			switch {
			case !returned:
				e.t.Errorf("%s with ctx %s after %s had not returned after %s", c.name, how, after, after+PromptBound)
			case err == nil:
				e.t.Errorf("%s with ctx %s against a hanging backend returned no error", c.name, how)
			case contract.ClassOf(err) != contract.ClassTransient:
				e.t.Errorf("%s with ctx %s = %v (class %s), want a transient error", c.name, how, err, contract.ClassOf(err))
			case !errors.Is(err, ctx.Err()):
				e.t.Errorf("%s with ctx %s = %v, which does not wrap ctx.Err() (%v)", c.name, how, err, ctx.Err())
			}
		}
	}
	if checker, ok := e.p.(contract.Checker); ok {
		ctx, cancel := context.WithTimeout(e.ctx(), after)
		var results []contract.CheckResult
		returned, _ := within(&pending, after+PromptBound, func() error { results = checker.Check(ctx); return nil })
		cancel()
		if !returned {
			e.t.Errorf("Check with ctx past its deadline had not returned after %s", after+PromptBound)
			return
		}
		for _, r := range results {
			if r.OK || r.Reason != contract.ReasonTimeout {
				e.t.Errorf("Check against a hanging backend past its deadline reported %s OK %v, reason %q; want not OK, reason %s", r.Target, r.OK, r.Reason, contract.ReasonTimeout)
			}
		}
	}
}

// callsAreBounded: with no deadline on ctx, the provider bounds every call
// itself, so a hanging backend cannot pin a worker (§1.5). Two shapes: the
// calls of a provider that has already reached the backend, and a provider
// made while the backend hangs, whose constructor must not dial (§7) and
// whose first call, the one that connects and logs in, is bounded like any
// other: a provider that bounds its calls but not its dial passes the first
// shape.
func callsAreBounded(e *env) {
	if e.cfg.CallBudget == 0 {
		e.t.Skip("skipped: Config.CallBudget is not set")
	}
	staller := need[Staller](e.t, e.cfg.Backend)
	inst := e.mustCreate(e.request())
	release := staller.Stall()
	var pending sync.WaitGroup
	defer func() { release(); pending.Wait() }()
	for _, c := range stalledCalls(e, inst) {
		returned, err := within(&pending, e.cfg.CallBudget+PromptBound, func() error { return c.call(e.ctx()) })
		switch {
		case !returned:
			e.t.Errorf("%s against a hanging backend had not returned after %s, the call budget is %s", c.name, e.cfg.CallBudget+PromptBound, e.cfg.CallBudget)
		case err == nil:
			e.t.Errorf("%s against a hanging backend returned no error", c.name)
		case contract.ClassOf(err) != contract.ClassTransient:
			e.t.Errorf("%s against a hanging backend = %v (class %s), want transient", c.name, err, contract.ClassOf(err))
		}
	}

	var fresh contract.Provider
	if made, _ := within(&pending, PromptBound, func() error { fresh = e.cfg.NewProvider(e.t); return nil }); !made {
		e.t.Errorf("making a provider while the backend hangs had not returned after %s: the constructor must not dial (§7)", PromptBound)
		return
	}
	returned, err := within(&pending, e.cfg.CallBudget+PromptBound, func() error {
		_, err := e.get(e.ctx(), fresh, inst.ProviderID)
		return err
	})
	switch {
	case !returned:
		e.t.Errorf("the first call (Get) of a provider made while the backend hangs had not returned after %s, the call budget is %s: its connection or login is not bounded", e.cfg.CallBudget+PromptBound, e.cfg.CallBudget)
	case err == nil:
		e.t.Errorf("the first call (Get) of a provider made while the backend hangs returned no error")
	case contract.ClassOf(err) != contract.ClassTransient:
		e.t.Errorf("the first call (Get) of a provider made while the backend hangs = %v (class %s), want transient", err, contract.ClassOf(err))
	}
}

// within runs call and waits at most d for it. A call still running then
// is left to finish once the rule releases the backend (the rule waits for
// pending before it ends), so a provider that ignores its context fails the
// rule instead of hanging the test binary.
func within(pending *sync.WaitGroup, d time.Duration, call func() error) (returned bool, err error) {
	done := make(chan error, 1)
	pending.Go(func() { done <- call() })
	select {
	case err := <-done:
		return true, err
	case <-time.After(d):
		return false, nil
	}
}
