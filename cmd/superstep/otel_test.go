package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestTraceLogHandler: a record logged with a ctx whose span is current
// carries its trace_id and span_id (also through With); one without none.
func TestTraceLogHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(traceLogHandler{slog.NewJSONHandler(&buf, nil)}).With("run_id", "run_1")
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "s")
	defer span.End()
	log.InfoContext(ctx, "traced")
	log.Info("plain")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log:\n%s", buf.String())
	}
	var traced, plain map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &traced); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &plain); err != nil {
		t.Fatal(err)
	}
	sc := span.SpanContext()
	if traced["trace_id"] != sc.TraceID().String() || traced["span_id"] != sc.SpanID().String() || traced["run_id"] != "run_1" {
		t.Fatalf("traced record %v: want trace_id %s, span_id %s, run_id", traced, sc.TraceID(), sc.SpanID())
	}
	if _, ok := plain["trace_id"]; ok {
		t.Fatalf("a record without a span has a trace_id: %v", plain)
	}
}

// TestSetupTracing_Env: tracing is off without an OTLP endpoint (or with
// OTEL_SDK_DISABLED), on with one, and an unsupported protocol is refused.
func TestSetupTracing_Env(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		env     map[string]string
		on, bad bool
	}{
		{env: map[string]string{}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, bad: true},
	} {
		for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER"} {
			t.Setenv(k, c.env[k])
		}
		tp, stop, err := setupTracing(context.Background(), log)
		if c.bad {
			if err == nil || !strings.Contains(err.Error(), "http/json") {
				t.Fatalf("%v: err %v, want the protocol refused", c.env, err)
			}
			continue
		}
		if err != nil || (tp != nil) != c.on {
			t.Fatalf("%v: provider %v, err %v; want on=%v", c.env, tp, err, c.on)
		}
		stop()
	}
}
