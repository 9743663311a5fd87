package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/workflow"
)

// Reasons a run's goroutine stops without finishing its response.
var (
	errRunCancelled = errors.New("host: response cancelled")
	errDraining     = errors.New("host: shutting down")
	errLeaseLost    = errors.New("host: lease lost")
)

// run is a run this host drives: its lease, its head response's state as of
// the last commit, and the goroutine that advances it.
type run struct {
	id    string
	model *model
	epoch int64
	// leaseExpires is when the lease of the claim (or creation) that made
	// this run expires, as the store said; renewals are tracked by the
	// lease guard (leaseTracker).
	leaseExpires time.Time
	info         runInfo

	ctx    context.Context // cancelled on cancel, fencing and hard stop
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when the goroutine exited
	// fencing is set by the first stop for a lost lease, so that the
	// loops stop a run once and never wait for its lock to do so.
	fencing atomic.Bool
	// cancelled: a cancel of the response is known here (local, noticed,
	// or refused by the store). Atomic, so that a cancel never waits for
	// the lock a commit holds: once the cancel is recorded, the store
	// refuses every commit but the cancelled one anyway.
	cancelled atomic.Bool

	liveMode bool // publication mode live (see PublicationLive)

	// pending: the run's create is not written yet (deferCreate); it is
	// written with the first commit, or alone before any other write
	// (createMu serialises that). The store knows nothing of the run
	// meanwhile: the lease loops skip it (runsSnapshot).
	pending  atomic.Bool
	createMu sync.Mutex
	create   *store.ResponseCreateParams // guarded by createMu; nil once written

	// feed serves the head response's durable events and terminal state
	// to this host's readers from memory; closed when the run stops here.
	feed *feed

	// mu serialises the run's commits and guards the state below.
	mu       sync.Mutex
	live     protocol.Live // live items of the running superstep (queued ones included)
	liveQ    liveQueue     // live frames not durable yet
	fenced   bool
	finished bool // the head response reached a terminal status
	// released: the commit that finished the head response also gave the
	// lease up (store.CommitParams.Release); no release follows it.
	released bool
	// st is the head response's projection as of the last commit: its
	// snapshot, next sequence number, the run's last step and the
	// response's usage (kept in the record's usage field, which recovery
	// reads back, until the snapshot shows it once terminal).
	st        protocol.State
	lastParts []store.Part
	// startStep is the head response's StartStep: Config.MaxSupersteps
	// counts the supersteps after it (a limit per response).
	startStep int64
	// conv is the conversation the head response is a turn of (nil for
	// none): its terminal commit appends the turn's items to it.
	conv  *convTurn
	trace runTrace // tracing state (see trace.go)
	// journal is the run's journal inside the superstep (nil: none).
	journal *runJournal
	// replaying: r.live holds items read back from the log of a
	// recovered superstep (loadReplay) that it has not reproduced in full
	// yet. Guarded by mu.
	replaying bool
}

// runInfo is what a run's driver tells its executors about the response
// they work for (as a workflow.Invocation).
type runInfo struct {
	ResponseID string
	// Metadata is the request metadata of that response. Do not modify it.
	Metadata map[string]string
	// Params are its model settings, for a model that takes them (see
	// modelParams), else nil.
	Params *agent.ModelParams
}

// responseID returns the run's head response id.
func (r *run) responseID() string { return r.info.ResponseID }

// requestCancel stops the run at its next boundary (its executors see
// their context cancelled at once), without waiting for its lock.
func (r *run) requestCancel() {
	r.cancelled.Store(true)
	r.cancel(errRunCancelled)
}

// startRun registers r and starts its goroutine, which calls drive. When
// the run's previous driver is still registered (it finished the previous
// response and is releasing its lease, or it was fenced), startRun waits for
// it to exit first: the store already made sure it commits nothing more.
func (h *Host) startRun(r *run, drive func(ctx context.Context) error) error {
	for {
		h.mu.Lock()
		if h.mu.closed {
			h.mu.Unlock()
			endSpan(r.trace.span, ErrHostClosed)
			return ErrHostClosed
		}
		old, ok := h.mu.runs[r.id]
		if !ok {
			break
		}
		h.mu.Unlock()
		<-old.done
	}
	h.mu.runs[r.id] = r
	h.runWG.Add(1)
	h.mu.Unlock()
	h.metrics.activeRuns.Inc()
	go func() {
		defer h.runWG.Done()
		defer close(r.done)
		defer h.test.runExited.Signal(r.id)
		defer h.metrics.activeRuns.Dec()
		defer h.forgetRun(r)
		err := drive(r.ctx)
		h.afterDrive(r, err)
		h.endRunTrace(r, err)
	}()
	return nil
}

// newRun returns a run driven under epoch, positioned after lastStep.
func (h *Host) newRun(m *model, rr *store.Response, snap *protocol.Response, runID string, lease store.Lease, lastStep int64, parts []store.Part) *run {
	info := runInfo{ResponseID: rr.ID, Metadata: snap.Metadata}
	ctx, cancel := context.WithCancelCause(h.runCtx)
	// The mode decided at create is in the record; a response stored
	// before the record kept it gets it as it was decided then. (The
	// metadata was validated at create: an unknown value cannot be here.)
	mode := rr.Publication
	if mode == "" {
		mode, _ = publicationMode(snap.Metadata, m.publication)
	}
	r := &run{id: runID, model: m, epoch: lease.Epoch, leaseExpires: lease.ExpiresAt, info: info, ctx: ctx, cancel: cancel,
		liveMode: mode == PublicationLive, done: make(chan struct{}),
		st:        protocol.State{Response: snap, NextSeq: rr.NextSeq, Step: lastStep},
		lastParts: parts, startStep: rr.StartStep, feed: newFeed(rr.ID, rr.NextSeq), conv: turnOf(rr, snap)}
	r.liveQ.cond = sync.NewCond(&r.mu)
	r.journal = h.newJournal(r)
	if len(rr.Usage) > 0 && !rr.Status.Terminal() {
		if err := json.Unmarshal(rr.Usage, &r.st.Usage); err != nil {
			h.log.Warn("host: cannot read the response's usage so far", "response_id", rr.ID, "err", err)
		}
	}
	return r
}

// forgetRun removes r from the host's runs.
func (h *Host) forgetRun(r *run) {
	h.mu.Lock()
	if h.mu.runs[r.id] == r {
		delete(h.mu.runs, r.id)
	}
	h.mu.Unlock()
	r.feed.close() // readers go on from the store
	r.cancel(context.Canceled)
	if h.cfg.MaxRuns > 0 {
		h.kickClaim() // a slot freed: claim queued runs
	}
}

// lookupRun returns the run driven here whose head is responseID.
func (h *Host) lookupRun(runID, responseID string) *run {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.mu.runs[runID]
	if r == nil || r.responseID() != responseID {
		return nil
	}
	return r
}

// driveWorkflow runs wr until it finishes, idles, fails, is cancelled or
// the host stops it; every superstep is committed by commitStep.
func (h *Host) driveWorkflow(r *run, wr *workflow.Run) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		inv := &workflow.Invocation{ID: r.info.ResponseID, Metadata: r.info.Metadata}
		if r.info.Params != nil {
			inv.Params = r.info.Params // never a typed nil
		}
		return wr.Run(workflow.WithJournal(r.runContext(ctx), r.journal.workflow()), func(ctx context.Context, s *workflow.Step) error {
			return h.commitStep(ctx, r, s)
		}, &workflow.RunOptions{MaxSupersteps: int64(h.cfg.MaxSupersteps), StepBase: r.startStep,
			Live: h.liveHook(r), Invocation: inv})
	}
}

// afterDrive finishes a run whose driver returned err: commits the
// cancelled terminal event, fails the response loudly, or hands the run
// back for recovery; then releases the lease (unless the terminal commit
// did).
func (h *Host) afterDrive(r *run, err error) {
	h.stopLive(r) // no live append may follow (or race) the terminal commit
	err = journalCause(r, err)
	r.mu.Lock()
	defer r.mu.Unlock()
	log := h.runLog(r)
	switch {
	case r.finished:
		if err != nil && !errors.Is(err, errDraining) {
			log.Debug("host: run finished", "err", err)
		}
	case r.fenced || errors.Is(err, store.ErrFenced):
		r.fenced = true
		h.leaseEnded(r, err, log)
		return
	case r.cancelled.Load() || errors.Is(err, store.ErrCancelled):
		// Cancelled here, or recorded through another host and refused
		// by the store (a commit or live append): finish it as cancelled.
		r.cancelled.Store(true)
		err = h.finishLocked(r, protocol.StatusCancelled, nil)
		if errors.Is(err, store.ErrNotFound) {
			log.Info("host: response deleted while being cancelled; run stopped")
			return
		}
	case errors.Is(err, errDraining) || context.Cause(r.ctx) == errDraining || h.runCtx.Err() != nil:
		log.Info("host: run stopped for shutdown; left for recovery", "step", r.st.Step)
		err = nil
	case errors.Is(err, store.ErrNotFound):
		log.Info("host: response deleted while running; run stopped")
		return
	default:
		if errors.Is(err, store.ErrUnavailable) {
			// A transient failure never fails the response: the run is
			// recovered from its last commit once the store is back (the
			// release below fails too while it is unreachable; then the
			// lease expires).
			log.Warn("host: store unavailable; handing the run back for recovery", "err", err, "step", r.st.Step)
			err = nil
			break
		}
		log.Error("host: run failed", "err", err, "step", r.st.Step)
		werr, _ := clientError(err, true) // err, logged above, is the host's or the store's: not for clients
		err = h.finishLocked(r, protocol.StatusFailed, werr)
	}
	if errors.Is(err, store.ErrCancelled) && !r.finished {
		// A cancel was recorded before the finishing commit: the store
		// takes only the cancelled one.
		r.cancelled.Store(true)
		err = h.finishLocked(r, protocol.StatusCancelled, nil)
	}
	if err != nil && !r.finished {
		h.metrics.failed(opFinish)
		log.Error("host: cannot finish the response; handing the run back for recovery", "err", err)
	}
	h.releaseLease(r)
}

// releaseLease gives r's lease up so the run can be claimed at once,
// unless the commit that finished its response did so. Called with r.mu
// held.
func (h *Host) releaseLease(r *run) {
	if r.released || r.pending.Load() {
		return // given up by the finishing commit, or never written
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), 5*time.Second)
	defer cancel()
	err := h.store.LeaseRelease(ctx, &store.LeaseParams{RunID: r.id, Owner: h.cfg.HostID, Epoch: r.epoch})
	if err != nil && !errors.Is(err, store.ErrFenced) && !errors.Is(err, store.ErrNotFound) {
		h.metrics.failed(opLeaseRelease)
		h.log.Warn("host: lease release failed", "run_id", r.id, "err", err)
	}
}

// commitStep is the workflow's commit hook: the projector turns the step
// into frames and the next snapshot, which are committed with the checkpoint;
// only then does the in-memory state change.
func (h *Host) commitStep(ctx context.Context, r *run, s *workflow.Step) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.trace.span != nil {
		r.trace.stepCtx = ctx // the superstep's span: the commit's parent
		defer func() { r.trace.stepCtx = nil }()
	}
	// The step's events follow its live events in seq: wait until those
	// are durable (a failed append fails the step, as it would have failed
	// the EmitLive that queued it).
	if err := r.awaitLive(); err != nil {
		return h.cancelledByStore(r, err)
	}
	if r.fenced {
		return errLeaseLost
	}
	if r.cancelled.Load() {
		return errRunCancelled
	}
	usage, inc := agent.StepUsage(s)
	var cut *protocol.Incomplete
	if inc != nil && inc.Reason != "" {
		cut = &protocol.Incomplete{Executor: inc.ExecutorID, Reason: inc.Reason}
	}
	in := stepInput(s, r.model.conversation, usage, cut, time.Now())
	if s.Err != nil && in.Error != nil && in.Error.Message != s.Err.Error() {
		h.log.Warn("host: run failed; the response shows what failed, the cause is here", "run_id", r.id,
			"response_id", r.responseID(), "step", s.Number, "err", s.Err)
	}
	// Items a recovered superstep did not reproduce are closed with the
	// step's outputs as the log shows them when they line up, and voided
	// otherwise (protocol.LiveFromLog).
	c, err := protocol.ProjectStep(r.st, r.live, &in)
	if err != nil {
		return err
	}
	if err := h.commitLocked(r, toStoreParts(s.Checkpoint), &c); err != nil {
		return h.cancelledByStore(r, err)
	}
	if !r.finished && h.isDraining() {
		return errDraining
	}
	return nil
}

// cancelledByStore turns a write the store refused because the response's
// cancel is recorded (through any host) into a cancel of r, which then
// commits the cancelled terminal event. Called with r.mu held.
func (h *Host) cancelledByStore(r *run, err error) error {
	if !errors.Is(err, store.ErrCancelled) {
		return err
	}
	if r.cancelled.CompareAndSwap(false, true) { // not cancelled here: through another host
		h.metrics.cancelsSeen.Inc()
		h.log.Info("host: cancel recorded through another host", "run_id", r.id, "response_id", r.responseID())
	}
	return errRunCancelled
}

// finishLocked commits a terminal event for r's response with no workflow
// step behind it (cancel, unrecoverable failure): the checkpoint repeats the
// last committed one at the next step. Items the interrupted step published
// live are closed as the log holds them (the driver returned, so no live
// append is in flight).
func (h *Host) finishLocked(r *run, status string, e *protocol.Error) error {
	if r.finished {
		return nil
	}
	c, err := protocol.ProjectEnd(r.st, r.liveQ.durable, status, e, time.Now())
	if err != nil {
		return err
	}
	return h.commitLocked(r, r.lastParts, &c)
}

// commitLocked commits c, one step of r with checkpoint parts, and on
// success makes it r's state.
func (h *Host) commitLocked(r *run, parts []store.Part, c *protocol.Commit) error {
	next := c.Next
	status := store.Status(next.Response.Status)
	p := &store.CommitParams{RunID: r.id, Epoch: r.epoch, Step: next.Step, Checkpoint: parts,
		ResponseID: next.Response.ID, Events: toEventInputs(c.Frames), Status: status,
		Snapshot: c.Snapshot, Error: c.Error, Usage: c.Usage, PruneKeep: h.pruneKeep(next.Step, status.Terminal()),
		// The commit that finishes the response gives the lease up too:
		// nothing of the run is written after it here.
		Release: status.Terminal(), JournalPrune: r.journal.prune()}
	if status.Terminal() {
		if r.conv != nil {
			var err error
			if p.Conversation, err = h.conversationAppend(r, status, next.Response); err != nil {
				return err
			}
		}
		p.PendingCalls = h.pendingCalls(status, next.Response)
		p.Webhooks = h.webhooks(next.Response)
	}
	if err := h.commit(r, p, next.NextSeq); err != nil {
		if errors.Is(err, store.ErrFenced) {
			r.fenced = true
		}
		return err
	}
	r.st, r.lastParts = next, parts
	r.journal.committed(next.Step)
	r.live = protocol.Live{} // the step's live items are closed (or void)
	r.replaying = false
	r.finished = status.Terminal()
	r.released = p.Release
	h.webhooksEnqueued(p)
	// Durable now: readers here may see it.
	r.feed.publish(c.Frames, next.Step)
	if r.finished {
		r.feed.finish(&feedFinal{status: status, snapshot: p.Snapshot, errJSON: p.Error, usage: p.Usage,
			nextSeq: next.NextSeq, commitStep: next.Step, at: time.Now()})
	}
	h.test.committed.Signal(next.Step)
	return nil
}

// commit writes p, retrying failed attempts with exponential backoff
// from CommitBackoff, capped at CommitBackoffMax; nextSeq is the
// response's NextSeq once p is committed. It is called with r.mu held.
//
// A transient failure (store.ErrUnavailable) is retried for as long as
// the run holds its lease: between attempts commit releases r.mu (see
// commitWait), so the lease guard can stop the run, and then commit
// returns the failure without having written p and the run is left for
// recovery; it never ends in a failed response. Other failures are
// retried CommitRetries times. Fencing, conflicts and deleted responses
// are not retried. A conflict after a failed attempt is checked against
// the store: the earlier attempt may have committed after all (the
// failure was in reporting it).
func (h *Host) commit(r *run, p *store.CommitParams, nextSeq int64) error {
	ctx := h.commitContext(h.runCtx, r, p) // a cancel must not abort a commit; a hard stop does
	backoff := h.cfg.CommitBackoff
	failures := 0 // failed attempts not known to be transient
	for attempt := 0; ; attempt++ {
		err := h.commitAttempt(ctx, r, p)
		if err == nil {
			h.metrics.commits.Inc()
			return nil
		}
		h.metrics.commitFailures.Inc()
		h.metrics.failed(opCommit)
		transient := errors.Is(err, store.ErrUnavailable)
		retryable := transient || (!errors.Is(err, store.ErrFenced) && !errors.Is(err, store.ErrNotFound) &&
			!errors.Is(err, store.ErrCancelled))
		if errors.Is(err, store.ErrConflict) {
			// A conflict is final unless the store still fits p (a
			// transient serialization failure) or already holds it (an
			// earlier attempt committed after all).
			committed, fits := h.commitState(ctx, r, p, nextSeq)
			if committed {
				h.log.Info("host: an earlier commit attempt had succeeded", "run_id", p.RunID, "step", p.Step)
				h.metrics.commits.Inc()
				return nil
			}
			retryable = fits
			if !fits && h.storeUnavailable(ctx, p.RunID) {
				// The check could not read the store: make it again.
				transient, retryable = true, true
			}
		}
		if !transient {
			failures++
		}
		if !retryable || failures > h.cfg.CommitRetries {
			if errors.Is(err, store.ErrCancelled) || errors.Is(err, store.ErrNotFound) {
				// Not a failure: the response was cancelled or deleted
				// meanwhile; the caller finishes or stops the run.
				h.log.Info("host: commit refused: the response was cancelled or deleted", "run_id", p.RunID, "step", p.Step, "err", err)
				return fmt.Errorf("host: commit run %s step %d: %w", p.RunID, p.Step, err)
			}
			h.log.ErrorContext(ctx, "host: commit failed", "run_id", p.RunID, "step", p.Step, "attempt", attempt+1, "err", err)
			return fmt.Errorf("host: commit run %s step %d: %w", p.RunID, p.Step, err)
		}
		h.log.WarnContext(ctx, "host: commit failed; retrying", "run_id", p.RunID, "step", p.Step, "attempt", attempt+1,
			"backoff", backoff, "transient", transient, "err", err)
		if stop := h.commitWait(r, backoff); stop != nil {
			h.log.Warn("host: commit not retried: the run is stopping; left for recovery", "run_id", p.RunID,
				"step", p.Step, "attempt", attempt+1, "stop", stop, "err", err)
			return fmt.Errorf("host: commit run %s step %d: %w (stopped: %w)", p.RunID, p.Step, err, stop)
		}
		backoff = min(backoff*2, h.cfg.CommitBackoffMax)
	}
}

// commitAttempt makes one attempt to write p, r's commit, with the fault
// points around the store call.
func (h *Host) commitAttempt(ctx context.Context, r *run, p *store.CommitParams) error {
	span := startCommitSpan(ctx, p) // nil when not traced
	f := &Fault{Point: FaultCommitBefore, RunID: p.RunID, ResponseID: p.ResponseID, Step: p.Step}
	if err := h.fault(ctx, f); err != nil {
		endSpan(span, err)
		return err
	}
	start := time.Now()
	res, err := h.storeCommit(ctx, r, p)
	h.metrics.commitSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		endSpan(span, err)
		return err
	}
	h.metrics.checkpointsPruned.Add(float64(res.Pruned))
	f.Point = FaultCommitAfter
	err = h.fault(ctx, f)
	endSpan(span, err)
	return err
}

// commitState compares the store with p, r's commit made under p.Epoch:
// committed when the run's last step is p's and the response's log ends
// where p's events end (an attempt that reported failure committed after
// all; with r's pending create, which is then written too); fits when the
// run is still at the step before p and the log where p's events begin
// (the attempt can be made again).
func (h *Host) commitState(ctx context.Context, r *run, p *store.CommitParams, nextSeq int64) (committed, fits bool) {
	run, err := h.store.RunGet(ctx, p.RunID)
	if err != nil || run.Lease.Epoch != p.Epoch {
		return false, false
	}
	resp, err := h.store.ResponseGet(ctx, p.ResponseID)
	if err != nil {
		return false, false
	}
	switch run.LastStep {
	case p.Step:
		if resp.NextSeq != nextSeq {
			return false, false
		}
		if r.pending.Load() {
			r.createMu.Lock()
			err := h.created(r, run.Lease)
			r.createMu.Unlock()
			return err == nil, false
		}
		return true, false
	case p.Step - 1:
		return false, resp.NextSeq == nextSeq-int64(len(p.Events))
	}
	return false, false
}

// toEventInputs converts wire frames to store events, splices included
// (the store writes each whole; a long text stays in memory once).
func toEventInputs(fs []protocol.Frame) []store.EventInput {
	out := make([]store.EventInput, len(fs))
	for i, f := range fs {
		out[i] = store.EventInput{Seq: f.Seq, Type: f.Type, Payload: f.Payload, Splices: toSplices(f.Splices)}
	}
	return out
}

// toSplices converts a frame's splices to a store event's (nil for none).
func toSplices(sps []protocol.Splice) []store.Splice {
	if len(sps) == 0 {
		return nil
	}
	out := make([]store.Splice, len(sps))
	for i, sp := range sps {
		out[i] = store.Splice{At: sp.At, Bytes: sp.Bytes}
	}
	return out
}
