package host

import "context"

// RunInfo is what an executor can learn about the run it works for, through
// its context (workflow.Context.Context()).
type RunInfo struct {
	ResponseID string // the response whose events this superstep writes
	RunID      string
	// Metadata is the request metadata of that response. Do not modify it.
	Metadata map[string]string
	// MaxSupersteps is the host's superstep limit per response
	// (Config.MaxSupersteps).
	MaxSupersteps int
}

type runInfoKey struct{}

// WithRunInfo returns ctx carrying info; the host sets it on every run's
// context, tests use it to run executors directly.
func WithRunInfo(ctx context.Context, info RunInfo) context.Context {
	return context.WithValue(ctx, runInfoKey{}, info)
}

// RunInfoFrom returns the RunInfo carried by ctx.
func RunInfoFrom(ctx context.Context) (RunInfo, bool) {
	info, ok := ctx.Value(runInfoKey{}).(RunInfo)
	return info, ok
}
