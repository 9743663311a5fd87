package host

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
)

// responseNotFound is the error for an unknown or invisible response.
func responseNotFound(id string) error {
	return fmt.Errorf("%w: response with id '%s' not found", store.ErrNotFound, id)
}

func (h *Host) get(ctx context.Context, id, owner string) (*store.Response, error) {
	r, err := h.store.ResponseGet(ctx, id)
	return ownedBy(r, err, id, owner)
}

// view is get without the response's request and recorded input, when
// the store can leave them unread (store.ResponseViewReader): for readers
// that show the response or follow its log.
func (h *Host) view(ctx context.Context, id, owner string) (*store.Response, error) {
	r, err := h.readView(ctx, id)
	return ownedBy(r, err, id, owner)
}

// readView reads response id without its request and recorded input when
// the store can (store.ResponseViewReader), whole otherwise.
func (h *Host) readView(ctx context.Context, id string) (*store.Response, error) {
	if vr, ok := h.store.(store.ResponseViewReader); ok {
		return vr.ResponseView(ctx, id)
	}
	return h.store.ResponseGet(ctx, id)
}

// ownedBy returns r, read for id (with err), as owner sees it: not found
// when it is another owner's.
func ownedBy(r *store.Response, err error, id, owner string) (*store.Response, error) {
	if err != nil {
		return nil, fmt.Errorf("host: get response %s: %w", id, err)
	}
	if r.Owner != owner {
		return nil, responseNotFound(id)
	}
	return rendered(r)
}

func (h *Host) wait(ctx context.Context, id, owner string) (*store.Response, error) {
	return h.waitFrom(ctx, id, owner, nil)
}

// waitStarted is wait starting from resp, as Create or Fork returned it
// (what wait's first read would find, but for a cancel recorded since,
// which the run's terminal commit shows either way): a run driven here is
// waited for in memory without reading the response back first. A
// response already finished is read as wait reads it.
func (h *Host) waitStarted(ctx context.Context, resp *store.Response) (*store.Response, error) {
	if resp.Finished() {
		return h.wait(ctx, resp.ID, resp.Owner)
	}
	return h.waitFrom(ctx, resp.ID, resp.Owner, resp)
}

// waitFrom waits until response id is finished, starting from r, the
// response as last read (nil: read it first).
func (h *Host) waitFrom(ctx context.Context, id, owner string, r *store.Response) (*store.Response, error) {
	for {
		if r == nil {
			var err error
			if r, err = h.get(ctx, id, owner); err != nil {
				return nil, err
			}
		}
		if r.Finished() {
			return r, nil // a recorded cancel is waited for until committed
		}
		// A run driven here: the response as its terminal commit wrote
		// it comes from memory, instead of reading the store after every
		// commit; when the run stops here unfinished (fenced, handed
		// over), the store is read again.
		if lr := h.lookupRun(r.RunID, id); lr != nil {
			final, err := lr.feed.awaitFinal(ctx)
			if err != nil {
				return nil, err
			}
			if final != nil {
				return final.apply(r), nil
			}
			r = nil // stopped here unfinished (and forgotten): read the store
			continue
		}
		if err := h.store.EventWait(ctx, id, r.NextSeq-1); err != nil {
			return nil, fmt.Errorf("host: wait for response %s: %w", id, err)
		}
		r = nil
	}
}

func (h *Host) events(ctx context.Context, id, owner string, after int64) iter.Seq2[store.Event, error] {
	return whole(h.ownedLog(ctx, id, owner, after))
}

// ownedLog is logOf for a response owner can read: the log of events and
// of Frames, with each event as logOf yields it.
func (h *Host) ownedLog(ctx context.Context, id, owner string, after int64) iter.Seq2[feedEvent, error] {
	return func(yield func(feedEvent, error) bool) {
		resp, err := h.view(ctx, id, owner)
		if err != nil {
			yield(feedEvent{}, err)
			return
		}
		h.logOf(ctx, resp.ID, resp.RunID, after)(yield)
	}
}

// eventsOf is events once the response's run is known.
func (h *Host) eventsOf(ctx context.Context, id, runID string, after int64) iter.Seq2[store.Event, error] {
	return whole(h.logOf(ctx, id, runID, after))
}

// whole yields the events of seq with their payloads whole.
func whole(seq iter.Seq2[feedEvent, error]) iter.Seq2[store.Event, error] {
	return func(yield func(store.Event, error) bool) {
		for fe, err := range seq {
			if !yield(fe.event(), err) {
				return
			}
		}
	}
}

// asFrames yields the events of seq as their frames, spliced as held.
func asFrames(seq iter.Seq2[feedEvent, error]) iter.Seq2[protocol.Frame, error] {
	return func(yield func(protocol.Frame, error) bool) {
		for fe, err := range seq {
			if !yield(*fe.frame(), err) {
				return
			}
		}
	}
}

// logOf yields the log of response id (of run runID) after `after`, each
// event with the splices of its frame when it comes from the run's feed
// (the store's events are whole). It keeps the ids, not the response
// (whose request may be megabytes).
func (h *Host) logOf(ctx context.Context, id, runID string, after int64) iter.Seq2[feedEvent, error] {
	return func(yield func(feedEvent, error) bool) {
		if after < -1 {
			after = -1
		}
		for {
			// A run driven here: its durable events come from memory
			// while the reader is within the tail the run keeps; behind
			// it, and once the run stops here, from the store.
			if lr := h.lookupRun(runID, id); lr != nil {
				var done bool
				if after, done = h.eventsFromFeed(ctx, lr.feed, after, yield); done {
					return
				}
			}
			var evs []store.Event
			err := h.readRetry(ctx, func(ctx context.Context) (err error) {
				evs, err = h.store.EventList(ctx, &store.EventListParams{ResponseID: id, After: after, MaxBytes: eventPageBytes})
				return err
			})
			if err != nil {
				yield(feedEvent{}, fmt.Errorf("host: events of response %s: %w", id, err))
				return
			}
			for _, ev := range evs {
				if err := h.publishFault(ctx, &ev); err != nil {
					yield(feedEvent{}, err)
					return
				}
				if !yield(feedEvent{Event: ev}, nil) || protocol.IsTerminal(ev.Type) {
					return
				}
				after = ev.Seq
			}
			if len(evs) > 0 {
				continue // a full page: read on before waiting
			}
			if done, err := h.logEnded(ctx, id, after); done || err != nil {
				if err != nil {
					yield(feedEvent{}, err)
				}
				return
			}
			if err := h.store.EventWait(ctx, id, after); err != nil {
				yield(feedEvent{}, fmt.Errorf("host: events of response %s: %w", id, err))
				return
			}
		}
	}
}

// eventsFromFeed yields the events after `after` from f until the reader
// stops, the terminal event was yielded, or f cannot serve the reader (it
// is behind f's tail, or f closed): then it returns the position reached
// and done false, and the caller reads on from the store.
func (h *Host) eventsFromFeed(ctx context.Context, f *feed, after int64, yield func(feedEvent, error) bool) (int64, bool) {
	for {
		rd := f.since(after)
		switch {
		case rd.ended:
			return after, true // the reader has seen the terminal event
		case rd.behind:
			return after, false
		}
		for _, fe := range rd.events {
			if err := h.publishFault(ctx, &fe.Event); err != nil {
				yield(feedEvent{}, err)
				return after, true
			}
			if !yield(fe, nil) || protocol.IsTerminal(fe.Type) {
				return after, true
			}
			after = fe.Seq
		}
		if len(rd.events) > 0 {
			continue
		}
		if rd.closed {
			return after, false
		}
		select {
		case <-rd.changed:
		case <-ctx.Done():
			yield(feedEvent{}, fmt.Errorf("host: events of response %s: %w", f.responseID, ctx.Err()))
			return after, true
		}
	}
}

// logEnded reports whether a reader positioned after `after` has seen
// everything: the response is terminal and its log holds nothing more (the
// cursor was at or past the terminal event).
func (h *Host) logEnded(ctx context.Context, id string, after int64) (bool, error) {
	var r *store.Response
	err := h.readRetry(ctx, func(ctx context.Context) (err error) {
		r, err = h.readView(ctx, id)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("host: events of response %s: %w", id, err)
	}
	return r.Finished() && after >= r.NextSeq-1, nil // a recorded cancel's event is still to come
}

// publishFault is the FaultPublish point before ev is handed to a reader.
func (h *Host) publishFault(ctx context.Context, ev *store.Event) error {
	err := h.fault(ctx, &Fault{Point: FaultPublish, ResponseID: ev.ResponseID, Seq: ev.Seq})
	if err != nil {
		h.metrics.failed(opPublish)
		h.log.Warn("host: publishing an event failed; the reader must resume", "response_id", ev.ResponseID,
			"seq", ev.Seq, "err", err)
		return fmt.Errorf("host: events of response %s at %d: %w", ev.ResponseID, ev.Seq, err)
	}
	return nil
}

// eventPageBytes bounds the payload bytes of one page a reader holds, so a
// stalled reader pins at most about this much (plus one event).
const eventPageBytes = 1 << 20

// Bounds of readRetry: each read gets readTimeout, and a failing read is
// tried readAttempts times with doubling pauses from readBackoff (about
// 1.5 s in all), so a short store outage does not end a reader.
const (
	readTimeout  = 15 * time.Second
	readAttempts = 6
	readBackoff  = 50 * time.Millisecond
)

// readRetry runs one store read of a reader with a deadline, retrying it
// while it fails transiently. Not found, closed and corrupt are final;
// every other error counts as transient (store.ErrUnavailable, and errors
// backends do not classify yet: a retried read is harmless).
func (h *Host) readRetry(ctx context.Context, read func(context.Context) error) error {
	pause := readBackoff
	for attempt := 1; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, readTimeout)
		err := read(rctx)
		cancel()
		if err == nil || attempt == readAttempts || ctx.Err() != nil || errors.Is(err, store.ErrNotFound) ||
			errors.Is(err, store.ErrClosed) || errors.Is(err, store.ErrCorrupt) {
			return err
		}
		h.log.Debug("host: a reader's store read failed; retrying", "attempt", attempt, "err", err)
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		pause = min(2*pause, time.Second)
	}
}
