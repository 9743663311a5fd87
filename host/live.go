package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/superstep/superstep/agent"
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

// liveItem is an output item published live by one executor attempt, not
// yet made part of the output by a commit: a message opened by text deltas
// (open until the commit, or until the attempt's next tool call closes it)
// or a function_call item of one of the agent's own tool calls (published
// whole).
type liveItem struct {
	// executorID is the executor of the hosted workflow the item belongs
	// to (for an event nested in sub-workflows, the outermost one: its
	// outputs are that executor's); stream names the emitting attempt down
	// the nesting (see liveStream).
	executorID string
	stream     string
	id         string
	index      int
	text       string        // a message's deltas so far
	done       bool          // closed live: item is final
	item       protocol.Item // the final item, when done
}

// liveState is what the running superstep published live so far.
type liveState struct {
	step  int64
	items []liveItem
}

// liveHook returns the workflow's Live hook for r (nil in committed mode).
func (h *Host) liveHook(r *run) workflow.LiveFunc {
	if !r.live {
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
	durable liveState
	err     error // the append that failed: the run stops; sticky
	started bool  // the appender goroutine was started
	stop    bool  // the run's driver returned: the appender exits
	done    chan struct{}
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
	q.frames, q.recv, q.bytes = nil, nil, 0
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
	if r.liveSt.step != ev.Step {
		r.liveSt = liveState{step: ev.Step}
	}
	next := r.nextSeq
	if q.busy() {
		next = q.next
	}
	seq := &protocol.Seq{Next: next}
	st := r.liveSt
	st.items = append([]liveItem(nil), st.items...)
	if err := liveFrames(seq, r.resp, &st, ev); err != nil {
		return err
	}
	if len(seq.Frames) == 0 {
		return nil
	}
	r.liveSt = st
	q.frames = append(q.frames, seq.Frames...)
	for _, f := range seq.Frames {
		q.bytes += len(f.Payload)
	}
	q.recv = append(q.recv, start)
	q.next = seq.Next
	if !q.started {
		q.started, q.done = true, make(chan struct{})
		go h.liveAppender(r)
	}
	q.cond.Broadcast()
	return nil
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
			r.liveSt = q.durable
			return
		case len(q.frames) == 0:
			q.cond.Wait()
			continue
		case q.err != nil || r.fenced || r.cancelled.Load():
			q.drop()
			r.liveSt = q.durable
			q.cond.Broadcast()
			continue
		}
		batch, recv, st := q.frames, q.recv, r.liveSt // st: the state after every queued frame
		q.drop()
		q.inflight = true
		q.cond.Broadcast() // room for the emitter
		r.mu.Unlock()
		err := h.appendLive(r, batch)
		r.mu.Lock()
		q.inflight = false
		if err != nil {
			q.err = err
			if len(q.frames) == 0 {
				r.liveSt = q.durable
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
			q.durable = st
			r.nextSeq = batch[len(batch)-1].Seq + 1
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

// liveStream names the attempt that emitted ev, through every level of
// sub-workflow nesting: "exec#attempt", then "/step/exec#attempt" per
// nested level. It returns the hosted workflow's executor too.
func liveStream(ev workflow.LiveEvent) (executorID, stream string) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s#%d", ev.ExecutorID, ev.Attempt)
	for v := ev.Value; ; {
		inner, ok := v.(workflow.LiveEvent)
		if !ok {
			break
		}
		fmt.Fprintf(&b, "/%d/%s#%d", inner.Step, inner.ExecutorID, inner.Attempt)
		v = inner.Value
	}
	return ev.ExecutorID, b.String()
}

// within reports whether stream is prefix or one of the streams nested in it.
func within(stream, prefix string) bool {
	return stream == prefix || strings.HasPrefix(stream, prefix+"/")
}

// liveFrames builds the frames of ev on top of what st says is open. It is
// the one translator of live events, nested ones (sub-workflows) included:
// agent.LiveUpdate reads the event's update.
func liveFrames(seq *protocol.Seq, resp *protocol.Response, st *liveState, ev workflow.LiveEvent) error {
	u, ok := agent.LiveUpdate(ev)
	if !ok {
		return nil
	}
	exec, stream := liveStream(ev)
	switch u.Kind {
	case agent.UpdateTextDelta:
	case agent.UpdateRetry:
		if _, discard := innermost(ev).(workflow.LiveDiscard); discard {
			// The attempt failed: everything it (and what it nests)
			// published is void.
			return voidLive(seq, resp, st, func(it *liveItem) bool { return within(it.stream, stream) })
		}
		// The agent retries a model call: the message it was streaming is void.
		open := st.open(stream)
		return voidLive(seq, resp, st, func(it *liveItem) bool { return it == open })
	case agent.UpdateToolCall:
		return liveToolCall(seq, resp, st, exec, stream, u)
	default:
		return nil // tool results and the like are not output items
	}
	if err := beginLive(seq, resp); err != nil {
		return err
	}
	it := st.open(stream)
	if it == nil {
		idx := len(resp.Output) + len(st.items)
		st.items = append(st.items, liveItem{executorID: exec, stream: stream, id: protocol.MessageID(resp.ID, idx), index: idx})
		it = &st.items[len(st.items)-1]
		if err := seq.MessageStart(it.id, it.index); err != nil {
			return err
		}
	}
	it.text += u.Text
	return seq.MessageDelta(it.id, it.index, u.Text)
}

// innermost returns the value of ev under its sub-workflow nesting.
func innermost(ev workflow.LiveEvent) any {
	v := ev.Value
	for {
		inner, ok := v.(workflow.LiveEvent)
		if !ok {
			return v
		}
		v = inner.Value
	}
}

// liveToolCall publishes an agent's own tool call as a whole function_call
// item (its arguments in one delta), after closing the message the
// attempt was streaming: the call comes after that text, and the text
// after the call is a new message.
func liveToolCall(seq *protocol.Seq, resp *protocol.Response, st *liveState, exec, stream string, u agent.Update) error {
	if err := beginLive(seq, resp); err != nil {
		return err
	}
	if it := st.open(stream); it != nil {
		item, err := seq.MessageFinish(it.id, it.index, it.text)
		if err != nil {
			return err
		}
		it.done, it.item = true, item
	}
	idx := len(resp.Output) + len(st.items)
	id := protocol.FunctionCallID(resp.ID, idx)
	item, err := seq.FunctionCall(id, idx, u.CallID, u.Name, u.Arguments)
	if err != nil {
		return err
	}
	st.items = append(st.items, liveItem{executorID: exec, stream: stream, id: id, index: idx, done: true, item: item})
	return nil
}

// beginLive adds response.in_progress when nothing followed
// response.created yet.
func beginLive(seq *protocol.Seq, resp *protocol.Response) error {
	if seq.Next > 1 {
		return nil
	}
	c := resp.Clone()
	c.Status = protocol.StatusInProgress
	return seq.Lifecycle(protocol.EventResponseInProgress, c)
}

// open returns the message item a stream is writing, if any: its last
// item, unless that one is closed.
func (st *liveState) open(stream string) *liveItem {
	for i := len(st.items) - 1; i >= 0; i-- {
		it := &st.items[i]
		if it.stream == stream {
			if it.done {
				return nil
			}
			return it
		}
	}
	return nil
}

// voidLive withdraws the live items void says are void. The log is
// append-only, so that takes a reset response.in_progress whose output is
// the last committed output; the items that stay valid are then published
// again after it as they stand (a closed item whole, an open message with
// its text so far), so that what follows the reset is a coherent history
// by itself. When no item is void, nothing is appended.
func voidLive(seq *protocol.Seq, resp *protocol.Response, st *liveState, void func(*liveItem) bool) error {
	var keep []liveItem
	for i := range st.items {
		if !void(&st.items[i]) {
			keep = append(keep, st.items[i])
		}
	}
	if len(keep) == len(st.items) {
		return nil
	}
	if err := appendReset(seq, resp); err != nil {
		return err
	}
	st.items = nil
	for _, it := range keep {
		idx := len(resp.Output) + len(st.items)
		n := liveItem{executorID: it.executorID, stream: it.stream, index: idx, text: it.text, done: it.done}
		var err error
		switch {
		case it.done && it.item.Type == protocol.ItemFunctionCall:
			n.id = protocol.FunctionCallID(resp.ID, idx)
			n.item, err = seq.FunctionCall(n.id, idx, it.item.CallID, it.item.Name, it.item.Arguments)
		case it.done:
			n.id = protocol.MessageID(resp.ID, idx)
			n.item, err = seq.Message(n.id, idx, it.text)
		default:
			n.id = protocol.MessageID(resp.ID, idx)
			if err = seq.MessageStart(n.id, idx); err == nil && it.text != "" {
				err = seq.MessageDelta(n.id, idx, it.text)
			}
		}
		if err != nil {
			return err
		}
		st.items = append(st.items, n)
	}
	return nil
}

// resetLive voids every live item (see voidLive).
func resetLive(seq *protocol.Seq, resp *protocol.Response, st *liveState) error {
	return voidLive(seq, resp, st, func(*liveItem) bool { return true })
}

// appendReset appends a reset response.in_progress carrying resp (the last
// committed state).
func appendReset(seq *protocol.Seq, resp *protocol.Response) error {
	c := resp.Clone()
	c.Status = protocol.StatusInProgress
	return seq.Lifecycle(protocol.EventResponseInProgress, c)
}

// appendLive appends frames to r's head response's log outside a commit,
// retrying transient failures like a commit. It reads only r's immutable
// fields: the appender calls it without r.mu.
func (h *Host) appendLive(r *run, frames []protocol.Frame) error {
	ctx := h.runCtx
	p := &store.EventAppendParams{RunID: r.id, Epoch: r.epoch, ResponseID: r.responseID(), Events: toEventInputs(frames)}
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
		if final || attempt >= h.cfg.CommitRetries || !sleepCtx(ctx, backoff) {
			h.log.Error("host: publishing live events failed", "run_id", r.id, "seq", frames[0].Seq, "err", err)
			return fmt.Errorf("host: publish live events of response %s: %w", r.responseID(), err)
		}
		h.log.Warn("host: publishing live events failed; retrying", "run_id", r.id, "attempt", attempt+1, "err", err)
		backoff *= 2
	}
}

// translateLive appends the output items of ups, committed in live mode:
// they take over the live items their executors published, in order
// (closing the open messages with the committed text; the cut-th update,
// -1 for none, was cut short and its item ends incomplete); when they do
// not line up (an executor yielded something else, or in another order),
// the live items are voided by a reset and the outputs added as complete
// items.
func translateLive(seq *protocol.Seq, resp *protocol.Response, ups []agent.Update, st *liveState, cut int) error {
	if !liveLinesUp(ups, st.items) {
		if err := resetLive(seq, resp, st); err != nil {
			return err
		}
		st.items = nil
	}
	for i, u := range ups {
		if i >= len(st.items) {
			if err := appendItem(seq, resp, u, itemStatus(i, cut)); err != nil {
				return err
			}
			continue
		}
		it := &st.items[i]
		if it.done { // its events are all in the log already
			resp.Output = append(resp.Output, it.item)
			continue
		}
		item, err := seq.MessageEnd(it.id, it.index, u.Text, itemStatus(i, cut))
		if err != nil {
			return err
		}
		resp.Output = append(resp.Output, item)
	}
	return nil
}

// liveLinesUp reports whether the k-th live item is the k-th update: a
// text of the same executor (for a message closed live, the same text), or
// the same tool call of the same executor.
func liveLinesUp(ups []agent.Update, items []liveItem) bool {
	if len(items) > len(ups) {
		return false
	}
	for i, it := range items {
		u := ups[i]
		if u.Source != it.executorID {
			return false
		}
		switch {
		case !it.done:
			if u.Kind != agent.UpdateText {
				return false
			}
		case it.item.Type == protocol.ItemMessage:
			if u.Kind != agent.UpdateText || u.Text != it.text {
				return false
			}
		default:
			if u.Kind != agent.UpdateToolCall || u.CallID != it.item.CallID || u.Name != it.item.Name ||
				u.Arguments != it.item.Arguments {
				return false
			}
		}
	}
	return true
}

// resetUncommitted appends a reset response.in_progress when the head
// response's log holds live events past its last commit (a crash or a
// hand-over interrupted a live superstep), before the superstep re-runs.
func (h *Host) resetUncommitted(ctx context.Context, r *run) error {
	if r.nextSeq < 1 {
		return nil
	}
	evs, err := h.store.EventList(ctx, &store.EventListParams{ResponseID: r.responseID(), After: r.nextSeq - 2, Limit: 1})
	if err != nil {
		return fmt.Errorf("host: read the log of response %s: %w", r.responseID(), err)
	}
	if len(evs) == 0 || evs[0].Step != -1 || protocol.IsTerminal(evs[0].Type) {
		return nil
	}
	// The last event may be the reset itself: an earlier recovery appended
	// it and failed (or crashed) before the superstep's commit. It voids
	// everything before it already; a second one would repeat it.
	again := &protocol.Seq{Next: evs[0].Seq}
	if err := appendReset(again, r.resp); err != nil {
		return err
	}
	if f := again.Frames[0]; evs[0].Type == f.Type && bytes.Equal(evs[0].Payload, f.Payload) {
		return nil
	}
	seq := &protocol.Seq{Next: r.nextSeq}
	if err := appendReset(seq, r.resp); err != nil {
		return err
	}
	if err := h.appendLive(r, seq.Frames); err != nil {
		if errors.Is(err, store.ErrFenced) {
			r.fenced = true
		}
		return err
	}
	r.nextSeq = seq.Next
	h.log.Info("host: live events past the last commit voided by a reset", "response_id", r.responseID(),
		"seq", seq.Frames[0].Seq)
	return nil
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
			if ev.Seq != want.Seq || ev.Type != want.Type || ev.Step != -1 || !bytes.Equal(ev.Payload, want.Payload) {
				return false, false
			}
		}
		return true, false
	}
	return false, false
}

// closeLive makes the live items of st part of resp's output for a
// terminal commit with no step of its own (cancel, failure): a closed item
// as it was published, an open message closed incomplete with the text
// the log has so far. Every item a client saw added is then done before
// the terminal event, and the snapshot holds what the stream showed.
func closeLive(seq *protocol.Seq, resp *protocol.Response, st *liveState) error {
	for _, it := range st.items {
		if it.done {
			resp.Output = append(resp.Output, it.item)
			continue
		}
		item, err := seq.MessageEnd(it.id, it.index, it.text, protocol.ItemIncomplete)
		if err != nil {
			return err
		}
		resp.Output = append(resp.Output, item)
	}
	return nil
}
