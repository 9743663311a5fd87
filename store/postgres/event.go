package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/internal/eventrec"
)

var _ store.EventRecordLister = (*Store)(nil)

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
// payload reaches MaxBytes. The events are sliced from the records that
// hold them (migration 005); a record whose data does not hold its range's
// events is store.ErrCorrupt.
func (s *Store) EventList(ctx context.Context, p *store.EventListParams) ([]store.Event, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = store.EventListLimitDefault
	}
	op := "list events of " + p.ResponseID
	// Saturating: After may be any int64.
	from := max(p.After, -1) + 1
	if p.After == math.MaxInt64 {
		from = math.MaxInt64
	}
	to := from + int64(limit) - 1
	if to < from {
		to = math.MaxInt64
	}
	rows, err := s.queryEvents(ctx, p, from, to)
	if err != nil {
		return nil, mapError(op, "", 0, err)
	}
	defer rows.Close()
	page := eventrec.NewPage(p.ResponseID, from, limit, p.MaxBytes)
	for rows.Next() {
		var rec store.EventRecord
		var data []byte
		if err := rows.Scan(&rec.FirstSeq, &rec.LastSeq, &rec.Step, &data); err != nil {
			return nil, mapError(op, "", 0, err)
		}
		full, err := page.Add(rec, data)
		if err != nil {
			return nil, fmt.Errorf("store/postgres: %s: %w", op, err)
		}
		if full {
			break
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, mapError(op, "", 0, err)
	}
	if len(page.Events) == 0 {
		// Tell an empty page from an unknown response.
		var one int
		err := s.pool.QueryRow(ctx, "SELECT 1 FROM responses WHERE id = $1", p.ResponseID).Scan(&one)
		if err != nil {
			return nil, mapError(op, "", 0, err)
		}
	}
	return page.Events, nil
}

// eventStartSQL is the first seq of the record that holds seq $2 of
// response $1 (the greatest first_seq at or below it: one backward probe
// of the primary key), or $2 itself when there is none (a log whose
// record for $2 is missing reads from the next record, and the gap shows
// in the seqs).
const eventStartSQL = `coalesce((SELECT first_seq FROM event_records WHERE response_id = $1 AND first_seq <= $2
	ORDER BY first_seq DESC LIMIT 1), $2)`

// queryEvents selects the records holding seqs from..to, in order. With
// MaxBytes, a first pass over the records' payload byte counts (a column:
// no data is read) drops the records a page bounded by MaxBytes cannot
// reach: those after which the whole records between the first and them
// already hold MaxBytes of payloads. (The first record counts for nothing,
// since the page may start inside it.)
func (s *Store) queryEvents(ctx context.Context, p *store.EventListParams, from, to int64) (pgx.Rows, error) {
	if p.MaxBytes <= 0 {
		return s.pool.Query(ctx, `SELECT first_seq, last_seq, step, data FROM event_records
			WHERE response_id = $1 AND first_seq >= `+eventStartSQL+` AND first_seq <= $3
			ORDER BY first_seq`, p.ResponseID, from, to)
	}
	return s.pool.Query(ctx, `WITH w AS (
			SELECT first_seq, sum(bytes) OVER o - bytes - first_value(bytes) OVER o AS before_bytes
			FROM event_records
			WHERE response_id = $1 AND first_seq >= `+eventStartSQL+` AND first_seq <= $3
			WINDOW o AS (ORDER BY first_seq))
		SELECT first_seq, last_seq, step, data FROM event_records
		WHERE response_id = $1 AND first_seq >= `+eventStartSQL+`
			AND first_seq <= (SELECT max(first_seq) FROM w WHERE before_bytes < $4)
		ORDER BY first_seq`, p.ResponseID, from, to, p.MaxBytes)
}

// EventRecords returns the records of the response's log in seq order
// (store.EventRecordLister).
func (s *Store) EventRecords(ctx context.Context, responseID string) ([]store.EventRecord, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	op := "list event records of " + responseID
	rows, err := s.pool.Query(ctx, `SELECT first_seq, last_seq, step FROM event_records
		WHERE response_id = $1 ORDER BY first_seq`, responseID)
	if err != nil {
		return nil, mapError(op, "", 0, err)
	}
	recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.EventRecord, error) {
		var r store.EventRecord
		err := row.Scan(&r.FirstSeq, &r.LastSeq, &r.Step)
		return r, err
	})
	if err != nil {
		return nil, mapError(op, "", 0, err)
	}
	if len(recs) == 0 {
		var one int
		if err := s.pool.QueryRow(ctx, "SELECT 1 FROM responses WHERE id = $1", responseID).Scan(&one); err != nil {
			return nil, mapError(op, "", 0, err)
		}
	}
	return recs, nil
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
