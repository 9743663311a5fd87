package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/store"
)

// EventAppend appends live events to the run's head response, fenced by the
// lease like Commit; the events get Step -1. Concurrent calls are
// group-committed: written together in one transaction, each succeeding or
// failing alone.
func (s *Store) EventAppend(ctx context.Context, p *store.EventAppendParams) error {
	if _, err := s.begin(p.Now); err != nil {
		return err
	}
	if err := validateWrite("append events", "", p.Events, false); err != nil {
		return err
	}
	if len(p.Events) == 0 {
		return nil
	}
	return s.appends.do(ctx, p)
}

// EventList returns the response's events with Seq > After, in order,
// at most Limit of them and, with MaxBytes, ending with the event whose
// payload reaches MaxBytes.
func (s *Store) EventList(ctx context.Context, p *store.EventListParams) ([]store.Event, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = store.EventListLimitDefault
	}
	op := "list events of " + p.ResponseID
	rows, err := s.queryEvents(ctx, p, limit)
	if err != nil {
		return nil, mapError(op, "", 0, err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Event, error) {
		e := store.Event{ResponseID: p.ResponseID}
		err := row.Scan(&e.Seq, &e.Type, &e.Payload, &e.Step)
		return e, err
	})
	if err != nil {
		return nil, mapError(op, "", 0, err)
	}
	if len(events) == 0 {
		// Tell an empty page from an unknown response.
		var one int
		err := s.pool.QueryRow(ctx, "SELECT 1 FROM responses WHERE id = $1", p.ResponseID).Scan(&one)
		if err != nil {
			return nil, mapError(op, "", 0, err)
		}
	}
	return events, nil
}

// queryEvents selects the page of events. With MaxBytes, a first pass over
// the page's payload lengths (octet_length reads no TOASTed bytes) finds
// the last event whose preceding payloads stay below the bound, and only
// the events up to it are read whole.
func (s *Store) queryEvents(ctx context.Context, p *store.EventListParams, limit int) (pgx.Rows, error) {
	if p.MaxBytes <= 0 {
		return s.pool.Query(ctx, `SELECT seq, type, payload, step FROM events
			WHERE response_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, p.ResponseID, p.After, limit)
	}
	return s.pool.Query(ctx, `WITH sizes AS (
			SELECT seq, sum(coalesce(octet_length(payload), 0)) OVER (ORDER BY seq)
				- coalesce(octet_length(payload), 0) AS before
			FROM events WHERE response_id = $1 AND seq > $2 ORDER BY seq LIMIT $3)
		SELECT seq, type, payload, step FROM events
		WHERE response_id = $1 AND seq > $2 AND seq <= (SELECT max(seq) FROM sizes WHERE before < $4)
		ORDER BY seq`, p.ResponseID, p.After, limit, p.MaxBytes)
}

// EventWait blocks until the response has an event with Seq > after, the
// response is deleted, or ctx ends. Wake-ups come from LISTEN/NOTIFY (sent
// inside the writing transaction, so only after its commit); it may return
// nil spuriously, for example after the listener reconnected.
func (s *Store) EventWait(ctx context.Context, responseID string, after int64) error {
	if _, err := s.begin(time.Time{}); err != nil {
		return err
	}
	ch, unregister := s.listen.register(responseID)
	defer unregister()
	if s.closed.Load() {
		return store.ErrClosed
	}
	// Registered first, checked second: a notification sent after the check
	// finds the waiter.
	var next int64
	err := s.pool.QueryRow(ctx, "SELECT next_seq FROM responses WHERE id = $1", responseID).Scan(&next)
	if err != nil {
		err = mapError("wait for events of "+responseID, "", 0, err)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	if next-1 > after {
		return nil
	}
	poll := time.NewTimer(s.opts.PollInterval)
	defer poll.Stop()
	select {
	case <-poll.C:
		return nil
	case <-ch:
		if s.closed.Load() {
			return store.ErrClosed
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
