package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/responses/wire"
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
	info         RunInfo

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

	live bool // publication mode live (see PublicationLive)

	// mu serialises the run's commits and guards the state below.
	mu        sync.Mutex
	liveSt    liveState // live items of the running superstep (queued ones included)
	liveQ     liveQueue // live frames not durable yet
	fenced    bool
	finished  bool           // the head response reached a terminal status
	resp      *wire.Response // snapshot as of the last commit
	nextSeq   int64
	lastStep  int64
	lastParts []store.Part
	// startStep is the head response's StartStep: Config.MaxSupersteps
	// counts the supersteps after it (a limit per response).
	startStep int64
	// usage is what the run's agent executors used in the whole run as of
	// the last commit (agent.CheckpointUsage of lastParts): a step's
	// usage is its checkpoint's minus this.
	usage agent.Usage
	// respUsage is the head response's usage as of the last commit. The
	// Response shows usage only once terminal (null before, as the API
	// has it), so until then it is kept in the record's usage field
	// (store.Response.Usage), which recovery reads back.
	respUsage wire.Usage
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
	}()
	return nil
}

// newRun returns a run driven under epoch, positioned after lastStep.
func (h *Host) newRun(m *model, rr *store.Response, snap *wire.Response, runID string, lease store.Lease, lastStep int64, parts []store.Part) *run {
	info := RunInfo{ResponseID: rr.ID, RunID: runID, Metadata: snap.Metadata, MaxSupersteps: h.cfg.MaxSupersteps}
	ctx, cancel := context.WithCancelCause(WithRunInfo(h.runCtx, info))
	// The metadata was validated at create; an unknown value cannot be here.
	mode, _ := publicationMode(snap.Metadata, m.publication)
	usage, err := agent.CheckpointUsage(toWorkflowParts(parts))
	if err != nil {
		// The run's restore reports a corrupt checkpoint; here it only
		// means the response's usage counts the run's earlier tokens too.
		h.log.Warn("host: cannot read agent usage from the checkpoint", "run_id", runID, "err", err)
	}
	r := &run{id: runID, model: m, epoch: lease.Epoch, leaseExpires: lease.ExpiresAt, info: info, ctx: ctx, cancel: cancel,
		live: mode == PublicationLive,
		done: make(chan struct{}), resp: snap, nextSeq: rr.NextSeq, lastStep: lastStep, lastParts: parts, startStep: rr.StartStep,
		usage: usage}
	r.liveQ.cond = sync.NewCond(&r.mu)
	if len(rr.Usage) > 0 && !rr.Status.Terminal() {
		if err := json.Unmarshal(rr.Usage, &r.respUsage); err != nil {
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
		return wr.Run(ctx, func(_ context.Context, s *workflow.Step) error {
			return h.commitStep(r, s)
		}, &workflow.RunOptions{MaxSupersteps: int64(h.cfg.MaxSupersteps), StepBase: r.startStep,
			Live: h.liveHook(r), Invocation: &workflow.Invocation{ID: r.info.ResponseID, Metadata: r.info.Metadata}})
	}
}

// afterDrive finishes a run whose driver returned err: commits the
// cancelled terminal event, fails the response loudly, or hands the run
// back for recovery; then releases the lease.
func (h *Host) afterDrive(r *run, err error) {
	h.stopLive(r) // no live append may follow (or race) the terminal commit
	r.mu.Lock()
	defer r.mu.Unlock()
	log := h.log.With("run_id", r.id, "response_id", r.responseID())
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
		err = h.finishLocked(r, wire.StatusCancelled, nil)
		if errors.Is(err, store.ErrNotFound) {
			log.Info("host: response deleted while being cancelled; run stopped")
			return
		}
	case errors.Is(err, errDraining) || context.Cause(r.ctx) == errDraining || h.runCtx.Err() != nil:
		log.Info("host: run stopped for shutdown; left for recovery", "step", r.lastStep)
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
			log.Warn("host: store unavailable; handing the run back for recovery", "err", err, "step", r.lastStep)
			err = nil
			break
		}
		log.Error("host: run failed", "err", err, "step", r.lastStep)
		werr, _ := clientError(err, true) // err, logged above, is the host's or the store's: not for clients
		err = h.finishLocked(r, wire.StatusFailed, werr)
	}
	if errors.Is(err, store.ErrCancelled) && !r.finished {
		// A cancel was recorded before the finishing commit: the store
		// takes only the cancelled one.
		r.cancelled.Store(true)
		err = h.finishLocked(r, wire.StatusCancelled, nil)
	}
	if err != nil && !r.finished {
		h.metrics.failed(opFinish)
		log.Error("host: cannot finish the response; handing the run back for recovery", "err", err)
	}
	h.releaseLease(r)
}

// releaseLease gives r's lease up so the run can be claimed at once.
func (h *Host) releaseLease(r *run) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), 5*time.Second)
	defer cancel()
	err := h.store.LeaseRelease(ctx, &store.LeaseParams{RunID: r.id, Owner: h.cfg.HostID, Epoch: r.epoch})
	if err != nil && !errors.Is(err, store.ErrFenced) && !errors.Is(err, store.ErrNotFound) {
		h.metrics.failed(opLeaseRelease)
		h.log.Warn("host: lease release failed", "run_id", r.id, "err", err)
	}
}

// commitStep is the workflow's commit hook: it translates the step's events
// into wire events, commits them with the checkpoint, and only then updates
// the in-memory state.
func (h *Host) commitStep(r *run, s *workflow.Step) error {
	r.mu.Lock()
	defer r.mu.Unlock()
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
	resp := r.resp.Clone()
	seq := &wire.Seq{Next: r.nextSeq}
	if err := h.beginResponse(seq, resp); err != nil {
		return err
	}
	st := r.liveSt
	if err := translateCommitted(seq, resp, s, r.live, &st); err != nil {
		return err
	}
	usage, respUsage, err := stepUsage(r, resp, s)
	if err != nil {
		return err
	}
	status, werr := stepStatus(s)
	if s.Err != nil && werr != nil && werr.Message != s.Err.Error() {
		h.log.Warn("host: run failed; the response shows what failed, the cause is here", "run_id", r.id,
			"response_id", r.responseID(), "step", s.Number, "err", s.Err)
	}
	if status == wire.StatusCompleted && resp.IncompleteDetails != nil {
		status = wire.StatusIncomplete
	}
	if status != wire.StatusInProgress {
		resp.Usage = &respUsage
		resp.Finish(status, time.Now(), werr)
		if err := seq.Lifecycle(wire.TerminalEventType(status), resp); err != nil {
			return err
		}
	}
	if err := h.commitLocked(r, s.Number, toStoreParts(s.Checkpoint), seq, resp, respUsage); err != nil {
		return h.cancelledByStore(r, err)
	}
	r.usage = usage
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

// beginResponse adds response.in_progress when the response has no event
// past response.created yet.
func (h *Host) beginResponse(seq *wire.Seq, resp *wire.Response) error {
	resp.Status = wire.StatusInProgress
	if seq.Next > 1 {
		return nil // response.in_progress is in the log (committed or live)
	}
	return seq.Lifecycle(wire.EventResponseInProgress, resp.Clone())
}

// stepUsage returns the run's agent usage after step s and the head
// response's usage after it: r's plus what the run's agent executors used
// in s (the growth of their shared-state usage since r's last commit). It
// marks resp incomplete when an agent's reply in s was cut short. The
// run's usage lives in the checkpoint and the response's in its record, so
// both survive recovery; incomplete_details lives in the snapshot, where
// it shows while the response is still in progress (its status becomes
// incomplete when it ends).
func stepUsage(r *run, resp *wire.Response, s *workflow.Step) (agent.Usage, wire.Usage, error) {
	total, err := agent.CheckpointUsage(s.Checkpoint)
	if err != nil {
		return agent.Usage{}, wire.Usage{}, err
	}
	respUsage := r.respUsage
	respUsage.Add(wireUsage(total.Sub(r.usage)))
	inc, ok, err := agent.CheckpointIncomplete(s.Checkpoint)
	if err != nil {
		return agent.Usage{}, wire.Usage{}, err
	}
	if ok && inc.Step == s.Number && inc.Reason != "" {
		resp.IncompleteDetails = &wire.IncompleteDetails{Reason: inc.Reason}
	}
	return total, respUsage, nil
}

// wireUsage converts an agent's usage to the API's.
func wireUsage(u agent.Usage) wire.Usage {
	return wire.Usage{
		InputTokens:         u.InputTokens,
		InputTokensDetails:  wire.InputTokensDetails{CachedTokens: u.CachedInputTokens},
		OutputTokens:        u.OutputTokens,
		OutputTokensDetails: wire.OutputTokensDetails{ReasoningTokens: u.ReasoningTokens},
		TotalTokens:         u.TotalTokens,
	}
}

// stepStatus maps a step's run status to the response status.
func stepStatus(s *workflow.Step) (string, *wire.Error) {
	switch s.Status {
	case workflow.Running:
		return wire.StatusInProgress, nil
	case workflow.Idle, workflow.Completed:
		return wire.StatusCompleted, nil
	}
	if s.Err == nil {
		return wire.StatusFailed, &wire.Error{Code: "server_error", Message: "workflow failed"}
	}
	werr, _ := clientError(s.Err, false)
	return wire.StatusFailed, werr
}

// Messages a failed response shows for failures of the infrastructure.
const (
	msgStoreFailed    = "The run failed because the server's storage failed; the details are in the server's log."
	msgCheckpointBad  = "The run failed because its saved state could not be restored; the details are in the server's log."
	msgLiveFailed     = "The run failed because its live output could not be published; the details are in the server's log."
	msgInternalFailed = "The run failed because of an internal error; the details are in the server's log."
	msgUnreachable    = "a server it called could not be reached (the details are in the server's log)"
	msgNoAnswer       = "a server it called did not answer in time (the details are in the server's log)"
)

// clientError is the error a failed response shows for err, and whether
// it hides part of err's message (the caller then logs err in full).
//
// The rule: what the workflow's own code reports — an executor's or an
// agent's error, a panic's value, the superstep limit, a model's refusal —
// is its author's message for users and is shown as reported. What the
// infrastructure reports is not:
//   - a failure outside the workflow's steps (internal: a commit, a
//     restore, a live publication, the host's own) shows a fixed sentence
//     saying what failed;
//   - an error from the store (any store sentinel in the chain; a
//     database error names the database's user, name and address) shows
//     the storage sentence;
//   - an error from the network (a net.Error in the chain, url.Error
//     included: a model, tool or database server that could not be
//     reached) keeps the words around it — "executor "x": agent: model
//     call failed (model m, 3 attempt(s)): " — and replaces the rest, from
//     the first error in the chain that is not a plain fmt.Errorf wrapper,
//     with what failed (see cutNetwork).
func clientError(err error, internal bool) (*wire.Error, bool) {
	msg := ""
	switch {
	case isStoreError(err):
		msg = msgStoreFailed
	case internal && errors.Is(err, workflow.ErrCheckpoint):
		msg = msgCheckpointBad
	case internal && errors.Is(err, workflow.ErrLive):
		msg = msgLiveFailed
	case internal:
		msg = msgInternalFailed
	default:
		var hidden bool
		if msg, hidden = cutNetwork(err); !hidden {
			return &wire.Error{Code: "server_error", Message: err.Error()}, false
		}
	}
	return &wire.Error{Code: "server_error", Message: msg}, true
}

// cutNetwork returns err's message with the part a network error wrote
// (addresses, URLs, users) replaced by what failed, and whether there was
// one. It walks the chain from the outside through fmt.Errorf wrappers
// whose message is their own words followed by their one wrapped
// error's that leads to the network error (the words of the workflow, the
// agent and the author), and cuts at the first error that is not such a
// wrapper: its whole message goes, whatever type wrote it (a database
// driver's connect error names its user and database before the network
// error's text).
func cutNetwork(err error) (string, bool) {
	var netErr net.Error
	if !errors.As(err, &netErr) {
		return "", false
	}
	prefix := ""
	e := err
	for isFmtWrapper(e) {
		var next error
		for _, c := range unwrapAll(e) {
			if errors.As(c, &netErr) {
				if next != nil {
					next = nil // two ways down: cut here
					break
				}
				next = c
			}
		}
		msg := e.Error()
		if next == nil || !strings.HasSuffix(msg, next.Error()) {
			break
		}
		prefix += strings.TrimSuffix(msg, next.Error())
		e = next
	}
	what := msgUnreachable
	if errors.As(e, &netErr) && netErr.Timeout() || errors.Is(e, context.DeadlineExceeded) {
		what = msgNoAnswer
	}
	return prefix + what, true
}

// isFmtWrapper reports whether e was made by fmt.Errorf with %w.
func isFmtWrapper(e error) bool {
	switch reflect.TypeOf(e).String() {
	case "*fmt.wrapError", "*fmt.wrapErrors":
		return true
	}
	return false
}

// unwrapAll returns the errors e wraps.
func unwrapAll(e error) []error {
	switch u := e.(type) {
	case interface{ Unwrap() error }:
		if c := u.Unwrap(); c != nil {
			return []error{c}
		}
	case interface{ Unwrap() []error }:
		return u.Unwrap()
	}
	return nil
}

// isStoreError reports whether err carries a store sentinel.
func isStoreError(err error) bool {
	for _, target := range []error{store.ErrUnavailable, store.ErrCorrupt, store.ErrConflict, store.ErrFenced,
		store.ErrNotFound, store.ErrClosed, store.ErrCancelled} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// translateCommitted appends the wire events of a committed step: in live
// mode they close the live items opened in the log.
func translateCommitted(seq *wire.Seq, resp *wire.Response, s *workflow.Step, live bool, st *liveState) error {
	ups := stepUpdates(s)
	cut, err := stepCut(s, ups)
	if err != nil {
		return err
	}
	if live && st.step == s.Number {
		return translateLive(seq, resp, ups, st, cut)
	}
	return translateUpdates(seq, resp, ups, cut)
}

// stepUpdates returns the updates of a step's outputs and requests, mapped
// exactly as agent.FromWorkflow maps them (agent.UpdateFromEvent).
func stepUpdates(s *workflow.Step) []agent.Update {
	var ups []agent.Update
	for _, ev := range s.Events {
		if u, ok := agent.UpdateFromEvent(ev); ok {
			ups = append(ups, u)
		}
	}
	return ups
}

// stepCut returns the index in ups of the output an agent's reply cut
// short in step s (agent.IncompleteKey: the last text of that executor in
// the step), or -1.
func stepCut(s *workflow.Step, ups []agent.Update) (int, error) {
	inc, ok, err := agent.CheckpointIncomplete(s.Checkpoint)
	if err != nil || !ok || inc.Step != s.Number || inc.Reason == "" {
		return -1, err
	}
	return lastText(ups, func(u agent.Update) bool { return u.Source == inc.ExecutorID }), nil
}

// lastText returns the index of the last text update in ups that match
// accepts, or -1.
func lastText(ups []agent.Update, match func(agent.Update) bool) int {
	for i := len(ups) - 1; i >= 0; i-- {
		if ups[i].Kind == agent.UpdateText && match(ups[i]) {
			return i
		}
	}
	return -1
}

// itemStatus is the final status of the item of the i-th update when the
// cut-th was cut short.
func itemStatus(i, cut int) string {
	if i == cut {
		return wire.ItemIncomplete
	}
	return wire.ItemCompleted
}

// translateStep appends the wire events of a step's outputs and requests,
// mapped exactly as agent.FromWorkflow maps them (agent.UpdateFromEvent).
func translateStep(seq *wire.Seq, resp *wire.Response, s *workflow.Step) error {
	ups := stepUpdates(s)
	cut, err := stepCut(s, ups)
	if err != nil {
		return err
	}
	return translateUpdates(seq, resp, ups, cut)
}

// translateUpdates appends one complete item per update; the cut-th (-1:
// none) is incomplete.
func translateUpdates(seq *wire.Seq, resp *wire.Response, ups []agent.Update, cut int) error {
	for i, u := range ups {
		if err := appendItem(seq, resp, u, itemStatus(i, cut)); err != nil {
			return err
		}
	}
	return nil
}

// appendUpdate appends one complete output item for u: a message for text,
// a function_call for a request (call_id = request id) or for an agent's
// own tool call (call_id = the model's; not a pending request: an output
// for it is refused like one for an unknown call).
func appendUpdate(seq *wire.Seq, resp *wire.Response, u agent.Update) error {
	return appendItem(seq, resp, u, wire.ItemCompleted)
}

// appendItem is appendUpdate with a message's final status (ItemIncomplete
// for a reply cut short).
func appendItem(seq *wire.Seq, resp *wire.Response, u agent.Update, status string) error {
	var (
		item wire.Item
		err  error
	)
	idx := len(resp.Output)
	switch u.Kind {
	case agent.UpdateText:
		item, err = seq.MessageWithStatus(wire.MessageID(resp.ID, idx), idx, u.Text, status)
	case agent.UpdateFunctionCall, agent.UpdateToolCall:
		item, err = seq.FunctionCall(wire.FunctionCallID(resp.ID, idx), idx, u.CallID, u.Name, u.Arguments)
	default:
		return nil
	}
	if err != nil {
		return err
	}
	resp.Output = append(resp.Output, item)
	return nil
}

// finishLocked commits a terminal event for r's response with no workflow
// step behind it (cancel, unrecoverable failure): the checkpoint repeats the
// last committed one at the next step.
func (h *Host) finishLocked(r *run, status string, e *wire.Error) error {
	if r.finished {
		return nil
	}
	resp := r.resp.Clone()
	seq := &wire.Seq{Next: r.nextSeq}
	if status != wire.StatusCancelled {
		if err := h.beginResponse(seq, resp); err != nil {
			return err
		}
	}
	// Items the interrupted step opened live are closed first: the log
	// holds them (the driver returned, so no live append is in flight).
	if st := r.liveQ.durable; r.live && st.step == r.lastStep+1 {
		if err := closeLive(seq, resp, &st); err != nil {
			return err
		}
	}
	u := r.respUsage
	resp.Usage = &u
	resp.Finish(status, time.Now(), e)
	if err := seq.Lifecycle(wire.TerminalEventType(status), resp); err != nil {
		return err
	}
	return h.commitLocked(r, r.lastStep+1, r.lastParts, seq, resp, u)
}

// commitLocked commits one step of r and, on success, makes it r's state;
// usage is the response's usage after the step (recorded even while the
// snapshot shows none).
func (h *Host) commitLocked(r *run, step int64, parts []store.Part, seq *wire.Seq, resp *wire.Response, usage wire.Usage) error {
	snap, err := json.Marshal(resp)
	if err != nil {
		return fmt.Errorf("host: encode response snapshot: %w", err)
	}
	p := &store.CommitParams{RunID: r.id, Epoch: r.epoch, Step: step, Checkpoint: parts,
		ResponseID: resp.ID, Events: toEventInputs(seq.Frames), Status: store.Status(resp.Status),
		Snapshot: snap, PruneKeep: h.pruneKeep(step, store.Status(resp.Status).Terminal())}
	if resp.Error != nil {
		p.Error, _ = json.Marshal(resp.Error)
	}
	if resp.Usage != nil || usage != (wire.Usage{}) {
		p.Usage, _ = json.Marshal(usage)
	}
	if err := h.commit(r, p, seq.Next); err != nil {
		if errors.Is(err, store.ErrFenced) {
			r.fenced = true
		}
		return err
	}
	r.resp, r.nextSeq, r.lastStep, r.lastParts, r.respUsage = resp, seq.Next, step, parts, usage
	r.liveSt = liveState{} // the step's live items are closed (or void)
	r.finished = store.Status(resp.Status).Terminal()
	h.test.committed.Signal(step)
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
	ctx := h.runCtx // a cancel must not abort a commit; a hard stop does
	backoff := h.cfg.CommitBackoff
	failures := 0 // failed attempts not known to be transient
	for attempt := 0; ; attempt++ {
		err := h.commitAttempt(ctx, p)
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
			committed, fits := h.commitState(ctx, p, nextSeq)
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
			h.log.Error("host: commit failed", "run_id", p.RunID, "step", p.Step, "attempt", attempt+1, "err", err)
			return fmt.Errorf("host: commit run %s step %d: %w", p.RunID, p.Step, err)
		}
		h.log.Warn("host: commit failed; retrying", "run_id", p.RunID, "step", p.Step, "attempt", attempt+1,
			"backoff", backoff, "transient", transient, "err", err)
		if stop := h.commitWait(r, backoff); stop != nil {
			h.log.Warn("host: commit not retried: the run is stopping; left for recovery", "run_id", p.RunID,
				"step", p.Step, "attempt", attempt+1, "stop", stop, "err", err)
			return fmt.Errorf("host: commit run %s step %d: %w (stopped: %w)", p.RunID, p.Step, err, stop)
		}
		backoff = min(backoff*2, h.cfg.CommitBackoffMax)
	}
}

// commitAttempt makes one attempt to write p, with the fault points around
// the store call.
func (h *Host) commitAttempt(ctx context.Context, p *store.CommitParams) error {
	f := &Fault{Point: FaultCommitBefore, RunID: p.RunID, ResponseID: p.ResponseID, Step: p.Step}
	if err := h.fault(ctx, f); err != nil {
		return err
	}
	start := time.Now()
	res, err := h.store.Commit(ctx, p)
	h.metrics.commitSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		return err
	}
	h.metrics.checkpointsPruned.Add(float64(res.Pruned))
	f.Point = FaultCommitAfter
	return h.fault(ctx, f)
}

// commitState compares the store with p, made under p.Epoch: committed
// when the run's last step is p's and the response's log ends where p's
// events end (an attempt that reported failure committed after all); fits
// when the run is still at the step before p and the log where p's events
// begin (the attempt can be made again).
func (h *Host) commitState(ctx context.Context, p *store.CommitParams, nextSeq int64) (committed, fits bool) {
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
		return resp.NextSeq == nextSeq, false
	case p.Step - 1:
		return false, resp.NextSeq == nextSeq-int64(len(p.Events))
	}
	return false, false
}

// sleepCtx waits d or until ctx ends; it reports whether d elapsed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// toStoreParts converts workflow checkpoint parts to store parts.
func toStoreParts(ps []workflow.Part) []store.Part {
	out := make([]store.Part, len(ps))
	for i, p := range ps {
		out[i] = store.Part{Name: p.Name, Data: p.Data}
	}
	return out
}

// toWorkflowParts converts store checkpoint parts to workflow parts.
func toWorkflowParts(ps []store.Part) []workflow.Part {
	out := make([]workflow.Part, len(ps))
	for i, p := range ps {
		out[i] = workflow.Part{Name: p.Name, Data: p.Data}
	}
	return out
}

// toEventInputs converts wire frames to store events.
func toEventInputs(fs []wire.Frame) []store.EventInput {
	out := make([]store.EventInput, len(fs))
	for i, f := range fs {
		out[i] = store.EventInput{Seq: f.Seq, Type: f.Type, Payload: f.Payload}
	}
	return out
}
