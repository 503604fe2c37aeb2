package contract

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Log keys every provider log line uses (§12). The operator puts a logger
// carrying LogKeyProvider into ctx; the provider adds LogKeyInstance.
const (
	LogKeyProvider = "provider"
	LogKeyInstance = "instance"
)

// Log tiers (§12), as logr verbosity levels.
const (
	// LogOutcome: an instance was created, deleted, found gone.
	LogOutcome = 0
	// LogStep: one step of a multi-step operation (clone, power on,
	// upload seed) and its result.
	LogStep = 1
	// LogCall: one backend call, its duration and status.
	LogCall = 2
)

// TracerName is the instrumentation scope of the spans this module starts.
const TracerName = "github.com/egress-proxies/egress-proxies-operator/contract"

// Span attribute keys (§12). Never CloudInit, never a credential.
const (
	AttrProviderName = attribute.Key("egressproxies.provider.name")
	AttrProviderType = attribute.Key("egressproxies.provider.type")
	AttrOperation    = attribute.Key("egressproxies.operation")
	AttrInstance     = attribute.Key("egressproxies.instance")
	AttrErrorClass   = attribute.Key("egressproxies.error.class")
)

// StartOperation opens the operation span for one provider call ("Create",
// "Get", "Delete", "ListByTag", "Check"); the operator calls it around every
// call it makes. End the span with [EndSpan].
func StartOperation(ctx context.Context, tp trace.TracerProvider, operation string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	attrs = append(attrs, AttrOperation.String(operation))
	return tp.Tracer(TracerName).Start(ctx, "provider."+operation,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// StartSpan opens a child span beneath the span in ctx, on that span's own
// TracerProvider, so a provider needs no tracer of its own: its spans land
// wherever the operator's operation span goes, and nowhere when there is
// none. This is the span-decorator profile of child-spans (§4.16); the
// transport-wrapper profile gets the same effect from otelhttp, which also
// follows the parent span's provider.
func StartSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	tp := trace.SpanFromContext(ctx).TracerProvider()
	return tp.Tracer(TracerName).Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// EndSpan records err's class on span, marks it failed, and ends it. The
// error text is recorded: providers keep secrets out of error texts (§7).
func EndSpan(span trace.Span, err error) {
	if err != nil {
		span.SetAttributes(AttrErrorClass.String(string(ClassOf(err))))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
