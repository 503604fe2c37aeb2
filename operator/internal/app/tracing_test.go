package app

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// Tracing is off unless the environment names an exporter or an OTLP
// endpoint, and off when OpenTelemetry's own switches say so; otherwise the
// exporter is the one OTEL_TRACES_EXPORTER and OTEL_EXPORTER_OTLP_PROTOCOL
// name, and a value no exporter has fails start, naming the variable.
func TestTracingFollowsTheOpenTelemetryVariables(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		want string // the exporter's type; "" for none; "error" for a failed start
	}{
		{"nothing set", nil, ""},
		{"an OTLP endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, "*otlptrace.Exporter"},
		{"a traces endpoint over gRPC", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "*otlptrace.Exporter"},
		{"the console exporter", map[string]string{"OTEL_TRACES_EXPORTER": "console"}, "*stdouttrace.Exporter"},
		{"exporter none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, ""},
		{"the SDK disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"}, ""},
		{"an unknown exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin-ish"}, "error"},
		{"an unknown protocol", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"}, "error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
				t.Setenv(k, c.env[k])
			}
			exp, err := spanExporter(context.Background())
			got := ""
			switch {
			case err != nil:
				got = "error"
				if !strings.Contains(err.Error(), "OTEL_") {
					t.Errorf("the error names no variable: %v", err)
				}
			case exp != nil:
				got = fmt.Sprintf("%T", exp)
				_ = exp.Shutdown(context.Background())
			}
			if got != c.want {
				t.Errorf("exporter %s (%v), want %s", got, err, c.want)
			}
		})
	}
}
