package vsphere

import (
	"context"
	"sync"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// A folder's listings are shared (the fleet benchmark, docs/performance.md): a ListByTag that arrives
// while a listing of the folder is in flight waits for the next one,
// which starts as soon as the one in flight ends and answers every call
// that arrived meanwhile. Each call still gets a listing begun after it
// was made, as an unshared one would be, so a VM made before the call is
// in its answer. A fleet of Proxies deleted together — each finalizer
// lists the folder by its UID before and after its deletes — lists the
// folder once per moment instead of twice per Proxy, every listing a scan
// of the whole folder.

// freshCall runs fn for the callers of do, one run at a time; a caller
// joins the next run to begin, never one already under way.
type freshCall[T any] struct {
	mu      sync.Mutex
	running bool
	next    *freshRun[T]
}

// freshRun is one run of the call: done is closed once val and err are
// set. ctx and fn are its first caller's.
type freshRun[T any] struct {
	ctx  context.Context
	fn   func(context.Context) (T, error)
	done chan struct{}
	val  T
	err  error
}

// do returns the result of a run of fn that began after do was called,
// or ctx's error if ctx ends first. The run is not cut short when its
// callers stop waiting (fn bounds its own calls): the others still wait
// for it.
func (f *freshCall[T]) do(ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	f.mu.Lock()
	if f.next == nil {
		f.next = &freshRun[T]{ctx: context.WithoutCancel(ctx), fn: fn, done: make(chan struct{})}
	}
	r := f.next
	if !f.running {
		f.start()
	}
	f.mu.Unlock()
	select {
	case <-r.done:
		return r.val, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// start runs the next run; f.mu is held.
func (f *freshCall[T]) start() {
	r := f.next
	f.next, f.running = nil, true
	go func() {
		r.val, r.err = r.fn(r.ctx)
		close(r.done)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.running = false
		if f.next != nil {
			f.start()
		}
	}()
}

// SharesLists says ListByTag shares its listings as above
// (contract.SharedLister): the operator lets calls wait on them without
// holding a call slot.
func (p *Provider) SharesLists() bool { return true }

var _ contract.SharedLister = (*Provider)(nil)
