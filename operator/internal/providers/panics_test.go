package providers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metrics"
)

// panicking panics in every method, as an SDK that dereferences an
// answer it did not expect would.
type panicking struct{}

func (panicking) Create(context.Context, contract.CreateRequest) (contract.Instance, error) {
	panic("nil answer from the SDK")
}
func (panicking) Get(context.Context, string) (contract.Instance, error) {
	panic("nil answer from the SDK")
}
func (panicking) Delete(context.Context, string) error { panic("nil answer from the SDK") }
func (panicking) ListByTag(context.Context, string, string) ([]contract.Instance, error) {
	panic("nil answer from the SDK")
}
func (panicking) Check(context.Context) []contract.CheckResult { panic("nil answer from the SDK") }

// A provider that panics must not take the operator down: the operator
// runs provider calls on its own goroutines (the operation lanes, the GC,
// the health checks), where a panic kills the process, and the next
// leader would make the same call and die too. Each call returns a
// transient error naming the provider, the operation and the panic, and
// counts it; a check round reports it as the provider's result.
func TestAPanickingProviderReturnsATransientError(t *testing.T) {
	p := Instrument("lab-panics", "memory", panicking{}, noop.NewTracerProvider())
	ctx := context.Background()
	calls := map[string]func() error{
		"Create": func() error { _, err := p.Create(ctx, contract.CreateRequest{Name: "web-0"}); return err },
		"Get":    func() error { _, err := p.Get(ctx, "lab/1"); return err },
		"Delete": func() error { return p.Delete(ctx, "lab/1") },
		"ListByTag": func() error {
			_, err := p.ListByTag(ctx, contract.LabelUID, "u")
			return err
		},
	}
	for op, call := range calls {
		err := call()
		if err == nil || contract.ClassOf(err) != contract.ClassTransient || !strings.Contains(err.Error(), "panicked") ||
			!strings.Contains(err.Error(), op) || !strings.Contains(err.Error(), "nil answer from the SDK") {
			t.Errorf("%s of a panicking provider = %v; want a transient error naming the operation and the panic", op, err)
		}
		if n := testutil.ToFloat64(metrics.ProviderPanics.WithLabelValues("lab-panics", "memory", op)); n != 1 {
			t.Errorf("panics counted for %s: %v, want 1", op, n)
		}
	}
	// Behind the entry's limits, as the operator builds it: a call that
	// panicked frees its slot.
	limited := Instrument("lab-panics-limited", "memory", Limit(panicking{}, Limits{QPS: 1000, Burst: 10, Concurrency: 1}), noop.NewTracerProvider())
	for range 3 {
		bounded, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := limited.Get(bounded, "lab/1")
		cancel()
		if err == nil || !strings.Contains(err.Error(), "panicked") {
			t.Fatalf("Get behind the limits after a panic = %v; want the panic's error, not a wait for the slot", err)
		}
	}
	results := p.(contract.Checker).Check(ctx)
	if len(results) != 1 || results[0].OK || !strings.Contains(results[0].Message, "panicked") {
		t.Errorf("Check of a panicking provider = %+v; want one failed result naming the panic", results)
	}
}
