package app

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracerProvider exports spans as OpenTelemetry's environment variables
// say, read by autoexport (OTEL_TRACES_EXPORTER otlp, console or none;
// OTEL_EXPORTER_OTLP_PROTOCOL http/protobuf or grpc; the endpoints and
// headers), and discards them otherwise: tracing is off by default
// (docs/operator.md, "Tracing").
func tracerProvider(ctx context.Context) (trace.TracerProvider, func(context.Context) error, error) {
	exp, err := spanExporter(ctx)
	if err != nil || exp == nil {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	return tp, tp.Shutdown, nil
}

// spanExporter is the exporter the environment names, or nil when tracing
// is off: OTEL_SDK_DISABLED is true, OTEL_TRACES_EXPORTER is none, or
// neither an exporter nor an OTLP endpoint is named (autoexport alone
// would send to localhost's OTLP port).
func spanExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	if os.Getenv("OTEL_TRACES_EXPORTER") == "" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q OTEL_EXPORTER_OTLP_PROTOCOL=%q: %w",
			os.Getenv("OTEL_TRACES_EXPORTER"), os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), err)
	}
	if autoexport.IsNoneSpanExporter(exp) {
		return nil, nil
	}
	return exp, nil
}
