package contracttest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// logSink keeps every line the provider logs, at every verbosity, as the
// operator's logger would receive it.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *logSink) logger() logr.Logger {
	return funcr.NewJSON(func(obj string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.lines = append(s.lines, obj)
	}, funcr.Options{Verbosity: 10})
}

func (s *logSink) snapshot() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// since returns the lines logged after the first n.
func (s *logSink) since(n int) []map[string]any {
	var out []map[string]any
	for _, line := range s.snapshot()[n:] {
		m := map[string]any{}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			m = map[string]any{"msg": line}
		}
		out = append(out, m)
	}
	return out
}

// spanRecorder keeps every span the provider and the harness start.
type spanRecorder struct {
	rec *tracetest.SpanRecorder
	tp  *sdktrace.TracerProvider
}

func newSpanRecorder() *spanRecorder {
	rec := tracetest.NewSpanRecorder()
	return &spanRecorder{rec: rec, tp: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))}
}

// texts renders every ended span's name, attributes, events and status as
// lines, for the sentinel checks.
func (r *spanRecorder) texts() []string {
	var out []string
	for _, s := range r.rec.Ended() {
		var b strings.Builder
		fmt.Fprintf(&b, "span %q status %q", s.Name(), s.Status().Description)
		for _, a := range s.Attributes() {
			fmt.Fprintf(&b, " %s=%s", a.Key, a.Value.String())
		}
		for _, ev := range s.Events() {
			fmt.Fprintf(&b, " event %q", ev.Name)
			for _, a := range ev.Attributes {
				fmt.Fprintf(&b, " %s=%s", a.Key, a.Value.String())
			}
		}
		out = append(out, b.String())
	}
	return out
}
