package workflow

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Tracing (OpenTelemetry). The runner makes spans only beneath a recording
// span in the ctx given to Run (a host's response span), with that span's
// TracerProvider: a run without one costs a context lookup per superstep
// and per executor attempt, nothing else.

// tracerName is the instrumentation scope of the runner's spans.
const tracerName = "github.com/superstep/superstep/workflow"

// Span attributes of the runner.
const (
	// attrSuperstepNumber is the superstep's number (superstep spans, and
	// executor spans, whose superstep it is).
	attrSuperstepNumber = attribute.Key("superstep.number")
	// attrSuperstepCommitted is set on a superstep span when it ends: true
	// once the commit hook returned nil, false when the superstep ended
	// without being committed (abandoned, cancelled, or the hook failed);
	// such a span also has status Error.
	attrSuperstepCommitted = attribute.Key("superstep.committed")
	// attrSuperstepStatus is the run's status after a committed superstep.
	attrSuperstepStatus = attribute.Key("superstep.status")
	// attrExecutorID and attrExecutorAttempt describe an executor
	// invocation span.
	attrExecutorID      = attribute.Key("workflow.executor.id")
	attrExecutorAttempt = attribute.Key("workflow.executor.attempt")
)

// startSpan starts a child span of ctx's span when that one records; else
// it returns ctx and nil.
func startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, nil
	}
	return parent.TracerProvider().Tracer(tracerName).Start(ctx, name, trace.WithAttributes(attrs...))
}

// startStepSpan starts the span of superstep n (nil when not tracing). The
// commit hook gets its ctx: a host adds what it knows (lease, events) and
// the store commit as a child span.
func startStepSpan(ctx context.Context, n int64) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	return startSpan(ctx, "superstep", attrSuperstepNumber.Int64(n))
}

// endStepSpan ends a superstep span: committed when err is nil (s is the
// committed step), else marked as not committed with err.
func endStepSpan(span trace.Span, s *Step, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetAttributes(attrSuperstepCommitted.Bool(false))
		span.RecordError(err)
		span.SetStatus(codes.Error, "superstep not committed")
	} else {
		span.SetAttributes(attrSuperstepCommitted.Bool(true), attrSuperstepStatus.String(string(s.Status)))
		if s.Err != nil {
			span.SetStatus(codes.Error, s.Err.Error())
		}
	}
	span.End()
}

// startExecSpan starts the span of one executor invocation (an attempt);
// nil when not tracing.
func startExecSpan(ctx context.Context, n int64, id string, attempt int) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	return startSpan(ctx, "executor "+id, attrExecutorID.String(id), attrSuperstepNumber.Int64(n),
		attrExecutorAttempt.Int(attempt))
}

// endExecSpan ends an executor span with the attempt's error.
func endExecSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
