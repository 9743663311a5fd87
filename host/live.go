package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/superstep/superstep/internal/wait"
	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/workflow"
)

// Publication modes, chosen per request by metadata.publication.
const (
	// PublicationCommitted (the default): a superstep's events reach
	// clients only after its commit.
	PublicationCommitted = "committed"
	// PublicationLive: text deltas executors emit (workflow.Context.EmitLive
	// with an agent.Update of kind UpdateTextDelta, or a string) are
	// appended to the log and published as they come, before the
	// superstep's commit closes their message items; an agent's own tool
	// calls (UpdateToolCall) are published the same way as whole
	// function_call items, closing the message streamed before them.
	PublicationLive = "live"
	// PublicationMetadataKey is the metadata key that selects the mode.
	PublicationMetadataKey = "publication"
)

// publicationMode returns the mode a request's metadata asks for (def
// when it names none), or an *InputError for an unknown one.
func publicationMode(md map[string]string, def string) (string, error) {
	switch v := md[PublicationMetadataKey]; v {
	case "":
		if def == "" {
			return PublicationCommitted, nil
		}
		return def, nil
	case PublicationCommitted:
		return PublicationCommitted, nil
	case PublicationLive:
		return PublicationLive, nil
	default:
		return "", &InputError{Param: "metadata", Code: "invalid_value", Message: fmt.Sprintf(
			"metadata.%s must be %q or %q, got %q", PublicationMetadataKey, PublicationLive, PublicationCommitted, v)}
	}
}

// liveHook returns the workflow's Live hook for r (nil in committed mode).
func (h *Host) liveHook(r *run) workflow.LiveFunc {
	if !r.liveMode {
		return nil
	}
	return func(_ context.Context, ev workflow.LiveEvent) error { return h.publishLive(r, ev) }
}

// Bounds of a run's live queue: publishLive blocks while this many frames
// or payload bytes wait for an append, so a stream that outruns the store
// is slowed to the store's pace instead of growing memory. A batch being
// appended does not count: while it is written, the next one fills. When
// the executor outruns the store, its tokens wait in this queue, so the
// bound is also the latency added under overload: BenchmarkLiveTokens
// gained no throughput from 32 frames to 256 but a token's time to the
// client grew about 2x (docs/benchmarks.md). A model at its real pace
// (tens to a few hundred tokens/s) never fills it.
const (
	liveQueueFrames = 32
	liveQueueBytes  = 32 << 10
)

// liveQueue holds a run's live frames from their receipt until they are
// durable: they are numbered when queued, and the run's appender writes
// whatever is queued as one EventAppend each time its previous append
// returns (tokens that arrive while an append is in flight share the
// next one). The store wakes readers when an append commits, so a frame
// reaches no client before its append returned. Guarded by run.mu.
type liveQueue struct {
	// cond (on run.mu) is broadcast whenever the queue changes: frames
	// queued, a batch taken or finished, the appender stopping.
	cond   *sync.Cond
	frames []protocol.Frame // queued, not taken by the appender yet
	bytes  int              // payload bytes of frames
	recv   []time.Time      // when each live event behind frames reached the host
	// next is the seq after the last queued frame while busy (r.nextSeq,
	// which counts durable events only, lags behind it then).
	next     int64
	inflight bool // the appender is writing a batch
	// durable is the live state as of the last append that returned: what
	// the log holds, while run.liveSt counts queued frames too. Frames
	// dropped unappended leave it as it was, so a terminal commit after
	// them closes exactly the items the log has open.
	durable protocol.Live
	err     error // the append that failed: the run stops; sticky
	started bool  // the appender goroutine was started
	stop    bool  // the run's driver returned: the appender exits
	done    chan struct{}
	// journal holds the journal entries of calls that finished while
	// frames were queued (store.JournalBatcher): the next batch carries
	// them, of step journalStep, in its EventAppend, so each costs no
	// write of its own. Their callers wait for that batch (batchJournal).
	journal     []store.JournalInput
	journalStep int64
	// taken counts the batches the appender took; finished is the last
	// that returned, and appended the last that returned success
	// (batches are appended in order, and none after a failure).
	taken, finished, appended int64
}

// busy reports whether frames are queued or being appended.
func (q *liveQueue) busy() bool { return len(q.frames) > 0 || q.inflight }

// full reports whether publishLive must wait for the appender.
func (q *liveQueue) full() bool {
	return len(q.frames) >= liveQueueFrames || q.bytes >= liveQueueBytes
}

// drop forgets the queued frames (never appended, so never seen); the
// caller takes their state back (run.liveSt) when it is not appending them.
func (q *liveQueue) drop() {
	q.frames, q.recv, q.bytes, q.journal = nil, nil, 0, nil
}

// liveRefusal returns why r takes no more live events, if it does not.
// Called with r.mu held.
func (r *run) liveRefusal() error {
	switch {
	case r.liveQ.err != nil:
		return r.liveQ.err
	case r.fenced:
		return errLeaseLost
	case r.cancelled.Load():
		return errRunCancelled
	case r.liveQ.stop:
		return errLiveStopped
	}
	return nil
}

// errLiveStopped refuses a live event that arrives after the run's driver
// returned.
var errLiveStopped = errors.New("host: live event after the run stopped")

// publishLive queues the events of one live event for r's appender, which
// appends them to the log (fenced by the lease) before anyone can read
// them. It returns without waiting for the append unless the queue is
// full; an append failure is returned by the next call (or by the
// superstep's commit, which waits for the queue), and stops the run.
func (h *Host) publishLive(r *run, ev workflow.LiveEvent) error {
	start := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	q := &r.liveQ
	for {
		if err := r.liveRefusal(); err != nil {
			return err
		}
		if !q.full() {
			break
		}
		q.cond.Wait() // backpressure: the appender takes the queue when its append returns
	}
	in, ok := liveInput(ev)
	if !ok {
		return nil
	}
	next := r.st.NextSeq
	if q.busy() {
		next = q.next
	}
	frames, live, err := protocol.ProjectLive(r.st, next, r.live, &in)
	if err != nil {
		return err
	}
	if r.replaying {
		// A recovered superstep: what the log holds already is not
		// appended again (protocol.LiveFromLog).
		h.replayed(r, frames, live)
	}
	r.live = live
	if len(frames) == 0 {
		return nil
	}
	h.queueLive(r, frames)
	q.recv = append(q.recv, start)
	return nil
}

// queueLive queues frames, numbered from the seq after everything durable
// or queued, for r's appender, starting it when needed. Called with r.mu
// held; the caller sets r.live to the state after them.
func (h *Host) queueLive(r *run, frames []protocol.Frame) {
	q := &r.liveQ
	q.frames = append(q.frames, frames...)
	for i := range frames {
		q.bytes += frames[i].Len()
	}
	q.next = frames[len(frames)-1].Seq + 1
	if !q.started {
		q.started, q.done = true, make(chan struct{})
		go h.liveAppender(r)
	}
	q.cond.Broadcast()
}

// liveAppender is r's appender goroutine: it appends the queued frames,
// all at once, until the run's driver returned (stopLive). After a failed
// append, or once the run is fenced or cancelled, queued frames are
// dropped: they were never appended, so no client saw them, and the run
// stops without committing the superstep they belong to.
func (h *Host) liveAppender(r *run) {
	q := &r.liveQ
	defer close(q.done)
	r.mu.Lock()
	defer r.mu.Unlock()
	defer q.cond.Broadcast()
	for {
		switch {
		case q.stop:
			q.drop()
			r.live = q.durable
			return
		case len(q.frames) == 0:
			q.cond.Wait()
			continue
		case q.err != nil || r.fenced || r.cancelled.Load():
			q.drop()
			r.live = q.durable
			q.cond.Broadcast()
			continue
		}
		batch, recv, live := q.frames, q.recv, r.live // live: the state after every queued frame
		journal, journalStep := q.journal, q.journalStep
		q.drop()
		q.inflight = true
		q.taken++
		gen := q.taken
		q.cond.Broadcast() // room for the emitter
		r.mu.Unlock()
		err := h.appendLive(r, batch, journal, journalStep)
		r.mu.Lock()
		q.inflight = false
		q.finished = gen
		if err == nil {
			q.appended = gen
		}
		if err != nil {
			q.err = err
			if len(q.frames) == 0 {
				r.live = q.durable
			}
			if errors.Is(err, store.ErrFenced) {
				// Stop the executors at once, as a refused synchronous
				// append did (and as the lease guard does); any other
				// failure stops the superstep at its next EmitLive or its
				// commit, whose error then fails the response.
				r.fenced = true
				r.cancel(fmt.Errorf("%w: %w", errLeaseLost, err))
			}
		} else {
			q.durable = live
			r.st.NextSeq = batch[len(batch)-1].Seq + 1
			r.feed.publish(batch, -1) // durable now: readers here may see it
			now := time.Now()
			for _, t := range recv {
				h.metrics.livePublish.Observe(now.Sub(t).Seconds())
			}
		}
		q.cond.Broadcast()
	}
}

// awaitLive waits, with r.mu held, until every live frame queued for r is
// durable (or dropped), so that a commit's events follow them in seq; it
// returns the append failure that stopped the queue, if any.
func (r *run) awaitLive() error {
	q := &r.liveQ
	for q.busy() {
		q.cond.Wait()
	}
	return q.err
}

// stopLive stops r's appender once its driver returned and waits for it:
// a batch being appended finishes, queued frames are dropped (their
// superstep is not committed).
func (h *Host) stopLive(r *run) {
	r.mu.Lock()
	q := &r.liveQ
	q.stop = true
	started := q.started
	q.cond.Broadcast()
	r.mu.Unlock()
	if started {
		<-q.done
	}
}

// appendLive appends frames to r's head response's log outside a commit,
// with journal (entries of step journalStep, if any) in the same write,
// retrying transient failures like a commit. It reads only r's immutable
// fields: the appender calls it without r.mu.
func (h *Host) appendLive(r *run, frames []protocol.Frame, journal []store.JournalInput, journalStep int64) error {
	ctx := h.runCtx
	p := &store.EventAppendParams{RunID: r.id, Epoch: r.epoch, ResponseID: r.responseID(), Events: toEventInputs(frames),
		Journal: journal, JournalStep: journalStep}
	backoff := h.cfg.CommitBackoff
	for attempt := 0; ; attempt++ {
		err := h.appendAttempt(ctx, r, p)
		if err == nil {
			return nil
		}
		h.metrics.failed(opPublish)
		final := errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrNotFound)
		if errors.Is(err, store.ErrConflict) {
			// As for a commit: final unless the log still fits p (a
			// transient serialization failure) or already holds p (an
			// earlier attempt was applied after all; the failure was in
			// reporting it).
			applied, fits := h.appendState(ctx, p)
			if applied {
				h.log.Info("host: an earlier live append attempt had succeeded", "run_id", r.id, "seq", frames[0].Seq)
				return nil
			}
			final = !fits
		}
		if final || attempt >= h.cfg.CommitRetries || !wait.Sleep(ctx, backoff) {
			h.log.Error("host: publishing live events failed", "run_id", r.id, "seq", frames[0].Seq, "err", err)
			return fmt.Errorf("host: publish live events of response %s: %w", r.responseID(), err)
		}
		h.log.Warn("host: publishing live events failed; retrying", "run_id", r.id, "attempt", attempt+1, "err", err)
		backoff *= 2
	}
}

// appendAttempt makes one attempt to append p, with the fault points
// around the store call.
func (h *Host) appendAttempt(ctx context.Context, r *run, p *store.EventAppendParams) error {
	f := &Fault{Point: FaultPublish, RunID: r.id, ResponseID: p.ResponseID, Seq: p.Events[0].Seq}
	if err := h.fault(ctx, f); err != nil {
		return err
	}
	if err := h.store.EventAppend(ctx, p); err != nil {
		return err
	}
	f.Point = FaultAppendAfter
	return h.fault(ctx, f)
}

// appendState compares the store with p, made under p.Epoch: applied when
// the response's log ends where p's events end and holds p's events at
// their seqs, as appended outside a commit (an attempt that reported
// failure was applied after all); fits when the log ends where p's events
// begin (the attempt can be made again).
func (h *Host) appendState(ctx context.Context, p *store.EventAppendParams) (applied, fits bool) {
	run, err := h.store.RunGet(ctx, p.RunID)
	if err != nil || run.Lease.Epoch != p.Epoch {
		return false, false
	}
	resp, err := h.store.ResponseGet(ctx, p.ResponseID)
	if err != nil {
		return false, false
	}
	first, end := p.Events[0].Seq, p.Events[len(p.Events)-1].Seq+1
	switch resp.NextSeq {
	case first:
		return false, true
	case end:
		evs, err := h.store.EventList(ctx, &store.EventListParams{ResponseID: p.ResponseID, After: first - 1, Limit: len(p.Events)})
		if err != nil || len(evs) != len(p.Events) {
			return false, false
		}
		for i, ev := range evs {
			want := &p.Events[i]
			if ev.Seq != want.Seq || ev.Type != want.Type || ev.Step != -1 || !bytes.Equal(ev.Payload, want.AppendPayload(nil)) {
				return false, false
			}
		}
		return true, false
	}
	return false, false
}
