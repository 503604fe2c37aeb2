package vsphere

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFreshCallJoinsOnlyRunsNotYetBegun: callers that arrive while a run
// is under way share the next run, and none is answered by a run that
// began before it called.
func TestFreshCallJoinsOnlyRunsNotYetBegun(t *testing.T) {
	var f freshCall[int]
	var runs atomic.Int32
	release := make(chan struct{})
	errFirst := errors.New("run 1 failed")
	fn := func(context.Context) (int, error) {
		n := int(runs.Add(1))
		if n == 1 {
			<-release
			return n, errFirst
		}
		return n, nil
	}
	first := make(chan error)
	go func() {
		_, err := f.do(context.Background(), fn)
		first <- err
	}()
	for runs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	// Run 1 is under way: these eight arrive after it began.
	var wg sync.WaitGroup
	got := make([]int, 8)
	errs := make([]error, 8)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = f.do(context.Background(), fn) })
	}
	for {
		f.mu.Lock()
		joined := f.next != nil
		f.mu.Unlock()
		if joined {
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // let all eight join
	close(release)
	wg.Wait()
	if err := <-first; !errors.Is(err, errFirst) {
		t.Errorf("the first caller got %v, want run 1's error", err)
	}
	for i, v := range got {
		if v != 2 || errs[i] != nil {
			t.Errorf("caller %d that arrived during run 1 got run %d (%v), want 2 (shared, begun after it called)", i, v, errs[i])
		}
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("%d runs for 9 callers, want 2", n)
	}
}

// TestFreshCallCallerLeavesWithItsContext: a caller whose context ends
// stops waiting; the run goes on for the others, and its error reaches
// them.
func TestFreshCallCallerLeavesWithItsContext(t *testing.T) {
	var f freshCall[int]
	release := make(chan struct{})
	boom := errors.New("boom")
	var runs atomic.Int32
	fn := func(ctx context.Context) (int, error) {
		n := int(runs.Add(1))
		<-release
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		return n, boom
	}
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error)
	go func() { _, err := f.do(ctx, fn); left <- err }()
	stayed := make(chan error)
	go func() { _, err := f.do(context.Background(), fn); stayed <- err }()
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Errorf("the caller that left got %v, want context.Canceled", err)
	}
	close(release)
	if err := <-stayed; !errors.Is(err, boom) {
		t.Errorf("the caller that stayed got %v, want the run's own error", err)
	}
}
