package proxy

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Each reconcile of a Proxy is a span naming the Proxy, and the provider
// calls its operations make are spans beneath it, though they run on
// after the reconcile: a trace shows which reconcile made which call.
func TestProviderCallsAreSpansBeneathTheirReconcile(t *testing.T) {
	p := newProxy(t, "traced", nil)
	bootGuest(t, p, current)
	waitReady(t, p)
	ended := spans.Ended()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range ended {
		byID[s.SpanContext().SpanID()] = s
	}
	names := func(s sdktrace.ReadOnlySpan) map[string]string {
		out := map[string]string{}
		for _, a := range s.Attributes() {
			out[string(a.Key)] = a.Value.AsString()
		}
		return out
	}
	for _, s := range ended {
		if s.Name() != "provider.Create" {
			continue
		}
		parent, ok := byID[s.Parent().SpanID()]
		if !ok {
			continue
		}
		a := names(parent)
		if parent.Name() == "proxy.Reconcile" && a[string(attrProxyName)] == p.Name && a[string(attrNamespace)] == p.Namespace &&
			parent.SpanContext().TraceID() == s.SpanContext().TraceID() {
			return
		}
	}
	var seen []string
	for _, s := range ended {
		if s.Name() == "provider.Create" {
			parent := "none"
			if ps, ok := byID[s.Parent().SpanID()]; ok {
				parent = ps.Name()
			}
			seen = append(seen, "provider.Create under "+parent)
		}
	}
	t.Errorf("no provider.Create span beneath a proxy.Reconcile span of %s/%s; saw %q", p.Namespace, p.Name, seen)
}
