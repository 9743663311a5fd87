package host

import (
	"bytes"
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
)

// liveReplay is what a recovered superstep's live events are matched
// against: the frames the log holds past the run's last commit (what the
// interrupted attempt streamed, and what earlier recoveries appended).
// With the journal, a re-run reproduces the frames of every call that had
// finished, so a projected frame that equals the logged frame at its seq is
// not appended again (it is durable, and clients saw it): the live state
// advances as if it had been. At the first frame that differs, a reset
// withdraws what is void and publishes the matched items again
// (protocol.RestateLive), and the superstep streams on after it; a commit
// that comes before every logged frame was matched does the same first.
// Guarded by run.mu; nil once the log holds nothing the superstep has not
// matched or voided.
type liveReplay struct {
	logged []protocol.Frame // the log's events lo.., all appended live (step -1)
	lo     int64            // seq of logged[0]
	// next is the seq the re-run's next frame is compared with: the
	// logged frames before it were matched (or skipped over by an entry).
	next int64
	// entered: the re-run's first frame was placed in the log.
	entered bool
	// diverged: the re-run streamed something else, and a reset voiding
	// the rest was queued; nothing is matched any more.
	diverged bool
	matched  int // frames matched, for the log line
}

// end returns the seq after the last logged frame (the log's end).
func (p *liveReplay) end() int64 { return p.lo + int64(len(p.logged)) }

// matches reports whether frames are the logged frames at their seqs.
func (p *liveReplay) matches(frames []protocol.Frame) bool {
	for _, f := range frames {
		if f.Seq < p.lo || f.Seq >= p.end() {
			return false
		}
		g := &p.logged[f.Seq-p.lo]
		if g.Type != f.Type || !bytes.Equal(g.Payload, f.Payload) {
			return false
		}
	}
	return true
}

// typesAt reports whether the logged frames from seq have frames' types.
func (p *liveReplay) typesAt(seq int64, frames []protocol.Frame) bool {
	if seq < p.lo || seq+int64(len(frames)) > p.end() {
		return false
	}
	for i, f := range frames {
		if p.logged[seq-p.lo+int64(i)].Type != f.Type {
			return false
		}
	}
	return true
}

// loadReplay reads the events r's head response's log holds past the last
// event a commit wrote: the live frames of the superstep about to re-run,
// which it is matched against (see liveReplay). A log that ends with a
// commit's events needs none.
func (h *Host) loadReplay(ctx context.Context, r *run) error {
	tail, err := h.uncommittedTail(ctx, r.responseID(), r.st.NextSeq)
	if err != nil {
		return err
	}
	if len(tail) == 0 || protocol.IsTerminal(tail[len(tail)-1].Type) {
		return nil
	}
	p := &liveReplay{logged: make([]protocol.Frame, len(tail)), lo: tail[0].Seq, next: tail[0].Seq}
	for i, ev := range tail {
		p.logged[i] = protocol.Frame{Type: ev.Type, Seq: ev.Seq, Payload: ev.Payload}
	}
	r.replay = p
	return nil
}

// replayPage is how many events uncommittedTail reads per page.
const replayPage = 256

// uncommittedTail returns the events of response id's log (which ends
// before end) after the last one a commit or the create wrote: those
// appended live since, in seq order. It reads the log backwards, a page at
// a time, so that its cost follows the tail, not the log.
func (h *Host) uncommittedTail(ctx context.Context, id string, end int64) ([]store.Event, error) {
	var tail []store.Event
	for hi, page := end, int64(1); hi > 0; page = replayPage {
		// The first page is the last event alone: in the common case (a
		// log that ends with a commit's events) that is all it reads.
		lo := max(0, hi-page)
		evs, err := h.store.EventList(ctx, &store.EventListParams{ResponseID: id, After: lo - 1, Limit: int(hi - lo)})
		if err != nil {
			return nil, fmt.Errorf("host: read the log of response %s: %w", id, err)
		}
		if int64(len(evs)) != hi-lo || evs[0].Seq != lo {
			return nil, fmt.Errorf("host: log of response %s: %d events from seq %d, want %d", id, len(evs), lo, hi-lo)
		}
		for i := len(evs) - 1; i >= 0; i-- {
			if evs[i].Step != -1 {
				return append(evs[i+1:], tail...), nil
			}
		}
		tail = append(evs, tail...)
		hi = lo
	}
	return tail, nil
}

// replayLive places the live event in of a recovered superstep against
// r.replay, with r.mu held. When its frames are the logged ones at their
// seqs, they are matched: the live state advances, nothing is queued, and
// replayLive reports true. Otherwise it returns false and the caller
// queues in's frames as usual: after a reset and the matched items
// (queued here) when the log holds frames in did not reproduce, or right
// at the log's end when everything logged was matched or voided already.
func (h *Host) replayLive(r *run, in *protocol.LiveEvent) (bool, error) {
	p := r.replay
	// Before the first frame is placed, p.next is only where the search
	// for its place ends; the frames there give the event's shape.
	frames, live, err := protocol.ProjectLive(r.st, max(p.next, 2), r.live, in)
	if err != nil {
		return false, err
	}
	if len(frames) == 0 {
		return true, nil // nothing to publish (nor to match)
	}
	if p.entered && p.matches(frames) {
		h.replayed(r, frames, live)
		return true, nil
	}
	e, live, ok, err := p.entry(r.st, r.live, in, frames)
	if err != nil {
		return false, err
	}
	if ok {
		p.entered = true
		r.live, r.liveQ.durable = live, live
		if e == p.end() {
			// The log's frames past the matched ones are voided already
			// (an earlier recovery's reset and republication end it).
			r.replay = nil
			return false, nil
		}
		p.next = e
		frames, live, err := protocol.ProjectLive(r.st, p.next, r.live, in)
		if err != nil {
			return false, err
		}
		h.replayed(r, frames, live) // entry checked they match
		return true, nil
	}
	// Diverged: withdraw the logged frames past the matched ones, keep
	// the matched items, and stream on after them.
	frames, restated, err := protocol.RestateLive(r.st, r.st.NextSeq, r.live)
	if err != nil {
		return false, err
	}
	h.log.Info("host: recovered superstep streamed something else than the log holds; reset appended",
		"response_id", r.responseID(), "seq", frames[0].Seq, "matched", p.matched,
		"voided", p.end()-p.next, "kept_items", restated.Items())
	p.entered, p.diverged = true, true
	h.metrics.liveReplay.resets.Inc()
	h.queueLive(r, frames)
	r.live = restated
	return false, nil
}

// replayed makes frames, matched against the log, part of r's live state
// as if they had been appended.
func (h *Host) replayed(r *run, frames []protocol.Frame, live protocol.Live) {
	p := r.replay
	p.next = frames[len(frames)-1].Seq + 1
	p.matched += len(frames)
	h.metrics.liveReplay.matched.Add(float64(len(frames)))
	r.live, r.liveQ.durable = live, live
	if p.next == p.end() {
		h.log.Info("host: recovered superstep reproduced every live event the log holds", "response_id", r.responseID(),
			"matched", p.matched)
		r.replay = nil
	}
}

// entry finds where in the log a re-run with live state live can place
// in's frames, preferring the latest place (what clients saw last): right
// after a reset and republication of live's items that an earlier recovery
// appended (entry at the log's end means in's frames are simply appended
// there), or, for the superstep's first frames, wherever the logged frames
// are those. It returns the seq of the place and the live state there,
// before in's frames.
// shape is in's frames at some seq past 1 (only their types are used).
func (p *liveReplay) entry(st protocol.State, live protocol.Live, in *protocol.LiveEvent, shape []protocol.Frame) (int64, protocol.Live, bool, error) {
	first := !p.entered && live.Items() == 0
	for x := p.end() - 1; x >= p.next; x-- {
		// (At seq 1 the frames begin with response.in_progress: no shape.)
		if first && (x <= 1 || p.typesAt(x, shape)) {
			frames, _, err := protocol.ProjectLive(st, x, live, in)
			if err != nil {
				return 0, live, false, err
			}
			if p.matches(frames) {
				return x, live, true, nil
			}
		}
		if p.logged[x-p.lo].Type != protocol.EventResponseInProgress {
			continue
		}
		rs, restated, err := protocol.RestateLive(st, x, live)
		if err != nil {
			return 0, live, false, err
		}
		if !p.matches(rs) {
			continue
		}
		e := x + int64(len(rs))
		if e == p.end() {
			return e, restated, true, nil
		}
		frames, _, err := protocol.ProjectLive(st, e, restated, in)
		if err != nil {
			return 0, live, false, err
		}
		if p.matches(frames) {
			return e, restated, true, nil
		}
	}
	return 0, live, false, nil
}

// voidUnmatched returns the frames, numbered from r.st.NextSeq, that must
// precede a commit made on top of live state live: when the log holds live
// frames past what the superstep matched and nothing voided them yet (the
// re-run streamed fewer frames, or none), a reset and live's items
// published again (protocol.RestateLive), unless the log ends with exactly
// those already (an earlier recovery appended them and died). It also
// returns the live state after them. Called with r.mu held, no live
// append in flight.
func (h *Host) voidUnmatched(r *run, live protocol.Live) ([]protocol.Frame, protocol.Live, error) {
	p := r.replay
	if p == nil || p.next >= p.end() || r.st.NextSeq != p.end() {
		return nil, live, nil // matched, or voided by an append that returned
	}
	for x := p.end() - 1; x >= p.next; x-- {
		if p.logged[x-p.lo].Type != protocol.EventResponseInProgress {
			continue
		}
		rs, restated, err := protocol.RestateLive(r.st, x, live)
		if err != nil {
			return nil, live, err
		}
		if x+int64(len(rs)) == p.end() && p.matches(rs) {
			return nil, restated, nil
		}
	}
	frames, restated, err := protocol.RestateLive(r.st, r.st.NextSeq, live)
	if err != nil {
		return nil, live, err
	}
	h.metrics.liveReplay.resets.Inc() // counted when made: the commit may fail, and the next recovery counts it again
	h.log.Info("host: recovered superstep ended before reproducing every live event the log holds; reset appended",
		"response_id", r.responseID(), "seq", frames[0].Seq, "matched", p.matched, "voided", p.end()-p.next,
		"kept_items", restated.Items())
	return frames, restated, nil
}

// liveReplayMetrics count what recovered live supersteps did with the
// frames their logs held.
type liveReplayMetrics struct {
	matched prometheus.Counter
	resets  prometheus.Counter
}

func newLiveReplayMetrics() *liveReplayMetrics {
	return &liveReplayMetrics{
		matched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_live_replay_matched_total",
			Help: "Live events a recovered superstep streamed again exactly as its log held them: not appended again, no reset."}),
		resets: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_live_replay_resets_total",
			Help: "Resets made because a recovered superstep streamed otherwise than (or less than) its log held."}),
	}
}

func (m *liveReplayMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.matched, m.resets}
}
