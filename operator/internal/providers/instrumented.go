package providers

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metrics"
)

// instrumented wraps every call of a provider in an operation span
// (contract §12), records its duration and error class as metrics, hands
// the provider a logger carrying the provider key, and recovers a panic
// of the call into a transient error (recovered).
type instrumented struct {
	name, typ string
	inner     contract.Provider
	tp        trace.TracerProvider
}

// Instrument decorates p. The result implements contract.Checker exactly
// when p does, and is a contract.EgressKeeper answering for p (egress.go).
func Instrument(name, typ string, p contract.Provider, tp trace.TracerProvider) contract.Provider {
	i := &instrumented{name: name, typ: typ, inner: p, tp: tp}
	if c, ok := p.(contract.Checker); ok {
		return &instrumentedChecker{instrumented: i, checker: c}
	}
	return i
}

// do runs one call under its operation span, logger and metrics.
func (i *instrumented) do(ctx context.Context, op, instance string, call func(context.Context) error) error {
	attrs := []attribute.KeyValue{contract.AttrProviderName.String(i.name), contract.AttrProviderType.String(i.typ)}
	log := logf.FromContext(ctx).WithValues(contract.LogKeyProvider, i.name)
	if instance != "" {
		attrs = append(attrs, contract.AttrInstance.String(instance))
	}
	ctx, span := contract.StartOperation(logr.NewContext(ctx, log), i.tp, op, attrs...)
	start := time.Now()
	err := i.recovered(ctx, op, call)
	contract.EndSpan(span, err)
	class := string(contract.ClassOf(err))
	metrics.ProviderCallDuration.WithLabelValues(i.name, i.typ, op, class).Observe(time.Since(start).Seconds())
	if err != nil {
		metrics.ProviderCallErrors.WithLabelValues(i.name, i.typ, op, class).Inc()
	}
	return err
}

// recovered runs call and turns a panic in it into a transient error of
// the operation, logged with its stack and counted. The operator makes
// provider calls on goroutines of its own (the operation lanes, the GC,
// the health checks), where a panic in an SDK would end the process, and
// the next leader would make the same call and end too; the error instead
// reaches the Proxy's condition, and the call is retried as any transient
// failure. A panic on a goroutine the provider starts itself cannot be
// caught here.
func (i *instrumented) recovered(ctx context.Context, op string, call func(context.Context) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("provider %s panicked in %s: %v", i.name, op, v)
			metrics.ProviderPanics.WithLabelValues(i.name, i.typ, op).Inc()
			logf.FromContext(ctx).Error(err, "provider call panicked", "stack", string(debug.Stack()))
		}
	}()
	return call(ctx)
}

func (i *instrumented) Create(ctx context.Context, req contract.CreateRequest) (inst contract.Instance, err error) {
	err = i.do(ctx, "Create", req.Name, func(ctx context.Context) error {
		inst, err = i.inner.Create(ctx, req)
		return err
	})
	return inst, err
}

func (i *instrumented) Get(ctx context.Context, providerID string) (inst contract.Instance, err error) {
	err = i.do(ctx, "Get", providerID, func(ctx context.Context) error {
		inst, err = i.inner.Get(ctx, providerID)
		return err
	})
	return inst, err
}

func (i *instrumented) Delete(ctx context.Context, providerID string) error {
	return i.do(ctx, "Delete", providerID, func(ctx context.Context) error {
		return i.inner.Delete(ctx, providerID)
	})
}

func (i *instrumented) ListByTag(ctx context.Context, key, value string) (out []contract.Instance, err error) {
	err = i.do(ctx, "ListByTag", "", func(ctx context.Context) error {
		out, err = i.inner.ListByTag(ctx, key, value)
		return err
	})
	return out, err
}

type instrumentedChecker struct {
	*instrumented
	checker contract.Checker
}

func (i *instrumentedChecker) Check(ctx context.Context) (results []contract.CheckResult) {
	if err := i.do(ctx, "Check", "", func(ctx context.Context) error {
		results = i.checker.Check(ctx)
		return nil
	}); err != nil {
		return []contract.CheckResult{contract.ResultFromError("provider", err)}
	}
	return results
}
