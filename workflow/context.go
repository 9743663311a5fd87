package workflow

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
)

// Context is what an executor sees during one attempt in one superstep. It
// is valid only during Handle and must not be used from other goroutines.
type Context struct {
	ctx     context.Context
	run     *Run
	exec    string
	step    int64
	attempt int
	buf     *attemptBuf
	live    *liveSink // nil without RunOptions.Live
	liveSeq int       // live events emitted by this attempt
	// scoped: ctx carries the attempt's journal scope (see
	// journalContext), made on the first call of Context.
	scoped bool
}

// attemptBuf collects what one attempt produced; a failed attempt's buffer
// is discarded, so a retry starts clean.
type attemptBuf struct {
	sends    []sendRec
	events   []Event // outputs, intermediates and requests in order
	writes   map[string]stateWrite
	order    []string // keys of writes in first-write order
	requests []Request
	// annotations are the attempt's Annotate calls (and a sub-workflow's).
	annotations []Annotation
	err         error // first error the executor may have ignored
}

// sendRec is one sent message with its resolved deliveries.
type sendRec struct {
	value any
	to    []delivery
}

// stateWrite is a staged change of a shared-state key.
type stateWrite struct {
	value   any
	deleted bool
	// enc is value's checkpoint part (statePart), when the completion
	// journal already encoded it: the next checkpoint uses it rather than
	// encoding value again (a hosted agent's whole conversation, each turn).
	enc []byte
}

// Context returns the run's context.Context: the one passed to Run, with
// the caller's values, cancelled when the run is cancelled. With a
// journal (WithJournal) it also numbers the attempt's journaled calls
// (Journaled, RunStep).
func (c *Context) Context() context.Context {
	if !c.scoped {
		// Made here, not for every attempt: an executor that never asks
		// for its context journals nothing and pays nothing.
		c.ctx, c.scoped = journalContext(c.ctx, c.step, c.exec, c.attempt), true
	}
	return c.ctx
}

// Step returns the current superstep number (the first is 1).
func (c *Context) Step() int64 { return c.step }

// Attempt returns the attempt number within this superstep (from 1).
func (c *Context) Attempt() int { return c.attempt }

// ExecutorID returns the id of the running executor.
func (c *Context) ExecutorID() string { return c.exec }

// RunID returns the id of the run.
func (c *Context) RunID() string { return c.run.id }

// IdempotencyKey returns a key that is the same for every attempt and every
// re-run (after a crash) of this executor in this superstep of this run,
// and different otherwise: run id, step and executor id.
func (c *Context) IdempotencyKey() string {
	return c.run.id + ":" + strconv.FormatInt(c.step, 10) + ":" + c.exec
}

// fail records err as the attempt's error unless one is recorded, so an
// executor that ignores an error from Send or Set still fails visibly.
func (c *Context) fail(err error) error {
	if c.buf.err == nil {
		c.buf.err = err
	}
	return err
}

// Send sends msg along the executor's outgoing edges; it is delivered in
// the next superstep. A message no edge delivers, one a target cannot
// handle, or one whose type is not registered is an error, and the attempt
// fails even if the executor ignores it.
func (c *Context) Send(msg any) error {
	if err := checkEncodable(msg); err != nil {
		return c.fail(fmt.Errorf("workflow: executor %q: send: %w", c.exec, err))
	}
	ds, err := c.run.wf.route(c.exec, msg)
	if err != nil {
		return c.fail(err)
	}
	c.buf.sends = append(c.buf.sends, sendRec{value: msg, to: ds})
	return nil
}

// Yield publishes v as an output or an intermediate value, depending on how
// the executor was declared (Builder.Outputs, Builder.Intermediate); it is
// an error for an executor declared as neither. Yielded values belong to
// the current superstep's commit.
func (c *Context) Yield(v any) error {
	switch c.run.wf.yields[c.exec] {
	case yieldOutput:
		c.buf.events = append(c.buf.events, Output{Step: c.step, ExecutorID: c.exec, Value: v})
	case yieldIntermediate:
		c.buf.events = append(c.buf.events, Intermediate{Step: c.step, ExecutorID: c.exec, Value: v})
	default:
		return c.fail(fmt.Errorf("workflow: executor %q yields but is declared neither output nor intermediate (Builder.Outputs, Builder.Intermediate)", c.exec))
	}
	return nil
}

// result passes a Map executor's result on: sent along its edges, yielded
// when it is declared.
func (c *Context) result(v any) error {
	if c.HasEdges() {
		if err := c.Send(v); err != nil {
			return err
		}
	}
	if c.CanYield() {
		return c.Yield(v)
	}
	return nil
}

// Get returns the shared-state value of key: as committed at the end of the
// previous superstep, or as this executor set it during this one. Writes of
// other executors in the same superstep are not visible until the next.
func (c *Context) Get(key string) (any, bool) {
	if w, ok := c.buf.writes[key]; ok {
		return w.value, !w.deleted
	}
	v, ok := c.run.st.state[key]
	return v, ok
}

// Set stages key = v; it is committed at the end of the superstep. When
// several executors set one key in a superstep, the one added last to the
// builder wins. v's type must be registered, and v must not be modified
// after Set (checkpoints cache its encoding; share it read-only).
func (c *Context) Set(key string, v any) error {
	if err := checkEncodable(v); err != nil {
		return c.fail(fmt.Errorf("workflow: executor %q: set %q: %w", c.exec, key, err))
	}
	c.stage(key, stateWrite{value: v})
	return nil
}

// Delete stages the removal of key.
func (c *Context) Delete(key string) { c.stage(key, stateWrite{deleted: true}) }

func (c *Context) stage(key string, w stateWrite) {
	if c.buf.writes == nil {
		c.buf.writes = map[string]stateWrite{}
	}
	if _, ok := c.buf.writes[key]; !ok {
		c.buf.order = append(c.buf.order, key)
	}
	c.buf.writes[key] = w
}

// GetState returns the shared-state value of key as a T. ok is false when the
// key is absent; an error reports a value of another type.
func GetState[T any](c *Context, key string) (v T, ok bool, err error) {
	raw, ok := c.Get(key)
	if !ok {
		return v, false, nil
	}
	v, isT := raw.(T)
	if !isT && raw != nil {
		return v, true, fmt.Errorf("workflow: state %q holds %T, not %v", key, raw, reflect.TypeFor[T]())
	}
	return v, true, nil
}

// errNoAnswerHandler is returned by RequestInput when the executor could not
// receive the answer.
var errNoAnswerHandler = errors.New("executor has no handler for its answer (On(func(*Context, Answer[T]) error))")
