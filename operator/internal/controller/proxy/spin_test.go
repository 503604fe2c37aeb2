package proxy

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestWaitingOnAnOperationDoesNotSpin: while a Proxy's Create runs, its
// end reconciles the Proxy (the operations' wake); reconciling it every
// poll meanwhile is work for nothing. A thousand Proxies whose Creates
// queued for the provider's concurrency were reconciled 25,000 times a
// second at a 20 ms poll (hack/bench-fleet.sh), taking the CPU
// the provider's backend needed. The backstop is the resync period.
func TestWaitingOnAnOperationDoesNotSpin(t *testing.T) {
	const name = "spin"
	held, release := holdCreates(t, name)
	p := newProxy(t, name, nil)
	heldCreate(t, held, "the Create was never held")
	count := func() int64 {
		n, _ := reconciles.LoadOrStore(name, new(atomic.Int64))
		return n.(*atomic.Int64).Load()
	}
	const window = 3 * time.Second
	before := count()
	time.Sleep(window)
	n := count() - before
	release(nil)
	bootGuest(t, p, current)
	// The poll would reconcile it window/suitePoll times (30); the backstop
	// window/suiteResync (10). Half-way between fails the poll.
	if most := int64(window/suiteResync) + int64(window/suitePoll-window/suiteResync)/2; n > most {
		t.Errorf("%d reconciles in %s while the Create ran, want at most %d: the operation's end wakes the Proxy", n, window, most)
	}
	t.Logf("%d reconciles in %s while the Create ran", n, window)
	waitReady(t, p)
}

// TestReadyReplicasAreQuiet: a Proxy of two replicas that both answer,
// with nothing in progress, is checked at its resync, as a Proxy of one
// is. Reconciling it every poll would call the backend's Get for every
// replica that often, for nothing.
func TestReadyReplicasAreQuiet(t *testing.T) {
	const name = "quiet-replicas"
	twoServing(t, name, "198.51.100.250-198.51.100.251")
	// The last replica's first answer, its events and status writes: let
	// them settle.
	time.Sleep(3 * suitePoll)
	count := func() int64 {
		n, _ := reconciles.LoadOrStore(name, new(atomic.Int64))
		return n.(*atomic.Int64).Load()
	}
	const window = 3 * time.Second
	before := count()
	time.Sleep(window)
	n := count() - before
	// Each check is two reconciles: one starts the Get as an operation,
	// its end wakes the next. At the resync that is 2*window/suiteResync
	// (20), at the poll 2*window/suitePoll (60); half-way between fails
	// the poll.
	if most := int64(2*window/suiteResync) + int64(2*window/suitePoll-2*window/suiteResync)/2; n > most {
		t.Errorf("%d reconciles in %s of a Ready Proxy of two replicas, want at most %d (its resync)", n, window, most)
	}
	t.Logf("%d reconciles in %s of a Ready Proxy of two replicas", n, window)
}
