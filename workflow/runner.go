package workflow

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/superstep/superstep/internal/invariants"
	"github.com/superstep/superstep/internal/wait"
)

// DefaultMaxSupersteps is the limit used when RunOptions.MaxSupersteps is 0.
const DefaultMaxSupersteps = 1000

// Part is one named piece of a checkpoint. Data is deterministic: the same
// state gives the same bytes, so a store can keep unchanged parts by
// reference. Names: "header", "state/<key>" and "executor/<id>".
type Part struct {
	Name string
	Data []byte
}

// Step is what the runner hands the commit hook at a superstep boundary.
type Step struct {
	// Number is the superstep (the first is 1).
	Number int64
	// Events are the superstep's events in order (see Event).
	Events []Event
	// Checkpoint is the run's state after the superstep.
	Checkpoint []Part
	// Status is the run's status after the superstep.
	Status RunStatus
	// Err is the reason when Status is Failed.
	Err error
	// Annotations are what the superstep's executors recorded with
	// Context.Annotate: executors in the order of the events, each one's
	// in the order made. Only successful attempts' are here; a Failed step
	// keeps those of the executors that succeeded in it, whose work (the
	// tokens they used) did happen. They are not in the checkpoint.
	Annotations []Annotation
}

// CommitFunc is the commit hook. The runner calls it once per superstep,
// silent ones included, and does not begin superstep N+1 until the call for
// N returned nil. An error ends Run with that error; the superstep is then
// not part of the run (the Run is back at its previous boundary). The hook
// is the only way a superstep's outputs leave the runner. It may keep s,
// but must not modify the parts' Data: the runner shares the bytes of
// unchanged parts between steps.
type CommitFunc func(ctx context.Context, s *Step) error

// RunOptions tunes Run; a nil *RunOptions means the defaults.
type RunOptions struct {
	// MaxSupersteps caps the supersteps numbered above StepBase; 0 means
	// DefaultMaxSupersteps. Exceeding the cap fails the run with
	// ErrMaxSupersteps.
	MaxSupersteps int64
	// StepBase is the step the count of MaxSupersteps starts after; 0
	// counts the whole run. A host sets it to the step a turn (a
	// continuation answering pending requests) began at, so that the
	// limit applies per turn and a long conversation is not cut off.
	StepBase int64
	// Live, when set, receives the live events executors emit with
	// Context.EmitLive, as they are emitted, before their superstep
	// commits (for token streaming). It is called from one goroutine at a
	// time, with a context cancelled when the superstep ends. An error
	// abandons the superstep: its executors' context is cancelled, nothing
	// is committed, and Run returns an error wrapping ErrLive. Live events
	// are not outputs; see Context.EmitLive.
	Live LiveFunc
	// Invocation is what the run works for during this call; the runner
	// puts it on its executors' context (see Context.Invocation), with
	// MaxSupersteps set to the run's limit. Nil keeps the Invocation the
	// ctx given to Run carries, if any: a sub-workflow's inner run shares
	// its parent's this way.
	Invocation *Invocation
}

// Run is one execution of a workflow. It is not safe for concurrent use:
// call Run, Respond, Pending and Checkpoint from one goroutine at a time.
type Run struct {
	wf   *Workflow
	id   string
	st   *runState
	inst map[string]Executor // per-run executors (Instancer)
	live *liveSink           // the running superstep's, nil without RunOptions.Live
}

// NewRun starts a run whose start executor receives input in superstep 1.
// input's type must be handled by the start executor and registered.
func (w *Workflow) NewRun(runID string, input any) (*Run, error) {
	if !executorAccepts(w.execs[w.start], reflect.TypeOf(input)) {
		return nil, fmt.Errorf("%w: start executor %q does not handle input %T", ErrMessageType, w.start, input)
	}
	if err := checkEncodable(input); err != nil {
		return nil, fmt.Errorf("workflow: input: %w", err)
	}
	r := w.newRun(runID)
	snaps, err := r.takeSnapshots()
	if err != nil {
		return nil, err
	}
	r.st.snaps = snaps
	r.st.enqueue(w.start, envelope{value: input})
	return r, nil
}

// Send queues msg for the start executor, as a new input of a run that
// already started (for example a follow-up turn of a Completed run); the
// next Run delivers it. The same checks as NewRun apply. A failed run
// takes no input. Send must not be called while Run is running.
func (r *Run) Send(msg any) error {
	if r.st.status == Failed {
		return r.Err()
	}
	if !executorAccepts(r.executor(r.wf.start), reflect.TypeOf(msg)) {
		return fmt.Errorf("%w: start executor %q does not handle input %T", ErrMessageType, r.wf.start, msg)
	}
	if err := checkEncodable(msg); err != nil {
		return fmt.Errorf("workflow: input: %w", err)
	}
	st := r.st.clone()
	st.enqueue(r.wf.start, envelope{value: msg})
	st.status = Running
	r.st = st
	return nil
}

// newRun returns an empty run with fresh per-run executors.
func (w *Workflow) newRun(runID string) *Run {
	r := &Run{wf: w, id: runID, st: newRunState(w), inst: map[string]Executor{}}
	for _, id := range w.order {
		if in, ok := w.execs[id].(Instancer); ok {
			r.inst[id] = in.NewInstance() // Build checked it is non-nil with this id
		}
	}
	return r
}

// executor returns the run's executor for id.
func (r *Run) executor(id string) Executor {
	if ex, ok := r.inst[id]; ok {
		return ex
	}
	return r.wf.execs[id]
}

// ID returns the run id.
func (r *Run) ID() string { return r.id }

// Workflow returns the run's workflow.
func (r *Run) Workflow() *Workflow { return r.wf }

// StepNumber returns the last committed superstep (0 before the first).
func (r *Run) StepNumber() int64 { return r.st.step }

// Status returns the run's status at its last boundary.
func (r *Run) Status() RunStatus { return r.st.status }

// Err returns why the run failed, or nil.
func (r *Run) Err() error {
	if r.st.status != Failed {
		return nil
	}
	return fmt.Errorf("%w%s", ErrRunFailed, strings.TrimPrefix(r.st.failure, ErrRunFailed.Error()))
}

// Run drives supersteps until no message is queued (the run is Completed or
// Idle), the run fails, ctx is cancelled, or commit returns an error.
//
// It returns nil when the run stopped Completed or Idle; the failure
// (wrapping ErrRunFailed and ErrExecutorFailed or ErrMaxSupersteps) after
// committing a Failed step; the commit hook's error, wrapped; or ctx's
// error when cancelled, in which case the interrupted superstep is not
// committed and the Run stays at its last boundary.
func (r *Run) Run(ctx context.Context, commit CommitFunc, opts *RunOptions) error {
	return r.drive(ctx, commit, opts, nil)
}

// drive is Run; stop, when set, is asked before each superstep.
func (r *Run) drive(ctx context.Context, commit CommitFunc, opts *RunOptions, stop func() bool) error {
	if commit == nil {
		return errors.New("workflow: Run: nil CommitFunc")
	}
	if r.st.status == Failed {
		return r.Err()
	}
	limit := int64(DefaultMaxSupersteps)
	if opts != nil && opts.MaxSupersteps > 0 {
		limit = opts.MaxSupersteps
	}
	var base int64
	if opts != nil && opts.StepBase > 0 {
		base = opts.StepBase
	}
	var liveFn LiveFunc
	inv := InvocationFrom(ctx)
	if opts != nil {
		liveFn = opts.Live
		if opts.Invocation != nil {
			inv = *opts.Invocation
		}
	}
	inv.MaxSupersteps = limit
	ctx = WithInvocation(ctx, inv)
	for r.st.hasMessages() && (stop == nil || !stop()) {
		if err := ctx.Err(); err != nil {
			return err
		}
		stepNo := r.st.step + 1
		sctx, span := startStepSpan(ctx, stepNo)
		next, s, err := r.liveSuperstep(sctx, stepNo, base, limit, liveFn)
		if cerr := ctx.Err(); cerr != nil {
			r.reset()
			endStepSpan(span, nil, cerr)
			return cerr
		}
		if err != nil {
			r.reset()
			endStepSpan(span, nil, err)
			return err
		}
		if err := commit(sctx, s); err != nil {
			r.reset()
			endStepSpan(span, nil, err)
			return fmt.Errorf("workflow: commit step %d: %w", stepNo, err)
		}
		endStepSpan(span, s, nil)
		invariants.Check(next.step == r.st.step+1, "workflow: step numbers must increase by one")
		r.st = next
		if next.status == Failed {
			return s.Err
		}
	}
	return nil
}

// liveSuperstep is superstep with a live sink for liveFn: when a live
// event could not be published, the step is abandoned with that error.
func (r *Run) liveSuperstep(ctx context.Context, n, base, limit int64, liveFn LiveFunc) (*runState, *Step, error) {
	sink, sctx := newLiveSink(ctx, liveFn)
	r.live = sink
	next, s, err := r.superstep(sctx, n, base, limit)
	r.live = nil
	if lerr := sink.close(); lerr != nil && ctx.Err() == nil {
		return nil, nil, lerr
	}
	return next, s, err
}

// superstep runs step n and returns the state after it and the Step to
// commit. An error means no Step can be built (the state before the step
// cannot be encoded) and nothing is committed.
func (r *Run) superstep(ctx context.Context, n, base, limit int64) (*runState, *Step, error) {
	if n-base > limit {
		err := fmt.Errorf("%w: %w: limit %d", ErrRunFailed, ErrMaxSupersteps, limit)
		return r.finishStep(n, []Event{SuperstepStarted{Step: n}}, nil, nil, err)
	}
	results := r.executeAll(ctx, n)
	events := []Event{SuperstepStarted{Step: n}}
	var (
		notes   []Annotation
		failure error
	)
	for _, res := range results {
		events = append(events, res.events...)
		if res.buf != nil {
			notes = append(notes, res.buf.annotations...)
		}
		if res.err != nil && failure == nil {
			failure = fmt.Errorf("%w: %w: executor %q: %w", ErrRunFailed, ErrExecutorFailed, res.id, res.err)
		}
	}
	var next *runState
	if failure == nil {
		var err error
		if next, err = r.advance(n, results); err != nil {
			failure = fmt.Errorf("%w: %w", ErrRunFailed, err)
		}
	}
	return r.finishStep(n, events, notes, next, failure)
}

// finishStep encodes the checkpoint of next, or, when the step failed, of
// the state before it marked failed (a failed superstep has no effect
// besides failing the run), and closes the step's events.
func (r *Run) finishStep(n int64, events []Event, notes []Annotation, next *runState, failure error) (*runState, *Step, error) {
	var parts []Part
	if failure == nil {
		var err error
		if parts, err = r.encode(next); err != nil {
			failure = fmt.Errorf("%w: %w", ErrRunFailed, err)
		}
	}
	if failure != nil {
		r.reset()
		next = r.failedState(n, failure)
		events = withoutYields(events)
		var err error
		if parts, err = r.encode(next); err != nil {
			return nil, nil, fmt.Errorf("workflow: step %d: %w (after %w)", n, err, failure)
		}
	}
	events = append(events, SuperstepCompleted{Step: n}, Status{Step: n, Status: next.status, Err: failure})
	return next, &Step{Number: n, Events: events, Checkpoint: parts, Status: next.status, Err: failure, Annotations: notes}, nil
}

// failedState is the state before step n, marked failed at n.
func (r *Run) failedState(n int64, err error) *runState {
	st := r.st.clone()
	st.step, st.status, st.failure = n, Failed, err.Error()
	return st
}

// withoutYields drops outputs, intermediates and requests: a failed
// superstep has no effect besides failing the run.
func withoutYields(events []Event) []Event {
	kept := events[:0:0]
	for _, e := range events {
		switch e.(type) {
		case Output, Intermediate, RequestInfo:
			continue
		}
		kept = append(kept, e)
	}
	return kept
}

// execResult is what one executor did in a superstep.
type execResult struct {
	id     string
	events []Event
	buf    *attemptBuf // the successful attempt's buffer
	err    error
}

// executeAll runs every executor with queued messages concurrently and
// returns their results in executor order.
func (r *Run) executeAll(ctx context.Context, n int64) []execResult {
	var ids []string
	for _, id := range r.wf.order {
		if len(r.st.queues[id]) > 0 {
			ids = append(ids, id)
		}
	}
	results := make([]execResult, len(ids))
	if len(ids) == 1 {
		results[0] = r.execute(ctx, n, ids[0], true)
		return results
	}
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { results[i] = r.execute(ctx, n, id, false) })
	}
	wg.Wait()
	return results
}

// execute runs one executor's queued messages, retrying per its policy;
// alone: it is the only executor of superstep n.
func (r *Run) execute(ctx context.Context, n int64, id string, alone bool) execResult {
	ex := r.executor(id)
	var policy RetryPolicy
	if rt, ok := ex.(Retrier); ok {
		policy = rt.Retry()
	}
	j, done, journaled := r.completionCall(ctx, n, id, ex, alone)
	if journaled {
		if data, ok := j.Replay(ctx, done); ok {
			if res, err := r.replayCompletion(n, id, data); err == nil {
				return res
			}
		}
	}
	res := execResult{id: id, events: make([]Event, 0, 4)}
	for attempt := 1; ; attempt++ {
		actx, span := startExecSpan(ctx, n, id, attempt)
		c := &Context{ctx: actx, run: r, exec: id, step: n, attempt: attempt, buf: &attemptBuf{}, live: r.live}
		res.events = append(res.events, ExecutorInvoked{Step: n, ExecutorID: id, Attempt: attempt})
		err := r.attempt(c, ex)
		if err == nil && journaled {
			err = recordCompletion(ctx, j, done, c)
		}
		endExecSpan(span, err)
		if err == nil {
			res.events = append(res.events, c.buf.events...)
			res.events = append(res.events, ExecutorCompleted{Step: n, ExecutorID: id, Attempt: attempt})
			res.buf = c.buf
			return res
		}
		final := attempt > policy.Retries || ctx.Err() != nil
		c.discardLive(err)
		res.events = append(res.events, ExecutorFailed{Step: n, ExecutorID: id, Attempt: attempt, Err: err, Final: final})
		if final {
			res.err = err
			return res
		}
		if err := r.restoreExecutor(id); err != nil {
			res.err = err
			return res
		}
		if !wait.Sleep(ctx, policy.Backoff) {
			res.err = ctx.Err()
			return res
		}
	}
}

// attempt delivers the executor's queued messages in order, turning a panic
// into an error.
func (r *Run) attempt(c *Context, ex Executor) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{ExecutorID: c.exec, Value: p, Stack: debug.Stack()}
		}
	}()
	for _, env := range r.st.queues[c.exec] {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		if err := ex.Handle(c, env.value); err != nil {
			return err
		}
		if c.buf.err != nil {
			return c.buf.err
		}
	}
	return c.buf.err
}

// advance builds the state after step n from the executors' results.
func (r *Run) advance(n int64, results []execResult) (*runState, error) {
	next := r.st.clone()
	next.step = n
	for _, res := range results {
		invariants.Check(len(next.queues[res.id]) > 0, "workflow: an executor ran without queued messages")
		delete(next.queues, res.id) // each queued message is delivered once
	}
	for _, res := range results {
		for _, key := range res.buf.order {
			delete(next.enc, key)
			if w := res.buf.writes[key]; w.deleted {
				delete(next.state, key)
			} else {
				next.state[key] = w.value
				if w.enc != nil {
					next.enc[key] = w.enc
				}
			}
		}
		next.deliver(res.id, res.buf.sends)
		for _, req := range res.buf.requests {
			if slices.ContainsFunc(next.pending, func(q Request) bool { return q.ID == req.ID }) {
				return nil, fmt.Errorf("executor %q: request id %q is already pending", res.id, req.ID)
			}
			next.pending = append(next.pending, req)
		}
	}
	next.releaseFanIns(r.wf)
	next.settle()
	snaps, err := r.takeSnapshots()
	if err != nil {
		return nil, err
	}
	next.snaps = snaps
	return next, nil
}

// deliver queues the messages source sent, or buffers them in fan-ins.
func (st *runState) deliver(source string, sends []sendRec) {
	for _, s := range sends {
		for _, d := range s.to {
			env := envelope{source: source, value: s.value}
			if d.fanIn < 0 {
				st.enqueue(d.target, env)
			} else {
				st.fanIn[d.fanIn][d.slot] = append(st.fanIn[d.fanIn][d.slot], env)
			}
		}
	}
}

// takeSnapshots returns the current snapshot of every Snapshotter executor.
func (r *Run) takeSnapshots() (map[string][]byte, error) {
	snaps := map[string][]byte{}
	for _, id := range r.wf.order {
		s, ok := r.executor(id).(Snapshotter)
		if !ok {
			continue
		}
		data, err := s.Snapshot()
		if err != nil {
			return nil, fmt.Errorf("%w: executor %q: snapshot: %w", ErrExecutorFailed, id, err)
		}
		snaps[id] = data
	}
	return snaps, nil
}

// restoreExecutor puts a Snapshotter executor back to its committed snapshot.
func (r *Run) restoreExecutor(id string) error {
	s, ok := r.executor(id).(Snapshotter)
	if !ok {
		return nil
	}
	if err := s.Restore(r.st.snaps[id]); err != nil {
		return fmt.Errorf("workflow: executor %q: restore snapshot: %w", id, err)
	}
	return nil
}

// reset puts every Snapshotter executor back to its committed snapshot after
// an uncommitted or failed superstep.
func (r *Run) reset() {
	for _, id := range r.wf.order {
		_ = r.restoreExecutor(id)
	}
}
