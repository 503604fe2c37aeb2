package operation

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

func TestBackoffDelayDoublesUpToItsCap(t *testing.T) {
	base, maxDelay := 100*time.Millisecond, time.Second
	for failures, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 60: time.Second} {
		if got := backoffDelay(base, maxDelay, failures); got != want {
			t.Errorf("backoffDelay after %d failures = %v, want %v", failures, got, want)
		}
	}
}

// A lane whose operations fail transiently starts each next call only
// after a delay that doubles (the fleet benchmark, docs/performance.md: the reconcile that starts the
// next operation succeeds, which reset the controller's own back-off, and
// failing Proxies were retried as fast as their calls failed); a quota
// error leaves the count alone, a success forgets it. The bounds checked
// are lower bounds: a slow machine can only make the gaps longer.
func TestTransientFailuresBackOff(t *testing.T) {
	o := New()
	o.backoffBase, o.BackoffMax = 50*time.Millisecond, time.Second
	p := laneProxy("b")
	get := Call{MethodGet, "r1/x"}
	var began, ended time.Time
	run := func(err error) (gap time.Duration) {
		t.Helper()
		prevEnd := ended
		fn := func(context.Context) (string, error) {
			began = time.Now()
			return "", err
		}
		if _, done, _ := Await(context.Background(), o, p, "mem", get, fn); done {
			t.Fatal("done before the call ran")
		}
		wakeOf(t, o)
		if _, done, _ := Await(context.Background(), o, p, "mem", get, fn); !done {
			t.Fatal("no result after the wake")
		}
		ended = time.Now()
		return began.Sub(prevEnd)
	}
	run(errors.New("connection reset"))
	if gap := run(errors.New("connection reset")); gap < 50*time.Millisecond {
		t.Errorf("second call %v after the first failed, want at least the base delay 50ms", gap)
	}
	if gap := run(errors.New("connection reset")); gap < 100*time.Millisecond {
		t.Errorf("third call %v after the second failed, want at least 100ms", gap)
	}
	run(contract.Quota(errors.New("no room")))
	o.mu.Lock()
	failures := o.backoffs[p.UID].failures
	o.mu.Unlock()
	if failures != 3 {
		t.Errorf("%d failures in a row after a quota error, want the 3 transient ones", failures)
	}
	run(nil)
	o.mu.Lock()
	_, kept := o.backoffs[p.UID]
	o.mu.Unlock()
	if kept {
		t.Error("a success left the lane backing off")
	}
}
