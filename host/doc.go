// Package host drives workflow runs durably: it creates responses, runs
// supersteps, commits each one through the store before anyone can read
// it, cancels, recovers unfinished runs and keeps their leases. It does no
// HTTP (package responses does) and builds no frame or Response object:
// what a superstep means for the stream is the projector's (package
// protocol); host decides when it is durable.
//
// # Lifecycle of a response
//
// Create validates the request, then writes the response record, its
// response.created event (sequence 0), the run's step-0 checkpoint and the
// lease in one store call, and returns (CreateAndWait, a blocking request
// whose caller learns the id only with the finished response, writes
// that call with the first commit instead, in one transaction:
// deferred.go). A goroutine owned by the Host then
// drives the run: the workflow's commit hook hands each superstep to the
// projector (protocol.ProjectStep, through the adapter in steps.go), which
// makes message items of its outputs and function_call items of its
// requests for input, and commits the frames and the next snapshot with the
// checkpoint in one store.Commit (fenced by the lease epoch, retried with
// backoff on transient errors). Readers (Events, Wait) see only what is
// durable, so nothing is shown before its commit: for a run driven here,
// the run publishes each commit's frames (and live appends) to an
// in-memory feed after the store write returned, and readers take them
// from there (a bounded tail; Wait gets the terminal response as its
// commit wrote it); readers behind that tail, of runs driven elsewhere, or
// of a run that stopped here read the store's log. Get reads the store:
// a cancel or delete made through another host is only there. The first commit carries
// response.in_progress; the last one the terminal event
// (response.completed — also when the run idles with pending requests —,
// response.incomplete, response.failed, or response.cancelled); that
// commit also gives the run's lease up (store.CommitParams.Release), so a
// finished response costs no write after it and another host can take the
// run's next turn at once.
//
// A follow-up Create naming previous_response_id answers the pending
// requests with function_call_output items and continues the same run
// from its checkpoint under a new response. An agent (RegisterAgent; a
// workflow, agents in it or not, is registered with RegisterWorkflow) is
// hosted as a one-executor
// workflow whose executor keeps the conversation in the run's state
// (agent.WithMemory): there is one run path, and a follow-up of a
// completed response sends its input to the run as the next turn.
//
// The request's model settings (function tools, tool_choice,
// parallel_tool_calls, instructions, text.format, max_output_tokens,
// temperature, top_p) reach a plain agent that honours them (an
// agent.ParamsChecker such as a ChatAgent) as the agent.ModelParams in the
// Params of its workflow.Invocation; the model's call of a client tool
// completes the response with a function_call item, which the client
// answers in a follow-up. A model that cannot honour a setting refuses the
// request with an *InputError before anything is stored (instructions
// apart, which every model echoes).
//
// # Publication modes
//
// metadata.publication selects how a response's events reach readers.
// "committed" (the default, unless the model was registered with
// WithPublication): a superstep's events are in the log, and so visible,
// only after its commit. "live": text deltas and tool calls executors emit with
// workflow.Context.EmitLive are appended to the log as they come (fenced by
// the lease, outside a commit; those emitted while an append is in flight
// go together in the next one, and EmitLive does not wait for them) in an
// open message item, which the superstep's commit closes with the yielded
// text once they are all durable. If a live superstep is not
// committed (crash, hand-over, failed attempt), a reset
// response.in_progress carrying the last committed output is appended
// before it re-runs: the log stays append-only and every reader, resuming
// anywhere, sees the same history.
//
// # Recovery and fencing
//
// Start claims every run that needs a host and resumes each from its own
// last commit (store.CheckpointGetLast through the run record). With an
// exclusive store (Config.ExclusiveStore, or a store implementing
// interface{ Exclusive() bool }) every unfinished run is claimed at once,
// whatever lease a dead process left. A run that cannot be resumed is
// logged, counted and released for a later attempt; Start fails only when
// the store does. A lease is renewed every LeaseDuration/3; a run whose
// lease another host took stops without committing anything more, and a
// run whose lease could not be renewed for 3/4 of LeaseDuration stops
// before the lease can expire. A background loop claims runs whose lease
// expired or that are unowned (handed back, or queued by a host at
// Config.MaxRuns); cancels recorded through other hosts are polled every
// CancelPollInterval. With a store.Notifier (PostgreSQL) both happen at
// once on the store's notices and the polls are fallbacks. The host
// registers itself in a store.HostRegistry (Hosts lists idle hosts too).
// Shutdown releases the leases of the runs it stops, so another host can
// claim them at once, and leaves the registry.
//
// # Failures
//
// A failed commit is retried with exponential backoff (CommitBackoff,
// capped at CommitBackoffMax); an attempt that failed but did commit is
// recognised. A transient failure (store.ErrUnavailable: connection lost,
// timeout, serialization failure, disk full, database locked) is retried
// for as long as the run holds its lease and never fails the response:
// when the lease guard stops the run, or its driver ends with such an
// error, the run is handed back for recovery. Other failures are retried
// CommitRetries times, then the response fails loudly (response.failed);
// if even that cannot be committed, the run is handed back for recovery.
// In-memory state changes only after a commit succeeded. Every failure is
// logged and counted in superstep_host_failures_total{op}.
//
// Tests inject failures at named points (FaultPoint, on internal/fault)
// through Config.Test.FaultFunc; a binary built with -tags faults also
// reads one from the SUPERSTEP_HOST_FAULT environment variable (see
// FaultEnv), including "crash", which kills the process at the point.
//
// # Storage
//
// A run's checkpoint history is pruned to Config.KeepCheckpoints (default
// 2) by every CheckpointPruneEvery-th commit and the commit that finishes a
// response, inside that commit's transaction (no extra write); the store keeps the
// last commit's checkpoint, which recovery and continuation read, and each
// response's CommitStep whatever KeepCheckpoints says. With
// Config.Retention, a background loop deletes finished responses completed
// longer ago than Retention, in batches, through store.ResponsePruner: not
// those of active runs; a completed head goes too, ending a conversation
// (previous_response_id) or a workflow's wait for input as the OpenAI
// API's retention does; a run whose responses are all gone goes with its
// checkpoints. Its failures are logged and counted (op retention); they
// never fail a run.
//
// # Caveats
//
// A superstep that was not committed runs again after a crash or a
// hand-over: executors' external effects are at-least-once. Executors get a
// stable key per run, superstep and executor (workflow.Context's
// IdempotencyKey) to pass to systems that deduplicate. A plain agent's turn
// is one superstep: a crash mid-turn re-runs the whole turn.
package host
