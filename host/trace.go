package host

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
)

// Tracing (OpenTelemetry), on when Config.TracerProvider is set.
//
// A response has a span from its create to its terminal commit
// ("response"), a child of the create request's span. Its W3C trace context
// is stored with the response (store.Response.TraceContext) in the create's
// transaction. A host that resumes the run (after a crash, a drain, or on
// another host) starts a "response (resumed)" span whose parent is that
// stored context: the resumed supersteps are spans of the same trace, under
// the response span even when the host that made it died before exporting
// it. The workflow runner makes a "superstep" span per superstep beneath
// the response span (executor, model and tool spans beneath it); the host
// adds the lease epoch, its id and the number of events committed, and a
// "store.commit" child span per commit attempt (its duration is the commit
// latency). A superstep span that ends without its commit succeeding has
// status Error and superstep.committed=false.

const tracerName = "github.com/superstep/superstep/host"

// Span attributes of the host.
const (
	attrResponseID   = attribute.Key("superstep.response.id")
	attrRunID        = attribute.Key("superstep.run.id")
	attrModel        = attribute.Key("gen_ai.request.model")
	attrBackground   = attribute.Key("superstep.response.background")
	attrStatus       = attribute.Key("superstep.response.status")
	attrResumed      = attribute.Key("superstep.response.resumed")
	attrResumedStep  = attribute.Key("superstep.resumed_from_step")
	attrStopped      = attribute.Key("superstep.response.stopped")
	attrHostID       = attribute.Key("superstep.host.id")
	attrLeaseEpoch   = attribute.Key("superstep.lease.epoch")
	attrEvents       = attribute.Key("superstep.events")
	attrStep         = attribute.Key("superstep.number")
	attrCommitFinish = attribute.Key("superstep.commit.terminal")
)

// traceContext is the W3C propagator of the stored trace context.
var traceContext = propagation.TraceContext{}

// runTrace is a run's tracing state: the response span (nil when tracing
// is off) and, during a commit hook, the superstep's ctx. Used by the run's
// goroutine only.
type runTrace struct {
	span    trace.Span
	stepCtx context.Context
}

// tracer returns the host's tracer, nil when tracing is off.
func (h *Host) tracer() trace.Tracer {
	if h.cfg.TracerProvider == nil {
		return nil
	}
	return h.cfg.TracerProvider.Tracer(tracerName)
}

// startResponseSpan starts the span of a response being created under ctx
// (the request's) and returns it with the trace context to store ("" when
// tracing is off).
func (h *Host) startResponseSpan(ctx context.Context, id, runID, model string, background bool) (trace.Span, string) {
	t := h.tracer()
	if t == nil {
		return nil, ""
	}
	ctx, span := t.Start(ctx, "response", trace.WithAttributes(attrResponseID.String(id), attrRunID.String(runID),
		attrModel.String(model), attrBackground.Bool(background), attrHostID.String(h.cfg.HostID)))
	return span, encodeTraceContext(ctx)
}

// startResumedSpan starts the span of a resumed response: a child of the
// response's stored trace context (a new trace when it has none).
func (h *Host) startResumedSpan(r *run, head *store.Response, step int64) {
	t := h.tracer()
	if t == nil {
		return
	}
	ctx := decodeTraceContext(context.Background(), head.TraceContext)
	_, r.trace.span = t.Start(ctx, "response (resumed)", trace.WithAttributes(attrResponseID.String(head.ID),
		attrRunID.String(r.id), attrModel.String(head.Model), attrResumed.Bool(true), attrResumedStep.Int64(step),
		attrHostID.String(h.cfg.HostID), attrLeaseEpoch.Int64(r.epoch)))
}

// encodeTraceContext returns ctx's span context as a traceparent header
// value, followed by "\n" and the tracestate when there is one; "" when
// ctx has no valid span context.
func encodeTraceContext(ctx context.Context) string {
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	tp := c.Get("traceparent")
	if ts := c.Get("tracestate"); tp != "" && ts != "" {
		return tp + "\n" + ts
	}
	return tp
}

// decodeTraceContext returns ctx with the remote span context s holds (as
// encodeTraceContext wrote it); ctx unchanged when s holds none.
func decodeTraceContext(ctx context.Context, s string) context.Context {
	if s == "" {
		return ctx
	}
	tp, ts, _ := strings.Cut(s, "\n")
	return traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": tp, "tracestate": ts})
}

// endSpan ends span (if any) with err.
func endSpan(span trace.Span, err error, attrs ...attribute.KeyValue) {
	if span == nil {
		return
	}
	span.SetAttributes(attrs...)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// runContext returns ctx with r's response span, for the workflow runner.
func (r *run) runContext(ctx context.Context) context.Context {
	if r.trace.span == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, r.trace.span)
}

// commitContext returns ctx with the span a commit of p is a child of (the
// running superstep's, else the response's), and notes on a superstep span
// what the host knows of it. Called with r.mu held.
func (h *Host) commitContext(ctx context.Context, r *run, p *store.CommitParams) context.Context {
	if r.trace.span == nil {
		return ctx
	}
	parent := r.trace.span
	if r.trace.stepCtx != nil {
		if s := trace.SpanFromContext(r.trace.stepCtx); s.IsRecording() {
			parent = s
			s.SetAttributes(attrLeaseEpoch.Int64(p.Epoch), attrHostID.String(h.cfg.HostID),
				attrEvents.Int(len(p.Events)), attrResponseID.String(p.ResponseID), attrRunID.String(p.RunID))
		}
	}
	return trace.ContextWithSpan(ctx, parent)
}

// startCommitSpan starts the span of one commit attempt of p beneath
// ctx's span; nil when that one does not record.
func startCommitSpan(ctx context.Context, p *store.CommitParams) trace.Span {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return nil
	}
	_, span := parent.TracerProvider().Tracer(tracerName).Start(ctx, "store.commit", trace.WithAttributes(
		attrStep.Int64(p.Step), attrEvents.Int(len(p.Events)), attrLeaseEpoch.Int64(p.Epoch),
		attrCommitFinish.Bool(p.Status.Terminal())))
	return span
}

// endRunTrace ends r's response span once its goroutine is done: with the
// response's status when the run finished it here, else with why the run
// stopped here (its response goes on elsewhere or after recovery).
func (h *Host) endRunTrace(r *run, err error) {
	if r.trace.span == nil {
		return
	}
	r.mu.Lock()
	finished, fenced, status := r.finished, r.fenced, ""
	if r.st.Response != nil {
		status = r.st.Response.Status
	}
	r.mu.Unlock()
	span := r.trace.span
	r.trace.span = nil
	span.SetAttributes(attrStatus.String(status))
	switch {
	case finished && status == protocol.StatusFailed:
		span.SetStatus(codes.Error, "response failed")
	case finished:
	case fenced:
		span.SetAttributes(attrStopped.String("lease lost"))
	case r.cancelled.Load():
		span.SetAttributes(attrStopped.String("cancelled"))
	case errors.Is(err, errDraining) || h.runCtx.Err() != nil:
		span.SetAttributes(attrStopped.String("host shutting down; left for recovery"))
	default:
		span.SetAttributes(attrStopped.String("left for recovery"))
		if err != nil {
			span.RecordError(err)
		}
	}
	span.End()
}

// runLog returns the host's logger with r's ids and, when traced, its
// response span's trace and span ids.
func (h *Host) runLog(r *run) *slog.Logger {
	log := h.log.With("run_id", r.id, "response_id", r.responseID())
	if r.trace.span != nil {
		if sc := r.trace.span.SpanContext(); sc.IsValid() {
			log = log.With("trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String())
		}
	}
	return log
}
