package providers

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metrics"
)

// instrumented wraps every call of a provider in an operation span
// (contract §12), records its duration and error class as metrics, and
// hands the provider a logger carrying the provider key.
type instrumented struct {
	name, typ string
	inner     contract.Provider
	tp        trace.TracerProvider
}

// Instrument decorates p. The result implements contract.Checker exactly
// when p does.
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
	err := call(ctx)
	contract.EndSpan(span, err)
	class := string(contract.ClassOf(err))
	metrics.ProviderCallDuration.WithLabelValues(i.name, i.typ, op, class).Observe(time.Since(start).Seconds())
	if err != nil {
		metrics.ProviderCallErrors.WithLabelValues(i.name, i.typ, op, class).Inc()
	}
	return err
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
	_ = i.do(ctx, "Check", "", func(ctx context.Context) error {
		results = i.checker.Check(ctx)
		return nil
	})
	return results
}
