package host

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
)

// loadReplay reads the live events r's head response's log holds past its
// last commit, the ones the interrupted superstep streamed (and earlier
// recoveries appended), and makes what a client that followed the log sees
// r's live state (protocol.LiveFromLog). The superstep re-runs on top of
// it: what it streams again is reconciled with the log item by item, so a
// frame the log holds is not appended again, executors running at once
// may interleave otherwise than the first time, and a reset takes back
// only the text of a call that streams something else (protocol.ProjectLive;
// docs/guarantees.md). A log that ends with a commit's events needs none.
func (h *Host) loadReplay(ctx context.Context, r *run) error {
	tail, err := h.uncommittedTail(ctx, r.responseID(), r.st.NextSeq)
	if err != nil {
		return err
	}
	if len(tail) == 0 || protocol.IsTerminal(tail[len(tail)-1].Type) {
		return nil
	}
	frames := make([]protocol.Frame, len(tail))
	for i, ev := range tail {
		frames[i] = protocol.Frame{Type: ev.Type, Seq: ev.Seq, Payload: ev.Payload}
	}
	live, err := protocol.LiveFromLog(r.st, frames)
	if err != nil {
		// Not frames this host makes: withdrawn by a reset before anything else.
		h.log.Warn("host: the live events of the interrupted superstep could not be read back; a reset withdraws them",
			"response_id", r.responseID(), "from_seq", tail[0].Seq, "err", err)
	}
	r.live, r.liveQ.durable = live, live
	r.replaying = true
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

// replayed counts what live event projection did in a recovered
// superstep that has not reproduced every item its log holds yet, with
// r.mu held and r.live still the state before it: no frames means the
// event was in the log already (durable as it stands when nothing is
// queued); a reset means it took something back.
func (h *Host) replayed(r *run, frames []protocol.Frame, live protocol.Live) {
	if len(frames) == 0 {
		h.metrics.liveReplay.matched.Inc()
		if !r.liveQ.busy() {
			r.liveQ.durable = live
		}
	}
	for _, f := range frames {
		if f.Type == protocol.EventResponseInProgress {
			h.metrics.liveReplay.resets.Inc()
			h.log.Info("host: recovered superstep streamed something else than the log holds; reset appended",
				"response_id", r.responseID(), "seq", f.Seq)
			break
		}
	}
	if !live.Owes() {
		h.log.Info("host: recovered superstep reproduced every live item the log holds", "response_id", r.responseID())
		r.replaying = false
	}
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
			Help: "Live events a recovered superstep streamed again as its log held them: nothing appended, no reset."}),
		resets: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_live_replay_resets_total",
			Help: "Resets a recovered superstep appended while streaming because it streamed otherwise than its log held."}),
	}
}

func (m *liveReplayMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.matched, m.resets}
}
