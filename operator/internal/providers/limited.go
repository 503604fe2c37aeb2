package providers

import (
	"context"
	"fmt"

	"golang.org/x/time/rate"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Limits bound how hard the operator drives one backend: a token bucket
// (QPS, Burst) on provider calls and a cap on calls in flight. Backends
// overloaded by controllers with no back-off are a known complaint about
// peers.
type Limits struct {
	QPS         float64
	Burst       int
	Concurrency int
}

// limited applies Limits to every call of a provider.
type limited struct {
	inner    contract.Provider
	bucket   *rate.Limiter
	inFlight chan struct{}
	// creates admits at most Concurrency-1 Creates to the slots: a Create
	// can hold its slot for minutes (a full clone), and the last slot
	// stays for the short calls — the resyncs and deletions of the entry's
	// other Proxies. With Concurrency 1 there is nothing to keep.
	creates chan struct{}
	// sharedLists is set for a contract.SharedLister: its ListByTag calls
	// wait on listings it bounds itself, so they take no token or slot.
	sharedLists bool
}

// Limit decorates p with l. The result implements contract.Checker exactly
// when p does; checks go through the same limits. It is a
// contract.EgressKeeper answering for p (egress.go), whose calls take a
// token and a slot as any other. A contract.SharedLister's
// ListByTag goes through neither limit: the provider runs one listing per
// location at a time whoever waits, and waiting on it is no backend call.
func Limit(p contract.Provider, l Limits) contract.Provider {
	lp := &limited{inner: p, bucket: rate.NewLimiter(rate.Limit(l.QPS), l.Burst),
		inFlight: make(chan struct{}, l.Concurrency), creates: make(chan struct{}, max(1, l.Concurrency-1))}
	if s, ok := p.(contract.SharedLister); ok {
		lp.sharedLists = s.SharesLists()
	}
	if c, ok := p.(contract.Checker); ok {
		return &limitedChecker{limited: lp, checker: c}
	}
	return lp
}

// acquire waits for a token and a slot; the returned function frees the
// slot. Waiting honours ctx, so a cancelled reconcile never queues.
func (l *limited) acquire(ctx context.Context) (func(), error) {
	if err := l.bucket.Wait(ctx); err != nil {
		return nil, fmt.Errorf("waiting for the provider's rate limit: %w", contextErr(ctx, err))
	}
	select {
	case l.inFlight <- struct{}{}:
		return func() { <-l.inFlight }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a free provider call slot: %w", ctx.Err())
	}
}

// contextErr prefers ctx's own error. rate.Limiter refuses at once, with a
// plain error, a wait that would outlast ctx's deadline; that is the
// deadline's doing, so it wraps context.DeadlineExceeded (contract §5).
func contextErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if _, ok := ctx.Deadline(); ok {
		return fmt.Errorf("%w: %w", err, context.DeadlineExceeded)
	}
	return err
}

func (l *limited) Create(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
	select {
	case l.creates <- struct{}{}:
		defer func() { <-l.creates }()
	case <-ctx.Done():
		return contract.Instance{}, fmt.Errorf("waiting for a free provider call slot for a Create: %w", ctx.Err())
	}
	release, err := l.acquire(ctx)
	if err != nil {
		return contract.Instance{}, err
	}
	defer release()
	return l.inner.Create(ctx, req)
}

func (l *limited) Get(ctx context.Context, providerID string) (contract.Instance, error) {
	release, err := l.acquire(ctx)
	if err != nil {
		return contract.Instance{}, err
	}
	defer release()
	return l.inner.Get(ctx, providerID)
}

func (l *limited) Delete(ctx context.Context, providerID string) error {
	release, err := l.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	return l.inner.Delete(ctx, providerID)
}

func (l *limited) ListByTag(ctx context.Context, key, value string) ([]contract.Instance, error) {
	if l.sharedLists {
		return l.inner.ListByTag(ctx, key, value)
	}
	release, err := l.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	return l.inner.ListByTag(ctx, key, value)
}

type limitedChecker struct {
	*limited
	checker contract.Checker
}

func (l *limitedChecker) Check(ctx context.Context) []contract.CheckResult {
	release, err := l.acquire(ctx)
	if err != nil {
		return l.checker.Check(ctx) // ctx is done: the checker reports Timeout promptly
	}
	defer release()
	return l.checker.Check(ctx)
}
