package agent

import "context"

type ctxKey int

const (
	keyIdempotency ctxKey = iota
	keyMetadata
	keyCallID
	keyHandoffs
)

// withIdempotencyKey returns ctx carrying key, the idempotency key tools
// receive (see IdempotencyKey). Executor sets it to the workflow
// executor's Context.IdempotencyKey (run, superstep, executor), which is
// stable across re-runs of an uncommitted superstep.
func withIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyIdempotency, key)
}

// IdempotencyKey returns the idempotency key in ctx, or "". A tool with
// external effects passes it (with ToolCallID, for several calls in one
// turn) to systems that deduplicate: a superstep that re-runs after a crash
// calls its tools again with the same key.
func IdempotencyKey(ctx context.Context) string {
	s, _ := ctx.Value(keyIdempotency).(string)
	return s
}

// ToolCallID returns the id of the tool call a tool runs for, or "".
func ToolCallID(ctx context.Context) string {
	s, _ := ctx.Value(keyCallID).(string)
	return s
}

// withMetadata returns ctx carrying request metadata, which ChatAgent adds
// to its model requests (for example token_delay_ms for the local model
// server). Later values win over earlier ones and over Options.Metadata.
func withMetadata(ctx context.Context, md map[string]string) context.Context {
	merged := map[string]string{}
	for k, v := range metadataFrom(ctx) {
		merged[k] = v
	}
	for k, v := range md {
		merged[k] = v
	}
	return context.WithValue(ctx, keyMetadata, merged)
}

func metadataFrom(ctx context.Context) map[string]string {
	m, _ := ctx.Value(keyMetadata).(map[string]string)
	return m
}

// withHandoffs returns ctx offering handoff targets to a ChatAgent.
func withHandoffs(ctx context.Context, targets []HandoffTarget) context.Context {
	return context.WithValue(ctx, keyHandoffs, targets)
}

// handoffsFrom returns the handoff targets offered in ctx.
func handoffsFrom(ctx context.Context) []HandoffTarget {
	t, _ := ctx.Value(keyHandoffs).([]HandoffTarget)
	return t
}
