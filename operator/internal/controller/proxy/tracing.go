package proxy

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// The attributes of a reconcile's span: the namespace by OpenTelemetry's
// Kubernetes conventions, and the Proxy's name.
const (
	attrNamespace = attribute.Key("k8s.namespace.name")
	attrProxyName = attribute.Key("egressproxies.proxy.name")
)

// startReconcile opens the span of one reconcile of the Proxy req names,
// on Tracer; the provider calls its operations make are spans beneath it,
// since an operation's context keeps the reconcile's values
// (operation.Runner). Without a Tracer, ctx is returned as it is.
func (r *Reconciler) startReconcile(ctx context.Context, req ctrl.Request) (context.Context, func(error)) {
	if r.Tracer == nil {
		return ctx, func(error) {}
	}
	ctx, span := r.Tracer.Tracer(contract.TracerName).Start(ctx, "proxy.Reconcile",
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrNamespace.String(req.Namespace), attrProxyName.String(req.Name)))
	return ctx, func(err error) { contract.EndSpan(span, err) }
}
