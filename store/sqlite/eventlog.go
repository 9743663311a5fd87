package sqlite

import (
	"context"
	"database/sql"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/internal/eventrec"
)

// The event log is stored as records (migration 005): the events of one
// write are one row of event_records, keyed by the response's number and
// the record's first seq, covering first_seq..last_seq. A commit so costs
// one row whatever its number of events, and EventList slices records by
// seq.

var _ store.EventRecordLister = (*Store)(nil)

// encodeRecord returns the record of events (nil for none). Writers call
// it before they queue for the writer: encoding (compressing, for a long
// record) is the caller's CPU, run in parallel, not the single writer's
// time inside its transaction.
func encodeRecord(events []store.EventInput) []byte {
	if len(events) == 0 {
		return nil
	}
	return eventrec.Encode(events)
}

// insertRecord appends events, written at step, to the log of the
// response numbered respNum as one record, data (encodeRecord(events));
// none for no events. The caller has checked that they continue the log
// (checkSeq), so the record starts where the last one ended.
func insertRecord(ctx context.Context, tx *sql.Conn, respNum, step int64, events []store.EventInput, data []byte) error {
	if len(events) == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO event_records (k, last_seq, step, data) VALUES (?, ?, ?, ?)",
		logKey(respNum, events[0].Seq), events[len(events)-1].Seq, step, data)
	return mapError("insert event record", err)
}

// eventPageSQL selects the records holding seqs ?2's low bits up to ?3's of
// the response whose first key is ?1: from the record that holds ?2 (the
// greatest key at or below it, found by one backward probe of the rowid
// B-tree) on, in order. A log whose record for ?2 is missing (damage) reads
// from the next record, and the gap shows in the seqs.
const eventPageSQL = `SELECT first_seq, last_seq, step, data FROM event_records
	WHERE k >= coalesce((SELECT k FROM event_records WHERE k BETWEEN ?1 AND ?2 ORDER BY k DESC LIMIT 1), ?2)
	AND k <= ?3 ORDER BY k`

// EventList returns the response's events with Seq > p.After, in order, at
// most p.Limit (default store.EventListLimitDefault), ending once their
// payloads reach p.MaxBytes when it is positive; store.ErrNotFound for an
// unknown response. A record whose data does not hold its range's events
// is store.ErrCorrupt.
func (s *Store) EventList(ctx context.Context, p *store.EventListParams) ([]store.Event, error) {
	if err := s.checkOpen("event list"); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = store.EventListLimitDefault
	}
	tx, err := s.rdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, mapError("event list", err)
	}
	defer tx.Rollback()
	var num int64
	if err := tx.QueryRowContext(ctx, "SELECT num FROM responses WHERE id = ?", p.ResponseID).Scan(&num); err != nil {
		return nil, mapError("event list "+p.ResponseID, err)
	}
	if p.After >= lowMax {
		return nil, nil
	}
	from := max(p.After, -1) + 1
	// No record starting after the page's last seq is needed.
	to := min(from+int64(limit)-1, lowMax)
	rows, err := tx.QueryContext(ctx, eventPageSQL, logKey(num, 0), logKey(num, from), logKey(num, to))
	if err != nil {
		return nil, mapError("event list", err)
	}
	defer rows.Close()
	page := eventrec.NewPage(p.ResponseID, from, limit, p.MaxBytes)
	for rows.Next() {
		var rec store.EventRecord
		var data []byte
		if err := rows.Scan(&rec.FirstSeq, &rec.LastSeq, &rec.Step, &data); err != nil {
			return nil, mapError("event list", err)
		}
		// SQLite steps the query row by row: stopping here reads no
		// record past the page.
		if full, err := page.Add(rec, data); err != nil || full {
			return page.Events, err
		}
	}
	return page.Events, mapError("event list", rows.Err())
}

// EventRecords returns the records of the response's log in seq order
// (store.EventRecordLister).
func (s *Store) EventRecords(ctx context.Context, responseID string) ([]store.EventRecord, error) {
	if err := s.checkOpen("event records"); err != nil {
		return nil, err
	}
	tx, err := s.rdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, mapError("event records", err)
	}
	defer tx.Rollback()
	var num int64
	if err := tx.QueryRowContext(ctx, "SELECT num FROM responses WHERE id = ?", responseID).Scan(&num); err != nil {
		return nil, mapError("event records "+responseID, err)
	}
	rows, err := tx.QueryContext(ctx, "SELECT first_seq, last_seq, step FROM event_records WHERE k BETWEEN ? AND ? ORDER BY k",
		logKey(num, 0), logKey(num, lowMax))
	if err != nil {
		return nil, mapError("event records", err)
	}
	defer rows.Close()
	var recs []store.EventRecord
	for rows.Next() {
		var r store.EventRecord
		if err := rows.Scan(&r.FirstSeq, &r.LastSeq, &r.Step); err != nil {
			return nil, mapError("event records", err)
		}
		recs = append(recs, r)
	}
	return recs, mapError("event records", rows.Err())
}
