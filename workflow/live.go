package workflow

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrLive marks a superstep abandoned because RunOptions.Live returned an
// error: the superstep is not committed, and Run returns an error wrapping
// ErrLive and the hook's error.
var ErrLive = errors.New("workflow: live event not published")

// LiveFunc receives live events; see RunOptions.Live.
type LiveFunc func(ctx context.Context, ev LiveEvent) error

// LiveEvent is something an executor emitted with Context.EmitLive while its
// superstep runs, before the superstep's commit.
type LiveEvent struct {
	// Step is the superstep, ExecutorID the emitter and Attempt its attempt
	// (from 1) within the step.
	Step       int64
	ExecutorID string
	Attempt    int
	// Seq numbers the attempt's live events from 0.
	Seq int
	// Value is what the executor emitted, or a LiveDiscard.
	Value any
}

// LiveDiscard is the Value of the live event the runner emits when an
// attempt that emitted live events failed: every live event of that
// attempt (same Step, ExecutorID, Attempt) is void. A retry (Attempt+1)
// may follow.
type LiveDiscard struct {
	// Err is why the attempt failed.
	Err error
}

// liveSink delivers one superstep's live events, one call at a time.
type liveSink struct {
	fn     LiveFunc
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu  sync.Mutex
	err error // the first error of fn; the superstep is abandoned
}

// newLiveSink returns the sink of a superstep and the context its
// executors run under (cancelled when fn fails); nil when fn is nil.
func newLiveSink(ctx context.Context, fn LiveFunc) (*liveSink, context.Context) {
	if fn == nil {
		return nil, ctx
	}
	sctx, cancel := context.WithCancelCause(ctx)
	return &liveSink{fn: fn, ctx: sctx, cancel: cancel}, sctx
}

// emit calls fn with ev unless an earlier call failed.
func (s *liveSink) emit(ev LiveEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if err := s.fn(s.ctx, ev); err != nil {
		s.err = fmt.Errorf("%w: step %d executor %q: %w", ErrLive, ev.Step, ev.ExecutorID, err)
		s.cancel(s.err)
		return s.err
	}
	return nil
}

// close releases the sink and returns its error.
func (s *liveSink) close() error {
	if s == nil {
		return nil
	}
	s.cancel(nil)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// EmitLive publishes v as a live event (for example a token of a reply
// being generated) through RunOptions.Live, at once, before the superstep
// commits. Without a Live hook it does nothing and returns nil.
//
// What a host streams to its clients: a string is a text delta of the
// executor's message (emit the words of a text, then yield the whole
// text); an agent.Update of kind UpdateTextDelta, UpdateToolCall,
// UpdateToolResult or UpdateRetry is what an agent executor emits. A host
// ignores other values.
//
// Live events are not outputs: they are not in the Step given to the
// commit hook, not in the checkpoint, and not replayed by Restore. What the
// superstep finally produces must still be yielded (Yield), so the
// committed Step carries it. If the superstep is not committed (a crash, a
// refused commit, cancellation), it re-runs and emits its live events again;
// a consumer must treat the earlier ones as void. If the attempt fails, the
// runner emits a LiveDiscard for it.
//
// An error from the hook abandons the superstep (see ErrLive); EmitLive
// returns it, and the executor should return it. The live events of a
// sub-workflow (AsExecutor) reach the parent's hook as live events of the
// sub-workflow executor whose Value is the inner LiveEvent.
func (c *Context) EmitLive(v any) error {
	if c.live == nil {
		return nil
	}
	ev := LiveEvent{Step: c.step, ExecutorID: c.exec, Attempt: c.attempt, Seq: c.liveSeq, Value: v}
	c.liveSeq++
	return c.live.emit(ev)
}

// discardLive voids the live events of a failed attempt.
func (c *Context) discardLive(err error) {
	if c.live != nil && c.liveSeq > 0 {
		_ = c.live.emit(LiveEvent{Step: c.step, ExecutorID: c.exec, Attempt: c.attempt, Seq: c.liveSeq, Value: LiveDiscard{Err: err}})
	}
}

// CanYield reports whether the executor is declared as output or
// intermediate, so that Yield succeeds.
func (c *Context) CanYield() bool { return c.run.wf.yields[c.exec] != yieldNone }

// HasEdges reports whether the executor has outgoing edges, so that Send
// can deliver.
func (c *Context) HasEdges() bool { return len(c.run.wf.out[c.exec]) > 0 }
