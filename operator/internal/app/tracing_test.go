package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

// Tracing is off unless the environment names an exporter or an OTLP
// endpoint, and off when OpenTelemetry's own switches say so; otherwise a
// span goes where OTEL_TRACES_EXPORTER and OTEL_EXPORTER_OTLP_PROTOCOL
// say (an OTLP receiver on loopback over HTTP or over gRPC, or the
// console), and a value no exporter has fails start, naming the variable.
func TestTracingFollowsTheOpenTelemetryVariables(t *testing.T) {
	overHTTP, overGRPC := otlpOverHTTP(t), otlpOverGRPC(t)
	for _, c := range []struct {
		name string
		env  map[string]string
		want string // where a span goes: "http", "grpc", "console"; "" for nowhere; "error" for a failed start
	}{
		{"nothing set", nil, ""},
		{"an OTLP endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": overHTTP.url}, "http"},
		{"a traces endpoint over gRPC", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": overGRPC.url, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "grpc"},
		{"the console exporter", map[string]string{"OTEL_TRACES_EXPORTER": "console"}, "console"},
		{"exporter none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": overHTTP.url}, ""},
		{"the SDK disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": overHTTP.url}, ""},
		{"an unknown exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin-ish"}, "error"},
		{"an unknown protocol", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": overHTTP.url, "OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"}, "error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
				t.Setenv(k, c.env[k])
			}
			httpBefore, grpcBefore := overHTTP.exports.Load(), overGRPC.exports.Load()
			exp, err := spanExporter(context.Background())
			got := ""
			switch {
			case err != nil:
				got = "error"
				if !strings.Contains(err.Error(), "OTEL_") {
					t.Errorf("the error names no variable: %v", err)
				}
			case exp != nil:
				tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
				_, span := tp.Tracer("test").Start(context.Background(), "span")
				span.End()
				if err := tp.Shutdown(context.Background()); err != nil {
					t.Errorf("exporting a span: %v", err)
				}
				switch {
				case overHTTP.exports.Load() > httpBefore:
					got = "http"
				case overGRPC.exports.Load() > grpcBefore:
					got = "grpc"
				case fmt.Sprintf("%T", exp) == "*stdouttrace.Exporter":
					got = "console"
				default:
					got = fmt.Sprintf("no receiver (%T)", exp)
				}
			}
			if got != c.want {
				t.Errorf("a span went to %q (%v), want %q", got, err, c.want)
			}
		})
	}
}

// receiver is an OTLP trace receiver on loopback, counting the exports it
// was sent.
type receiver struct {
	url     string
	exports *atomic.Int32
}

// otlpOverHTTP receives OTLP/HTTP (POST /v1/traces, http/protobuf).
func otlpOverHTTP(t *testing.T) receiver {
	t.Helper()
	r := receiver{exports: new(atomic.Int32)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost && req.URL.Path == "/v1/traces" {
			r.exports.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// traceService answers OTLP/gRPC's TraceService.Export.
type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	exports *atomic.Int32
}

func (s traceService) Export(context.Context, *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.exports.Add(1)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// otlpOverGRPC receives OTLP/gRPC, without TLS (an http:// endpoint).
func otlpOverGRPC(t *testing.T) receiver {
	t.Helper()
	r := receiver{exports: new(atomic.Int32)}
	lis, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, traceService{exports: r.exports})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	r.url = "http://" + lis.Addr().String()
	return r
}
