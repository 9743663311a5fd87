package workflow

import (
	"fmt"
	"reflect"
	"slices"
	"time"
)

// Executor is a node of a workflow graph. Handle is called once per queued
// message, in order, within one superstep.
//
// An executor may run more than once for the same superstep: after a failed
// attempt (retries), and after a crash before the superstep was committed.
// Context.IdempotencyKey is stable across those runs; pass it to external
// systems that deduplicate. An Executor value is shared by every run of a
// workflow unless it implements Instancer, so executors without Instancer
// must not keep per-run state in their fields.
type Executor interface {
	ID() string
	Handle(c *Context, msg any) error
}

// InputTyper is implemented by executors that know which message types they
// handle. Build uses it to reject edges whose messages the target cannot
// handle, and the runner checks every delivery against it. Executors that
// do not implement it accept anything. An interface type (such as any) in
// the list accepts every type that implements it.
type InputTyper interface {
	InputTypes() []reflect.Type
}

// outputTyper is implemented by executors that declare which message types
// they send, so Build can check them against their edges' targets.
type outputTyper interface {
	OutputTypes() []reflect.Type
}

// Instancer is implemented by executors with per-run state: NewRun and
// Restore call NewInstance once per run and use the returned executor
// (which must have the same ID) for that run only.
type Instancer interface {
	NewInstance() Executor
}

// Snapshotter is implemented by executors whose per-run state must be in the
// checkpoint. Snapshot must be deterministic (same state, same bytes) and
// return bytes it never modifies afterwards (the runner keeps them);
// Restore receives bytes Snapshot returned, possibly in another process.
// An executor whose attempt fails is restored to its snapshot from before
// the superstep before it is retried.
type Snapshotter interface {
	Snapshot() ([]byte, error)
	Restore(data []byte) error
}

// Retrier is implemented by executors with a retry policy.
type Retrier interface {
	Retry() RetryPolicy
}

// RetryPolicy says how often a failed executor is re-run within the same
// superstep, and how long to wait between attempts.
type RetryPolicy struct {
	// Retries is the number of additional attempts after the first.
	Retries int
	// Backoff is the wait before each retry; zero retries at once.
	Backoff time.Duration
}

// ExecutorOption configures executors made by Func, Map, Handlers and
// Workflow.AsExecutor.
type ExecutorOption struct{ apply func(*funcExecutor) }

// WithRetry makes a failing executor re-run up to n more times in the same
// superstep, waiting backoff between attempts (cut short by cancellation).
func WithRetry(n int, backoff time.Duration) ExecutorOption {
	return ExecutorOption{func(e *funcExecutor) { e.retry = RetryPolicy{Retries: max(n, 0), Backoff: backoff} }}
}

// Handler handles messages of one type; make one with On.
type Handler struct {
	in reflect.Type
	fn func(c *Context, msg any) error
	// answer is T for a handler of Answer[T] (in is then Answer[any]).
	answer reflect.Type
	match  func(msg any) bool
}

// On returns a Handler for messages assignable to In; for In an Answer[T],
// for the answers of type T. In must be registered (RegisterType) unless it
// is an interface type; Build checks it.
func On[In any](fn func(c *Context, in In) error) Handler {
	var zero In
	if ah, ok := any(zero).(answerHandler); ok {
		return Handler{in: anyAnswer, answer: ah.answerOf(),
			match: func(msg any) bool {
				a, ok := msg.(Answer[any])
				if !ok {
					return false
				}
				_, ok = ah.from(a)
				return ok
			},
			fn: func(c *Context, msg any) error {
				a, _ := msg.(Answer[any])
				v, ok := ah.from(a)
				if !ok {
					return fmt.Errorf("%w: %s got an answer of type %T, want %v", ErrMessageType, c.ExecutorID(), a.Value, ah.answerOf())
				}
				return fn(c, v.(In))
			}}
	}
	t := reflect.TypeFor[In]()
	return Handler{in: t, fn: func(c *Context, msg any) error {
		v, ok := msg.(In)
		if !ok && msg != nil {
			return fmt.Errorf("%w: %s got %T, want %v", ErrMessageType, c.ExecutorID(), msg, t)
		}
		return fn(c, v)
	}}
}

// Func returns an executor that handles messages of type In with fn, which
// sends (Context.Send) and yields (Context.Yield) what it wants to. For an
// executor with one result per message, Map is shorter and checked more.
func Func[In any](id string, fn func(c *Context, in In) error, opts ...ExecutorOption) Executor {
	return Handlers(id, []Handler{On(fn)}, opts...)
}

// Map returns an executor that handles messages of type In with fn and
// passes fn's result on: it is sent along the executor's edges when it has
// any, and yielded when the executor is declared in Outputs or
// Intermediate. Build checks that the targets handle Out and that the
// result goes somewhere. fn may also send and yield more through c.
func Map[In, Out any](id string, fn func(c *Context, in In) (Out, error), opts ...ExecutorOption) Executor {
	e := Handlers(id, []Handler{On(func(c *Context, in In) error {
		out, err := fn(c, in)
		if err != nil {
			return err
		}
		return c.result(out)
	})}, opts...).(*funcExecutor)
	e.outputs = append(e.outputs, reflect.TypeFor[Out]())
	e.result = true
	return e
}

// Handlers returns an executor that dispatches each message to the first
// handler whose type it is assignable to, for executors that receive
// several message types (for example their input and an Answer).
func Handlers(id string, hs []Handler, opts ...ExecutorOption) Executor {
	e := &funcExecutor{id: id, handlers: hs}
	for _, h := range hs {
		if h.in != nil && !slices.Contains(e.inputs, h.in) {
			e.inputs = append(e.inputs, h.in)
		}
	}
	for _, o := range opts {
		if o.apply != nil {
			o.apply(e)
		}
	}
	return e
}

// funcExecutor is the executor made by Func and Handlers.
type funcExecutor struct {
	id       string
	handlers []Handler
	inputs   []reflect.Type // the handlers' types, computed once
	outputs  []reflect.Type
	retry    RetryPolicy
	// completion: WithCompletionJournal (see CompletionJournaler).
	completion bool
	// result: made by Map, whose result must go somewhere.
	result bool
}

// ID returns the executor's id.
func (e *funcExecutor) ID() string { return e.id }

// Retry returns the policy set with WithRetry.
func (e *funcExecutor) Retry() RetryPolicy { return e.retry }

// OutputTypes returns the result type of a Map executor.
func (e *funcExecutor) OutputTypes() []reflect.Type { return e.outputs }

// InputTypes returns the handlers' message types.
func (e *funcExecutor) InputTypes() []reflect.Type { return e.inputs }

// Handle calls the first handler whose type msg is assignable to.
func (e *funcExecutor) Handle(c *Context, msg any) error {
	mt := reflect.TypeOf(msg)
	for _, h := range e.handlers {
		if h.fn != nil && h.in != nil && accepts(h.in, mt) && (h.match == nil || h.match(msg)) {
			return h.fn(c, msg)
		}
	}
	if a, ok := msg.(Answer[any]); ok {
		return fmt.Errorf("%w: executor %q has no handler for an answer of type %T", ErrMessageType, e.id, a.Value)
	}
	return fmt.Errorf("%w: executor %q has no handler for %v", ErrMessageType, e.id, mt)
}

// handlesAnswer reports whether a handler of e takes answers of type rt.
func (e *funcExecutor) handlesAnswer(rt reflect.Type) bool {
	for _, h := range e.handlers {
		switch {
		case h.in == nil || !accepts(h.in, anyAnswer):
		case h.answer == nil || h.answer == rt || rt.AssignableTo(h.answer):
			return true
		}
	}
	return false
}

// accepts reports whether a message of type mt can be passed as want.
func accepts(want, mt reflect.Type) bool {
	if mt == nil {
		return want.Kind() == reflect.Interface
	}
	return mt.AssignableTo(want)
}

// executorAccepts reports whether ex can handle messages of type mt.
func executorAccepts(ex Executor, mt reflect.Type) bool {
	it, ok := ex.(InputTyper)
	if !ok {
		return true
	}
	for _, t := range it.InputTypes() {
		if t != nil && accepts(t, mt) {
			return true
		}
	}
	return false
}
