package contracttest

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// checkerReasons: Check returns the same targets in the same order every
// time, with reasons from the shared set (or the provider's justified own),
// OK exactly when the reason is OK, and returns promptly with no target OK
// once ctx is done (§9).
func checkerReasons(e *env) {
	checker, ok := e.p.(contract.Checker)
	if !ok {
		e.t.Skip("skipped: the provider does not implement contract.Checker")
	}
	first := checker.Check(e.ctx())
	second := checker.Check(e.ctx())
	if len(first) == 0 {
		e.t.Fatal("Check returned no results")
	}
	allowed := append(slices.Clone(contract.SharedReasons), e.cfg.ExtraReasons...)
	seen := map[string]bool{}
	for i, r := range first {
		switch {
		case r.Target == "":
			e.t.Errorf("result %d has no target", i)
		case seen[r.Target]:
			e.t.Errorf("target %q appears twice", r.Target)
		case !slices.Contains(allowed, r.Reason):
			e.t.Errorf("target %q: reason %q is neither shared nor in Config.ExtraReasons", r.Target, r.Reason)
		case r.OK != (r.Reason == contract.ReasonOK):
			e.t.Errorf("target %q: OK %v with reason %q", r.Target, r.OK, r.Reason)
		case !r.OK && r.Message == "":
			e.t.Errorf("target %q failed without a message", r.Target)
		}
		seen[r.Target] = true
	}
	if !slices.EqualFunc(first, second, func(a, b contract.CheckResult) bool { return a.Target == b.Target }) {
		e.t.Errorf("targets changed between two calls: %v then %v", targets(first), targets(second))
	}
	if misplaced := credentialsNotFirst(targets(first)); misplaced != "" {
		e.t.Errorf("target %s comes after other targets of its scope: credentials are checked first (§9): %v", misplaced, targets(first))
	}
	if !slices.ContainsFunc(first, func(r contract.CheckResult) bool { return r.OK }) {
		e.t.Errorf("no target is OK against a working backend: %+v", first)
	}

	ctx, cancel := context.WithCancel(e.ctx())
	cancel()
	start := time.Now()
	expired := checker.Check(ctx)
	if elapsed := time.Since(start); elapsed > PromptBound {
		e.t.Errorf("Check with a done ctx took %s, want within %s", elapsed, PromptBound)
	}
	if !slices.Equal(targets(expired), targets(first)) {
		e.t.Errorf("Check with a done ctx returned targets %v, want %v", targets(expired), targets(first))
	}
	for _, r := range expired {
		if r.OK || r.Reason != contract.ReasonTimeout {
			e.t.Errorf("Check with a done ctx reported %s OK %v, reason %q; want not OK, reason %s (§9)", r.Target, r.OK, r.Reason, contract.ReasonTimeout)
		}
	}
}

// credentialsNotFirst returns the credentials target that comes after
// another target of its scope, or "": "credentials" before every target,
// "<scope>/credentials" (a provider with a credential per location)
// before every other target under "<scope>/" (§9: credentials first, then
// locations, then catalogue entries).
func credentialsNotFirst(ts []string) string {
	for i, t := range ts {
		scope, ok := strings.CutSuffix(t, "credentials")
		if !ok || scope != "" && !strings.HasSuffix(scope, "/") {
			continue
		}
		if slices.ContainsFunc(ts[:i], func(before string) bool { return strings.HasPrefix(before, scope) }) {
			return t
		}
	}
	return ""
}

func targets(rs []contract.CheckResult) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Target
	}
	return out
}
