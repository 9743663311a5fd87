package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracingShutdownTimeout bounds the flush of the spans left at exit.
const tracingShutdownTimeout = 5 * time.Second

// setupTracing configures OpenTelemetry tracing from the standard
// environment variables, and returns the provider (nil when tracing is
// off) and the function that flushes and stops it at exit. (The
// "superstep: tracing" log line says where spans go: logged here, the endpoint's
// address would come before the listening address.)
//
// Tracing is on when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT is set, or OTEL_TRACES_EXPORTER is "otlp";
// off when OTEL_SDK_DISABLED is "true" or OTEL_TRACES_EXPORTER is "none".
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL (else OTEL_EXPORTER_OTLP_PROTOCOL)
// picks "http/protobuf" (the default) or "grpc". The exporters read the
// other OTEL_EXPORTER_OTLP_* variables (headers, timeout, TLS), the SDK
// OTEL_TRACES_SAMPLER(_ARG) and OTEL_BSP_*, the resource OTEL_SERVICE_NAME
// (default "superstep") and OTEL_RESOURCE_ATTRIBUTES.
func setupTracing(ctx context.Context, log *slog.Logger) (trace.TracerProvider, func(), error) {
	if !tracingConfigured() {
		return nil, func() {}, nil
	}
	proto := firstEnv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch proto {
	case "", "http/protobuf":
		proto = "http/protobuf"
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, nil, fmt.Errorf("serve: OTEL_EXPORTER_OTLP_PROTOCOL %q: want http/protobuf or grpc", proto)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("serve: OTLP trace exporter: %w", err)
	}
	// Later detectors win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override the default name.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "superstep")),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, nil, fmt.Errorf("serve: OTEL resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("superstep: tracing", "err", err) }))
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("superstep: tracing: spans not flushed at exit", "err", err)
		}
	}
	return tp, stop, nil
}

// tracingConfigured reports whether the environment asks for traces.
func tracingConfigured() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch strings.ToLower(os.Getenv("OTEL_TRACES_EXPORTER")) {
	case "none":
		return false
	case "otlp":
		return true
	}
	return firstEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// tracingLog describes where spans go, for the "superstep: tracing" log line.
func tracingLog(tp trace.TracerProvider) string {
	if tp == nil {
		return "off"
	}
	proto := firstEnv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	if proto == "" {
		proto = "http/protobuf"
	}
	return "otlp " + proto + " " + redactModelURL(firstEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"))
}

// firstEnv returns the first of the variables that is set and not empty.
func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// traceLogHandler adds the trace_id and span_id of the span current in a
// record's ctx (logged with InfoContext and the like) to the record.
type traceLogHandler struct{ slog.Handler }

func (h traceLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceLogHandler{h.Handler.WithAttrs(as)}
}

func (h traceLogHandler) WithGroup(name string) slog.Handler {
	return traceLogHandler{h.Handler.WithGroup(name)}
}
