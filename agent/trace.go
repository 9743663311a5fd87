package agent

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Tracing (OpenTelemetry) with the GenAI semantic conventions: a span per
// model call ("chat {model}") and per tool call the agent runs
// ("execute_tool {name}"). Spans are made only beneath a recording span in
// the turn's ctx (a host's executor span), with that span's
// TracerProvider; without one a call costs a context lookup.

const tracerName = "github.com/superstep/superstep/agent"

// GenAI semantic-convention attributes (gen_ai.*).
const (
	attrOperationName = attribute.Key("gen_ai.operation.name")
	attrProviderName  = attribute.Key("gen_ai.provider.name")
	attrRequestModel  = attribute.Key("gen_ai.request.model")
	attrMaxTokens     = attribute.Key("gen_ai.request.max_tokens")
	attrInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	attrOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	attrFinishReasons = attribute.Key("gen_ai.response.finish_reasons")
	attrToolName      = attribute.Key("gen_ai.tool.name")
	attrToolCallID    = attribute.Key("gen_ai.tool.call.id")
	attrToolType      = attribute.Key("gen_ai.tool.type")
	attrAgentName     = attribute.Key("gen_ai.agent.name")
	attrAttempts      = attribute.Key("superstep.model.attempts")
	attrTruncated     = attribute.Key("superstep.model.truncated_items")
)

// startModelSpan starts the span of one model call (its retries included);
// nil when ctx has no recording span.
func (t *chatTurn) startModelSpan(req *modelRequest) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(t.ctx)
	if !parent.IsRecording() {
		return t.ctx, nil
	}
	attrs := []attribute.KeyValue{attrOperationName.String("chat"), attrProviderName.String("openai"),
		attrRequestModel.String(req.model), attrAgentName.String(t.a.opts.Name)}
	if req.maxTokens > 0 {
		attrs = append(attrs, attrMaxTokens.Int(req.maxTokens))
	}
	if req.dropped > 0 {
		attrs = append(attrs, attrTruncated.Int(req.dropped))
	}
	return parent.TracerProvider().Tracer(tracerName).Start(t.ctx, "chat "+req.model,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endModelSpan ends a model call's span with its reply or error.
func endModelSpan(span trace.Span, rep *modelReply, attempts int, err error) {
	if span == nil {
		return
	}
	span.SetAttributes(attrAttempts.Int(attempts))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.End()
		return
	}
	span.SetAttributes(attrInputTokens.Int64(rep.usage.InputTokens), attrOutputTokens.Int64(rep.usage.OutputTokens),
		attrFinishReasons.StringSlice([]string{finishReason(rep)}))
	span.End()
}

// finishReason is the reply's finish reason in the model API's words:
// "length" or "content_filter" for a reply cut short, "tool_calls" when
// it calls tools, else "stop".
func finishReason(rep *modelReply) string {
	switch {
	case rep.reason == ReasonMaxOutputTokens:
		return "length"
	case rep.reason != "":
		return strings.ToLower(rep.reason)
	case len(rep.calls) > 0:
		return "tool_calls"
	}
	return "stop"
}

// startToolSpan starts the span of one tool call the agent runs; nil when
// ctx has no recording span.
func (t *chatTurn) startToolSpan(c toolCall) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(t.ctx)
	if !parent.IsRecording() {
		return t.ctx, nil
	}
	return parent.TracerProvider().Tracer(tracerName).Start(t.ctx, "execute_tool "+c.Name,
		trace.WithAttributes(attrOperationName.String("execute_tool"), attrToolName.String(c.Name),
			attrToolCallID.String(c.ID), attrToolType.String("function")))
}

// endToolSpan ends a tool call's span; err is the tool's error (told to
// the model) or the turn's cancellation.
func endToolSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
