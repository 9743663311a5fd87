// Package workflow is superstep's engine: a graph of executors run in
// supersteps (bulk-synchronous, as in Pregel) with a checkpoint and a
// commit hook at every boundary. It knows nothing of HTTP or storage.
//
//	greet := workflow.Map("greet", func(c *workflow.Context, name string) (string, error) {
//		return "hello, " + name, nil
//	})
//	shout := workflow.Map("shout", func(c *workflow.Context, s string) (string, error) {
//		return strings.ToUpper(s), nil
//	})
//	wf, err := workflow.NewBuilder("hello").SetStart(greet).AddEdge(greet, shout).Outputs(shout).Build()
//	...
//	run, err := wf.NewRun("run-1", "ada")
//	err = run.Run(ctx, commit, nil) // commit gets each superstep's Step: step 2 has Output "HELLO, ADA"
//
// A host (package host) serves such a workflow durably: commit writes the
// checkpoint and the events, and a run resumes from its last commit after
// a crash. The examples show the common shapes: a chain, a fan-out, a
// human approval, and (in package agent) an agent as a step.
//
// A few names to know first: the last committed step is Run.StepNumber
// (Step is the commit record type); typed state reads use GetState[T];
// executors with several message types use Handlers and On; a requester
// receives an Answer after Run.Respond; Workflow.AsExecutor makes a
// sub-workflow; Run.Send queues a further input for the start executor (a
// follow-up turn of a completed run).
//
// # Building
//
// Executors are values implementing Executor, usually made from typed
// functions: Map (one message type, one result passed on), Func (one
// message type; it sends and yields what it wants) or Handlers and On
// (several message types, such as an input and an Answer). The executor
// values are the handles of the graph: a Builder connects them with
// AddEdge (optionally When[T], a typed condition), AddFanOut (every target,
// or those Select[T] picks), AddSwitch (CaseType cases and a default),
// AddFanIn (a barrier that delivers one []any once every source has sent)
// and AddChain, and Outputs and Intermediate take them to declare which
// executors' yielded values are the workflow's outputs and which are
// progress. Build reports every problem at once (errors.Join, each wrapping
// ErrBuild and naming the executor or edge), among them a target that
// cannot handle what its source's Map returns, and a Map result that goes
// nowhere; it never panics on mistakes. A built Workflow is immutable and
// serves any number of concurrent runs.
//
// # Supersteps
//
// NewRun queues the input for the start executor; superstep 1 delivers it.
// In each superstep every executor with queued messages runs, concurrently
// with the others; each handles its own messages in order. What it sends is
// delivered in the next superstep (in executor order, then send order);
// what it writes to shared state (Context.Set) is staged and committed at
// the boundary, so other executors see it in the next superstep; what it
// yields belongs to this superstep. A failing executor (an error or a
// panic, see PanicError) is retried per its RetryPolicy: only that executor
// re-runs, with a clean slate, in the same superstep. When it finally
// fails, the run fails: nothing of that superstep takes effect, and its
// Step carries Status Failed, the error, and the checkpoint of the state
// before it (marked failed). A message no edge delivers, or one its target
// cannot handle, fails the sending executor: messages are never dropped
// silently.
//
// At every boundary Run builds a Step (number, events, checkpoint parts,
// status, annotations) and calls the CommitFunc; superstep N+1 starts only after the
// hook returned nil for N. Silent supersteps are committed too. The run
// stops Completed (nothing queued or pending), Idle (requests for input
// pending: answer with Respond, then call Run again) or Failed; exceeding
// RunOptions.MaxSupersteps (counted after RunOptions.StepBase: over the
// whole run, or per turn) fails it
// with ErrMaxSupersteps. Cancelling ctx makes Run return ctx's error
// without committing the interrupted superstep. Run.Events offers the same
// as an iterator that yields a superstep's events after its commit.
//
// # Human in the loop
//
// RequestInput[T] records a request (id, payload, response type T) and a
// RequestInfo event; the requester must have a handler of Answer[T]
// (On(func(c *Context, a Answer[T]) error)). Pending requests are part of
// the checkpoint. Respond checks the answer's type and queues it for the
// requester, whose Answer[T] handler gets it, typed, in the next superstep.
//
// # Checkpoints
//
// A checkpoint is a []Part: a "header" part (step, status, queued messages,
// fan-in buffers, pending requests, graph fingerprint), one "state/<key>"
// part per shared-state key (its type name, a newline, the value's JSON)
// and one "executor/<id>" part per Snapshotter executor (its Snapshot
// bytes). Encoding is deterministic (encoding/json sorts map keys), so
// unchanged parts have equal bytes and a store can keep them by reference;
// a state value is encoded once, when it is set. JoinParts and SplitParts
// convert between parts and one blob. Every value that can end up in a
// checkpoint (messages, state values, request payloads and answers) must
// have a type registered under a stable name (RegisterType[T]("orders.Item");
// common built-in types are pre-registered), so that restoring in a fresh
// process yields the same Go types, and moving or renaming a type keeps its
// stored runs restorable. Build reports executors whose message types have
// no name; Send, Set, Yield and RequestInput fail on a value whose type has
// none. Checkpoints made before names were explicit (types named by their
// package path) still restore. Values inside
// interface-typed fields (any, map[string]any) come back as JSON's generic
// types (float64, map[string]any, []any). Restore rejects checkpoints of
// another graph (ErrFingerprint) and corrupt bytes (ErrCheckpoint).
//
// # Sub-workflows
//
// AsExecutor turns a Workflow into an executor of another workflow. Each
// message it receives is an input of the inner run, which runs until it is
// Completed or Idle within the parent's superstep; its outputs are sent on
// along the parent's edges (and yielded, if the parent declares the
// executor as output or intermediate). Its requests for input surface as
// the parent's requests (ids prefixed with the executor id and "/"), its
// annotations as the executor's (Annotation.Path says where they were
// made), and its whole state is one executor part of the parent's
// checkpoint. The inner run shares the parent's Invocation.
//
// # Annotations and invocation
//
// What the run's driver (a host) needs to know about a superstep but is not
// state the run continues from, an executor records with Context.Annotate
// (an agent executor annotates the tokens it used): Step.Annotations
// carries it to the commit hook, for that step only, never in the
// checkpoint. In the other direction, the driver tells the run what it is
// working for (the response id, the request's metadata) in
// RunOptions.Invocation, which executors read with Context.Invocation and
// their tools with InvocationFrom. Neither goes through shared state, and
// workflow code does not depend on the host.
//
// # Live events
//
// Committed publication shows a superstep's outputs only after its commit.
// For token streaming, an executor may also emit live events
// (Context.EmitLive) that RunOptions.Live receives at once, before the
// commit. Live events are NOT outputs: the committed Step still carries
// the superstep's outputs (the executor yields the whole reply), the
// checkpoint does not contain them, and an uncommitted superstep re-runs
// and emits them again. A host publishing them must make that visible: it
// logs each live event durably before sending it, and after a crash (or a
// failed commit) before the superstep's commit it appends a reset (the
// last committed output) before the superstep re-runs. A failed attempt's
// live events are voided by a LiveDiscard event. An error from the Live
// hook abandons the superstep (ErrLive) without committing it.
//
// # Tracing
//
// Beneath a recording OpenTelemetry span in the ctx given to Run (a host's
// response span), the runner makes a span per superstep ("superstep",
// attributes superstep.number, and when it ends superstep.committed and
// superstep.status) and per executor attempt ("executor <id>",
// workflow.executor.id, workflow.executor.attempt, superstep.number).
//
// # Caveats
//
// An uncommitted superstep re-runs: after a crash, a cancelled Run or a
// failed commit, the run resumes from its last committed boundary and
// executes the next superstep again, so executors run at least once, not
// exactly once. Use Context.IdempotencyKey (run id, step, executor id),
// which is stable across those re-runs and across retries, with external
// systems that deduplicate. An Executor value is shared by all runs of a
// workflow unless it implements Instancer; keep per-run state in shared
// state or in a Snapshotter instance. A Run is not safe for concurrent use.
// Run waits for every executor of a superstep to return, so executors must
// honour c.Context() cancellation. Values sent, set or yielded are shared,
// not copied: do not modify them afterwards.
package workflow
