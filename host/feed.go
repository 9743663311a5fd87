package host

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
)

// Bounds of a feed's tail: the newest events of a run's head response kept
// in memory for its readers. A reader further behind reads the store until
// it catches up.
const (
	feedMaxEvents = 256
	feedMaxBytes  = 256 << 10
)

// feed is what readers of a run driven here get from memory instead of
// the store: the head response's newest durable events (a bounded,
// contiguous tail), its terminal state once committed, and a channel
// closed at every change. The run's writers publish to it only after the
// store write that made the events durable returned, so a reader sees
// nothing a crash could take back. Its own lock is held for no I/O: a
// reader never waits for a commit in flight.
type feed struct {
	responseID string

	mu sync.Mutex
	// events is the tail: events[i].Seq is first+i; next (the response's
	// NextSeq as durable) is first+len(events).
	events []feedEvent
	first  int64
	next   int64
	bytes  int
	// final is the head response's state as its terminal commit wrote it;
	// nil before.
	final *feedFinal
	// closed: the run stopped here (finished, fenced, handed back): no
	// more events come through the feed; readers go on from the store.
	closed  bool
	changed chan struct{} // closed and replaced at each change
}

// feedEvent is an event of a feed's tail: its payload is Payload with
// splices in place (see protocol.Frame). A long reply's frames share its
// text until a reader takes them (event): a response no one streams never
// has its frames made whole.
type feedEvent struct {
	store.Event
	splices []protocol.Splice
}

// frame is the event as the frame it came from.
func (fe *feedEvent) frame() *protocol.Frame {
	return &protocol.Frame{Type: fe.Type, Seq: fe.Seq, Payload: fe.Payload, Splices: fe.splices}
}

// event returns the event, its payload whole (a new slice when spliced).
func (fe *feedEvent) event() store.Event {
	ev := fe.Event
	if len(fe.splices) > 0 {
		ev.Payload = fe.frame().Bytes()
	}
	return ev
}

// feedFinal is what the terminal commit wrote to the response's record.
type feedFinal struct {
	status     store.Status
	snapshot   []byte
	errJSON    []byte
	usage      []byte
	nextSeq    int64
	commitStep int64
	at         time.Time // when the commit returned, on this host's clock
}

// newFeed returns the feed of responseID, whose log holds next events.
func newFeed(responseID string, next int64) *feed {
	return &feed{responseID: responseID, first: next, next: next, changed: make(chan struct{})}
}

// publish adds frames, durable now, written by the commit of step (-1:
// appended live). Frames that do not continue the tail start a new one
// (readers behind it read the store). Called by the run's writers, in log
// order, after their store write returned.
func (f *feed) publish(frames []protocol.Frame, step int64) {
	if len(frames) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	if frames[0].Seq != f.next {
		f.events, f.bytes, f.first = nil, 0, frames[0].Seq
	}
	f.events = slices.Grow(f.events, len(frames)) // W3's 1,202 frames: one array, not eleven
	for i := range frames {
		fr := &frames[i]
		f.events = append(f.events, feedEvent{Event: store.Event{ResponseID: f.responseID, Seq: fr.Seq, Type: fr.Type,
			Payload: fr.Payload, Step: step}, splices: fr.Splices})
		f.bytes += fr.Len()
	}
	f.next = frames[len(frames)-1].Seq + 1
	// The tail keeps at least the newest event; all of a commit that ends
	// the response, past the bounds: its readers (a streamed request's own)
	// get its frames from here, not decoded again from the store (an 8 MiB
	// reply's five copies of its text), and the run stops soon after.
	keep := 1
	if protocol.IsTerminal(frames[len(frames)-1].Type) {
		keep = len(frames)
	}
	drop := 0
	for len(f.events)-drop > keep && (len(f.events)-drop > feedMaxEvents || f.bytes > feedMaxBytes) {
		f.bytes -= f.events[drop].frame().Len()
		drop++
	}
	if drop > 0 {
		// Resliced, not copied: copying the tail on every publish would
		// cost a copy of up to feedMaxEvents events per event once the
		// tail is full. The dropped events are collected when append
		// moves the tail to a new array (amortised, as append grows);
		// readers keep the slices they were given, whose elements are
		// never written again.
		f.events = f.events[drop:]
		f.first += int64(drop)
	}
	f.signal()
}

// finish records the terminal state the commit wrote (after publish of
// its frames).
func (f *feed) finish(ff *feedFinal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.final = ff
	f.signal()
}

// close ends the feed: the run stopped here. Readers keep what they got
// and go on from the store.
func (f *feed) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		f.signal()
	}
}

// signal wakes the readers waiting for a change. Called with f.mu held.
func (f *feed) signal() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// feedRead is what a reader positioned after a sequence number gets from
// a feed.
type feedRead struct {
	events  []feedEvent // the events after the position (not to be modified)
	behind  bool        // the position is before the tail: read the store
	ended   bool        // the terminal event is at or before the position
	closed  bool        // nothing more comes through the feed
	changed <-chan struct{}
}

// since returns the events after seq after, or why there are none.
func (f *feed) since(after int64) feedRead {
	f.mu.Lock()
	defer f.mu.Unlock()
	rd := feedRead{closed: f.closed, changed: f.changed}
	switch {
	case after+1 < f.first:
		rd.behind = true
	case after+1 < f.next:
		rd.events = f.events[after+1-f.first:]
	case f.final != nil:
		rd.ended = true
	}
	return rd
}

// awaitFinal waits until the response's terminal commit is in the feed and
// returns its state, or returns nil when the feed closed without it (the
// run stopped here unfinished).
func (f *feed) awaitFinal(ctx context.Context) (*feedFinal, error) {
	for {
		f.mu.Lock()
		final, closed, changed := f.final, f.closed, f.changed
		f.mu.Unlock()
		if final != nil || closed {
			return final, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("host: wait for response %s: %w", f.responseID, ctx.Err())
		}
	}
}

// apply returns r, the response's record as read before its terminal
// commit, as that commit left it.
func (ff *feedFinal) apply(r *store.Response) *store.Response {
	c := *r
	c.Status, c.Snapshot, c.Error, c.Usage = ff.status, ff.snapshot, ff.errJSON, ff.usage
	c.NextSeq, c.CommitStep, c.UpdatedAt = ff.nextSeq, ff.commitStep, ff.at
	at := ff.at
	c.CompletedAt = &at
	// A response ends cancelled only after its cancel was recorded.
	c.CancelRequested = c.CancelRequested || ff.status == store.StatusCancelled
	return &c
}
