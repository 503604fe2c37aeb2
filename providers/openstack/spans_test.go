package openstack

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Every HTTP request is a span (otelhttp on gophercloud's client) under
// its step's span, under the operator's operation span; without a parent
// span no HTTP span is made.
func TestHTTPRequestsAreChildSpans(t *testing.T) {
	c := startCloud(t)
	p := c.provider(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	if _, err := p.ListByTag(context.Background(), contract.LabelManaged, testOwner); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans without a parent span", n)
	}
	ctx, op := contract.StartOperation(context.Background(), tp, "Create")
	if _, err := p.Create(ctx, request("proxy-spans")); err != nil {
		t.Fatal(err)
	}
	op.End()
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byID[s.SpanContext().SpanID().String()] = s
	}
	// The provider logged in before, so the one POST is the create.
	var post sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "openstack HTTP POST" {
			if post != nil {
				t.Fatal("two POST spans")
			}
			post = s
		}
	}
	if post == nil {
		t.Fatal("no span for the create request")
	}
	step := byID[post.Parent().SpanID().String()]
	if step == nil || step.Name() != "openstack.CreateServer" || step.Parent().SpanID() != op.SpanContext().SpanID() {
		t.Errorf("the create request's span is not under openstack.CreateServer under the operation span")
	}
}
