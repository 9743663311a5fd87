package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/superstep/superstep/store"
)

var _ store.Journal = (*Store)(nil)

// JournalAppend appends p.Entries to the journal of (p.RunID, p.Step) in
// one write, group-committed with other writes and fenced like
// EventAppend. See store.Journal.
func (s *Store) JournalAppend(ctx context.Context, p *store.JournalAppendParams) error {
	if len(p.Entries) == 0 {
		return nil
	}
	now := orNow(p.Now)
	return s.write(ctx, "journal append", func(ctx context.Context, tx *sql.Conn) error {
		run, err := getRunRow(ctx, tx, p.RunID)
		if err != nil {
			return err
		}
		if p.Epoch != run.Lease.Epoch || run.Lease.Owner == "" || !now.Before(run.Lease.ExpiresAt) {
			return &store.FencedError{RunID: p.RunID, Epoch: p.Epoch, CurrentEpoch: run.Lease.Epoch}
		}
		return insertJournal(ctx, tx, run, p.Epoch, p.Step, p.Entries, now)
	})
}

// CreateJournalAppend writes c, then p under the claim c made, in one
// transaction (store.CreateJournaler).
func (s *Store) CreateJournalAppend(ctx context.Context, c *store.ResponseCreateParams, p *store.JournalAppendParams) (*store.ResponseCreateResult, error) {
	if err := store.CheckCreateJournal(c, p); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if err := validateCreate(c); err != nil {
		return nil, err
	}
	cnow, now := orNow(c.Now), orNow(p.Now)
	resp, w := prepareCreate(c, cnow)
	var run *store.Run
	err := s.write(ctx, "create and journal append", func(ctx context.Context, tx *sql.Conn) (err error) {
		if run, err = createTx(ctx, tx, c, resp, w, cnow); err != nil {
			return err
		}
		// The run as the create wrote it: no read back on the writer.
		return insertJournal(ctx, tx, &runRow{Run: *run}, run.Lease.Epoch, p.Step, p.Entries, now)
	})
	if err != nil {
		return nil, err
	}
	return &store.ResponseCreateResult{Response: resp, Run: run}, nil
}

var _ store.CreateJournaler = (*Store)(nil)

// AppendsJournal reports that EventAppend appends
// EventAppendParams.Journal in its transaction (store.JournalBatcher).
func (s *Store) AppendsJournal() bool { return true }

var _ store.JournalBatcher = (*Store)(nil)

// insertJournal appends entries to the journal of (run, step), made under
// epoch, which the caller checked is the run's (the fence).
func insertJournal(ctx context.Context, tx *sql.Conn, run *runRow, epoch, step int64, entries []store.JournalInput, now time.Time) error {
	if !run.Active || step != run.LastStep+1 {
		return fmt.Errorf("%w: run %s: journal of step %d (last step %d, active %v)",
			store.ErrConflict, run.ID, step, run.LastStep, run.Active)
	}
	for _, e := range entries {
		_, err := tx.ExecContext(ctx, `INSERT INTO journal (run_id, step, epoch, key, hash, data, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, run.ID, step, epoch, e.Key, e.Hash, e.Data, now.UnixNano())
		if err != nil {
			return mapError("journal append", err)
		}
	}
	return nil
}

// JournalList returns the entries of (runID, step) in append order.
func (s *Store) JournalList(ctx context.Context, runID string, step int64) ([]store.JournalEntry, error) {
	if err := s.checkOpen("journal list"); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT seq, epoch, key, hash, data, created_at FROM journal
		WHERE run_id = ? AND step = ? ORDER BY seq`, runID, step)
	if err != nil {
		return nil, mapError("journal list", err)
	}
	defer rows.Close()
	var out []store.JournalEntry
	for rows.Next() {
		e := store.JournalEntry{RunID: runID, Step: step}
		var created int64
		if err := rows.Scan(&e.Seq, &e.Epoch, &e.Key, &e.Hash, &e.Data, &created); err != nil {
			return nil, mapError("journal list", err)
		}
		e.CreatedAt = time.Unix(0, created)
		out = append(out, e)
	}
	return out, mapError("journal list", rows.Err())
}

// pruneJournalTx deletes the journal of the run's steps up to step, in a
// commit's transaction (CommitParams.JournalPrune).
func pruneJournalTx(ctx context.Context, tx *sql.Conn, runID string, step int64) error {
	_, err := tx.ExecContext(ctx, "DELETE FROM journal WHERE run_id = ? AND step <= ?", runID, step)
	return mapError("journal prune", err)
}
