package responses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
)

// streamItem is one step of the host's event iterator, carried from the
// goroutine that follows the log to the handler that writes the stream.
type streamItem struct {
	ev  protocol.Frame
	err error
}

// streamEvents replies with the response's events after `after` as SSE:
// the stored log first, then live events, until the terminal event; then
// "data: [DONE]" and the handler returns, which ends the body. The caller
// has checked that the response exists and may be streamed, so every
// error from here on is written as an error frame.
//
// started is the response when the caller has just created it (its events
// are read without reading it back), nil otherwise.
func (s *server) streamEvents(w http.ResponseWriter, r *http.Request, id, owner string, after int64, started *store.Response) {
	sw, err := newSSEWriter(w, s.opts.WriteTimeout)
	if err != nil {
		return
	}
	s.metrics.streams.Inc()
	defer s.metrics.streams.Dec()

	ctx, cancel := context.WithCancel(r.Context())
	q := newStreamQueue()
	var wg sync.WaitGroup
	// The follower goroutine is owned by this handler: cancel stops it and
	// the handler waits for it before returning.
	defer wg.Wait()
	defer cancel()
	events := s.host.Frames(ctx, id, owner, after)
	if started != nil {
		events = s.host.FramesStarted(ctx, started, after)
	}
	wg.Go(func() { s.follow(ctx, events, q) })

	last, ended := s.pump(ctx, sw, q, after)
	if ended {
		last.err = s.checkEnd(r.Context(), id, owner, last, after)
		if last.err == nil {
			_ = sw.done()
			return
		}
	}
	if r.Context().Err() == nil && last.err != nil && finalStreamError(last.err) {
		s.writeErrorFrame(sw, mapNotFound(last.err, id), last.ev.Seq)
		return
	}
	// The stream stopped short of its terminal event: the client went
	// away, the server is shutting down (which cancels the request context
	// too), or the store failed a read even after the host's retries.
	// Break the connection rather than end the body cleanly or send an
	// error frame (SDKs raise on one and do not resume), so a client still
	// reading sees an unexpected EOF and resumes from its cursor.
	s.log.LogAttrs(ctx, slog.LevelDebug, "responses: stream ended before the terminal event; aborting the connection",
		slog.String("response_id", id), slog.Any("err", last.err))
	cancel()
	wg.Wait()
	panic(http.ErrAbortHandler)
}

// errStreamCut marks a log that ended short of its terminal event for no
// reason a client can act on; the connection is broken so it resumes.
var errStreamCut = fmt.Errorf("responses: event log ended before the terminal event: %w", context.Canceled)

// checkEnd decides whether a stream whose event sequence ended may close
// cleanly (nil): its last event was terminal, or nothing was left to send
// after the cursor of a terminal response. A response deleted meanwhile
// gives a not-found error frame; anything else breaks the connection.
func (s *server) checkEnd(ctx context.Context, id, owner string, last streamItem, after int64) error {
	if protocol.IsTerminal(last.ev.Type) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.StoreTimeout)
	defer cancel()
	resp, err := s.host.Get(ctx, id, owner)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return responseNotFound(id)
	case err != nil:
		return err
	case last.ev.Seq == after && resp.Status.Terminal():
		return nil
	}
	return errStreamCut
}

// streamQueue carries the host's events from the follower to the pump.
// It holds up to streamQueueLen events and, past the first, no more than
// streamQueueBytes of their payloads: the pump writes what is queued and
// flushes once the queue is empty, so a burst of small frames (a
// committed superstep's, a live append's) leaves in one flush, while a
// long reply's frames, megabytes each, still wait in the follower one at
// a time.
type streamQueue struct {
	items   chan streamItem
	pending atomic.Int64  // payload bytes queued and not yet written
	space   chan struct{} // a token after each write, for a follower waiting for room
}

const (
	streamQueueLen   = 64
	streamQueueBytes = 256 << 10
)

func newStreamQueue() *streamQueue {
	return &streamQueue{items: make(chan streamItem, streamQueueLen), space: make(chan struct{}, 1)}
}

// put queues it once there is room; false if ctx ended first. One
// goroutine puts (the follower), so the room it saw stays there.
func (q *streamQueue) put(ctx context.Context, it streamItem) bool {
	n := int64(it.ev.Len())
	for p := q.pending.Load(); p > 0 && p+n > streamQueueBytes; p = q.pending.Load() {
		select {
		case <-q.space:
		case <-ctx.Done():
			return false
		}
	}
	q.pending.Add(n)
	select {
	case q.items <- it:
		return true
	case <-ctx.Done():
		return false
	}
}

// written gives back the room of it, which the pump has written.
func (q *streamQueue) written(it streamItem) {
	q.pending.Add(-int64(it.ev.Len()))
	select {
	case q.space <- struct{}{}:
	default: // a token is there already
	}
}

// follow queues the host's events until the iterator ends or ctx ends,
// then closes the queue.
func (s *server) follow(ctx context.Context, events iter.Seq2[protocol.Frame, error], q *streamQueue) {
	defer close(q.items)
	for ev, err := range events {
		if !q.put(ctx, streamItem{ev: ev, err: err}) || err != nil {
			return
		}
	}
}

// pump writes events as they arrive, flushing whenever it has written all
// that was queued, and a keep-alive comment whenever the stream was idle
// for KeepAlive. It reports whether the host's sequence ended (after the
// terminal event, or at once when nothing was left); otherwise last.err
// holds what stopped it. last.ev is the last event written (Seq = after
// when none was).
func (s *server) pump(ctx context.Context, sw *sseWriter, q *streamQueue, after int64) (last streamItem, ended bool) {
	last.ev.Seq = after
	keepAlive := time.NewTicker(s.opts.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case it, open := <-q.items:
			if !open {
				return last, ctx.Err() == nil
			}
			if it.err != nil {
				// What was written reaches the client before the stream
				// stops: it resumes from there.
				_ = sw.flush()
				last.err = it.err
				return last, false
			}
			err := sw.writeFrame(&it.ev)
			q.written(it)
			terminal := protocol.IsTerminal(it.ev.Type)
			if err == nil && (terminal || len(q.items) == 0) {
				err = sw.flush()
			}
			if err != nil {
				last.err = err
				return last, false
			}
			s.metrics.events.Inc()
			last.ev = it.ev
			if terminal {
				return last, true
			}
			keepAlive.Reset(s.opts.KeepAlive)
		case <-keepAlive.C:
			if err := sw.comment("keep-alive"); err != nil {
				last.err = err
				return last, false
			}
		case <-ctx.Done():
			last.err = ctx.Err()
			return last, false
		}
	}
}

// finalStreamError reports whether err ends a stream for good, with an
// error frame: the response is gone or the request is wrong. Any other
// failure (a store read error, transient or not yet classified) breaks the
// connection instead, so the client resumes with starting_after.
func finalStreamError(err error) bool {
	var ae *apiError
	return errors.Is(err, store.ErrNotFound) || (errors.As(err, &ae) && ae.Status < 500)
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// errorEvent is the data of an "event: error" frame. It has the flat
// fields the OpenAPI schema requires and a nested "error" object, because
// openai-go and openai-python only treat a frame with a top-level "error"
// key as an error (responses-api.md §0.5).
type errorEvent struct {
	Type           string      `json:"type"`
	SequenceNumber int64       `json:"sequence_number"`
	Code           *string     `json:"code"`
	Message        string      `json:"message"`
	Param          *string     `json:"param"`
	Error          errorObject `json:"error"`
}

// writeErrorFrame writes err as an error frame. The error is not part of
// the response's log, so it does not take a new sequence number: it
// repeats the last one written (a raw client that keeps it as its cursor
// resumes without a gap), or 0 when nothing was written yet.
func (s *server) writeErrorFrame(sw *sseWriter, err error, lastSeq int64) {
	ae := toAPIError(err)
	if ae.Status >= 500 {
		s.log.Error("responses: stream failed", slog.Any("err", err))
	}
	seq := max(lastSeq, 0)
	body := ae.body()
	data, _ := json.Marshal(errorEvent{Type: "error", SequenceNumber: seq, Code: body.Error.Code,
		Message: body.Error.Message, Param: body.Error.Param, Error: body.Error})
	_ = sw.event("error", data)
}
