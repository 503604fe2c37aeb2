package providers

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metrics"
)

// slow is a provider whose Get takes a while and counts how many run at
// once; Create fails with a quota error.
type slow struct {
	inFlight, peak atomic.Int32
}

func (s *slow) Create(context.Context, contract.CreateRequest) (contract.Instance, error) {
	return contract.Instance{}, contract.Quota(errors.New("no cores left"))
}

func (s *slow) Get(ctx context.Context, id string) (contract.Instance, error) {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	select {
	case <-time.After(20 * time.Millisecond):
	case <-ctx.Done():
		return contract.Instance{}, ctx.Err()
	}
	return contract.Instance{ProviderID: id, State: contract.StateProvisioning}, nil
}

func (s *slow) Delete(context.Context, string) error { return nil }
func (s *slow) ListByTag(context.Context, string, string) ([]contract.Instance, error) {
	return nil, nil
}

func TestLimitCapsCallsInFlight(t *testing.T) {
	inner := &slow{}
	p := Limit(inner, Limits{QPS: 1000, Burst: 1000, Concurrency: 2})
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { _, _ = p.Get(context.Background(), "x") })
	}
	wg.Wait()
	if peak := inner.peak.Load(); peak != 2 {
		t.Errorf("peak calls in flight %d, want the limit 2", peak)
	}
}

func TestLimitHonoursACancelledContext(t *testing.T) {
	p := Limit(&slow{}, Limits{QPS: 0.001, Burst: 1, Concurrency: 1})
	_, _ = p.Get(context.Background(), "takes the only token")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Get(ctx, "waits")
	if !errors.Is(err, context.DeadlineExceeded) || contract.ClassOf(err) != contract.ClassTransient {
		t.Errorf("waiting for a token past the deadline = %v, want a transient deadline error", err)
	}
	if time.Since(start) > time.Second {
		t.Errorf("the wait ignored the deadline")
	}
}

func TestInstrumentRecordsSpansAndMetrics(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	p := Instrument("lab", "memory", &slow{}, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	if _, ok := p.(contract.Checker); ok {
		t.Error("a provider without Checker became one")
	}
	before := testutil.ToFloat64(metrics.ProviderCallErrors.WithLabelValues("lab", "memory", "Create", "Quota"))
	_, err := p.Create(context.Background(), contract.CreateRequest{Name: "web-1"})
	if !errors.Is(err, contract.ErrQuota) {
		t.Fatalf("Create = %v", err)
	}
	if got := testutil.ToFloat64(metrics.ProviderCallErrors.WithLabelValues("lab", "memory", "Create", "Quota")) - before; got != 1 {
		t.Errorf("quota errors metric grew by %v, want 1", got)
	}
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Name() != "provider.Create" {
		t.Fatalf("spans %v, want one provider.Create", spans)
	}
	attrs := map[string]string{}
	for _, a := range spans[0].Attributes() {
		attrs[string(a.Key)] = a.Value.String()
	}
	for k, want := range map[string]string{
		"egressproxies.provider.name": "lab", "egressproxies.provider.type": "memory",
		"egressproxies.instance": "web-1", "egressproxies.error.class": "Quota",
	} {
		if attrs[k] != want {
			t.Errorf("span attribute %s = %q, want %q", k, attrs[k], want)
		}
	}
}

// heldCreates is a provider whose Creates wait until released, as a full
// clone does for minutes; its Gets answer at once.
type heldCreates struct {
	started chan struct{}
	release chan struct{}
}

func (h *heldCreates) Create(ctx context.Context, _ contract.CreateRequest) (contract.Instance, error) {
	h.started <- struct{}{}
	select {
	case <-h.release:
		return contract.Instance{}, nil
	case <-ctx.Done():
		return contract.Instance{}, ctx.Err()
	}
}

func (h *heldCreates) Get(_ context.Context, id string) (contract.Instance, error) {
	return contract.Instance{ProviderID: id, State: contract.StateRunning}, nil
}
func (h *heldCreates) Delete(context.Context, string) error { return nil }
func (h *heldCreates) ListByTag(context.Context, string, string) ([]contract.Instance, error) {
	return nil, nil
}

// Creates that take minutes never hold every call slot of an entry: a
// Get, Delete or list of its other Proxies (a resync, a deletion) still
// gets one while as many Creates as may run do.
func TestLongCreatesLeaveASlotForOtherCalls(t *testing.T) {
	for _, concurrency := range []int{2, 4} {
		h := &heldCreates{started: make(chan struct{}, 16), release: make(chan struct{})}
		p := Limit(h, Limits{QPS: 1000, Burst: 1000, Concurrency: concurrency})
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range concurrency + 2 {
			wg.Go(func() { _, _ = p.Create(ctx, contract.CreateRequest{}) })
		}
		for range concurrency - 1 {
			<-h.started
		}
		// One more Create starting would take the last slot. Give it the
		// time it needs to (a wait that can only hide the failure, never
		// make one).
		select {
		case <-h.started:
			t.Errorf("concurrency %d: %d Creates ran at once, want at most %d", concurrency, concurrency, concurrency-1)
		case <-time.After(200 * time.Millisecond):
		}
		getCtx, getCancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, getErr := p.Get(getCtx, "x")
		delErr := p.Delete(getCtx, "x")
		getCancel()
		if getErr != nil || delErr != nil {
			t.Errorf("concurrency %d, Creates held: Get = %v, Delete = %v; want both answered", concurrency, getErr, delErr)
		}
		close(h.release)
		cancel()
		wg.Wait()
	}
}

// heldLists is a provider whose ListByTag calls wait until released, as a
// finalizer waits on a listing of a large folder; shared says whether it
// declares its listings shared (contract.SharedLister).
type heldLists struct {
	shared  bool
	started chan struct{}
	release chan struct{}
}

func (h *heldLists) SharesLists() bool { return h.shared }
func (h *heldLists) Create(context.Context, contract.CreateRequest) (contract.Instance, error) {
	return contract.Instance{}, nil
}
func (h *heldLists) Get(_ context.Context, id string) (contract.Instance, error) {
	return contract.Instance{ProviderID: id, State: contract.StateRunning}, nil
}
func (h *heldLists) Delete(context.Context, string) error { return nil }
func (h *heldLists) ListByTag(ctx context.Context, _, _ string) ([]contract.Instance, error) {
	h.started <- struct{}{}
	select {
	case <-h.release:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ListByTag calls waiting on a shared listing hold no call slot and spend
// no token (the fleet benchmark, docs/performance.md: a fleet's finalizers held every slot of the entry
// waiting on one listing, and no Delete ran meanwhile); a provider that
// does not share its listings keeps both limits on them.
func TestSharedListsTakeNoSlot(t *testing.T) {
	for _, shared := range []bool{true, false} {
		h := &heldLists{shared: shared, started: make(chan struct{}, 4), release: make(chan struct{})}
		// Two tokens, two slots: the two listings would spend both.
		p := Limit(h, Limits{QPS: 0.001, Burst: 2, Concurrency: 2})
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { _, _ = p.ListByTag(ctx, contract.LabelUID, "u") })
		}
		for range 2 {
			<-h.started
		}
		// Both tokens and slots are taken unless the lists are shared. A
		// shared Delete gets 10 s (only a real wait fails it); an unshared
		// one 300 ms, a wait that can only hide the failure, never make one.
		wait := 300 * time.Millisecond
		if shared {
			wait = 10 * time.Second
		}
		delCtx, delCancel := context.WithTimeout(context.Background(), wait)
		err := p.Delete(delCtx, "x")
		delCancel()
		switch {
		case shared && err != nil:
			t.Errorf("two shared listings waiting: Delete = %v; want it answered, the listings holding no token or slot", err)
		case !shared && err == nil:
			t.Errorf("two unshared listings running with concurrency 2: Delete answered; want it to wait for a token or slot")
		}
		close(h.release)
		cancel()
		wg.Wait()
	}
}
