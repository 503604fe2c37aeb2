package contracttest

import (
	"context"
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
			_, err := e.list(ctx, e.p, contract.LabelManaged, contract.ManagedValue)
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
	defer release()
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
			start := time.Now()
			err := c.call(ctx)
			elapsed := time.Since(start)
			cancel()
			switch {
			case elapsed > after+PromptBound:
				e.t.Errorf("%s with ctx %s after %s returned after %s, want within %s", c.name, how, after, elapsed.Round(time.Millisecond), PromptBound)
			case err == nil:
				e.t.Errorf("%s with ctx %s against a hanging backend returned no error", c.name, how)
			case contract.ClassOf(err) != contract.ClassTransient:
				e.t.Errorf("%s with ctx %s = %v (class %s), want a transient error", c.name, how, err, contract.ClassOf(err))
			}
		}
	}
	if checker, ok := e.p.(contract.Checker); ok {
		ctx, cancel := context.WithTimeout(e.ctx(), after)
		start := time.Now()
		results := checker.Check(ctx)
		cancel()
		if elapsed := time.Since(start); elapsed > after+PromptBound {
			e.t.Errorf("Check with ctx past its deadline returned after %s, want within %s", elapsed, PromptBound)
		}
		for _, r := range results {
			if r.OK {
				e.t.Errorf("Check against a hanging backend reported %s OK", r.Target)
			}
		}
	}
}

// callsAreBounded: with no deadline on ctx, the provider bounds every call
// itself, so a hanging backend cannot pin a worker (§1.5).
func callsAreBounded(e *env) {
	if e.cfg.CallBudget == 0 {
		e.t.Skip("skipped: Config.CallBudget is not set")
	}
	staller := need[Staller](e.t, e.cfg.Backend)
	inst := e.mustCreate(e.request())
	release := staller.Stall()
	defer release()
	for _, c := range stalledCalls(e, inst) {
		start := time.Now()
		err := c.call(e.ctx())
		elapsed := time.Since(start)
		switch {
		case elapsed > e.cfg.CallBudget+PromptBound:
			e.t.Errorf("%s against a hanging backend took %s, want at most the call budget %s", c.name, elapsed.Round(time.Millisecond), e.cfg.CallBudget)
		case err == nil:
			e.t.Errorf("%s against a hanging backend returned no error", c.name)
		case contract.ClassOf(err) != contract.ClassTransient:
			e.t.Errorf("%s against a hanging backend = %v (class %s), want transient", c.name, err, contract.ClassOf(err))
		}
	}
}
