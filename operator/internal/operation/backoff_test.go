package operation

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Each transient failure in a row doubles the lane's delay, jittered by
// at most backoffJitter of it, up to its cap; a quota error leaves it; a
// success forgets it.
func TestBackoffDoublesUpToItsCap(t *testing.T) {
	o := New()
	o.backoffBase, o.BackoffMax = 100*time.Millisecond, time.Second
	lane := laneProxy("d").UID
	transient := errors.New("connection reset")
	low := o.backoffBase
	for failures := 1; failures <= 6; failures++ {
		o.backOff(lane, transient)
		got := time.Until(o.until[lane])
		// From the least the doubling gives to the most the jitter adds
		// on each step, within the cap (less a moment for the clock).
		high := min(time.Duration(float64(o.backoffBase)*math.Pow(2+backoffJitter, float64(failures-1))*(1+backoffJitter)), o.BackoffMax)
		if got < min(low, o.BackoffMax)-50*time.Millisecond || got > high {
			t.Errorf("after %d failures the lane waits %v, want %v to %v", failures, got, min(low, o.BackoffMax), high)
		}
		low *= 2
	}
	before := o.until[lane]
	o.backOff(lane, contract.Quota(errors.New("no room")))
	if o.until[lane] != before {
		t.Error("a quota error moved the lane's back-off")
	}
	o.backOff(lane, nil)
	if _, kept := o.until[lane]; kept || o.backoff.Get(string(lane)) != 0 {
		t.Error("a success left the lane backing off")
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
	// Gaps run from one call's start to the next one's: the back-off is
	// reckoned from when the call returned, later than its start, so a
	// slow machine can only lengthen them. (From the test's own read of
	// the result, itself later than the runner's, a loaded run measured
	// 49.9 ms for a 50 ms delay.)
	var began time.Time
	run := func(err error) (gap time.Duration) {
		t.Helper()
		prevBegan := began
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
		return began.Sub(prevBegan)
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
	delay := o.backoff.Get(string(p.UID))
	o.mu.Unlock()
	if delay < 200*time.Millisecond {
		t.Errorf("a delay of %v after a quota error, want the third transient failure's, at least 200ms", delay)
	}
	run(nil)
	o.mu.Lock()
	_, kept := o.until[p.UID]
	o.mu.Unlock()
	if kept {
		t.Error("a success left the lane backing off")
	}
}

// ResetBackoffs (a credential Secret appeared or rotated) forgets the
// lanes' failures and ends the wait of an operation backing off: with an
// hour's back-off, the call runs only because of the reset.
func TestResetBackoffsEndsTheWait(t *testing.T) {
	o := New()
	o.backoffBase, o.BackoffMax = time.Hour, time.Hour
	p := laneProxy("r")
	get := Call{MethodGet, "r1/x"}
	fail := func(context.Context) (string, error) { return "", errors.New("401 from a stale token") }
	if _, done, _ := Await(context.Background(), o, p, "mem", get, fail); done {
		t.Fatal("done before the call ran")
	}
	wakeOf(t, o)
	if _, done, _ := Await(context.Background(), o, p, "mem", get, fail); !done {
		t.Fatal("no result after the wake")
	}
	ran := make(chan struct{})
	if _, done, _ := Await(context.Background(), o, p, "mem", get, func(context.Context) (string, error) {
		close(ran)
		return "ok", nil
	}); done {
		t.Fatal("done before the call ran")
	}
	o.ResetBackoffs()
	select {
	case <-ran:
	case <-time.After(20 * time.Second):
		t.Fatal("the call still waits out the hour's back-off after the reset")
	}
	wakeOf(t, o)
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.until) != 0 {
		t.Errorf("lanes still backing off after the reset and a success: %v", o.until)
	}
}
