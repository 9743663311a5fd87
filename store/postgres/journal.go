package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/superstep/superstep/store"
)

var _ store.Journal = (*Store)(nil)

// journalAppendSQL appends the entries in one statement, fenced: the run's
// row is locked (FOR SHARE) with the fence's conditions, so a concurrent
// claim either waits for the append or, once committed, makes the
// conditions false (the row is re-checked after the wait) and nothing is
// inserted. $7 is the caller's Now, else the database's clock.
const journalAppendSQL = `WITH r AS (
		SELECT id FROM runs WHERE id = $1 AND lease_epoch = $2 AND lease_owner <> ''
			AND lease_expires_at > coalesce($7::timestamptz, now()) AND active AND last_step + 1 = $3
		FOR SHARE)
	INSERT INTO journal (run_id, step, epoch, key, hash, data, created_at)
	SELECT r.id, $3, $2, e.k, e.h, e.d, coalesce($7::timestamptz, now())
	FROM r, unnest($4::text[], $5::text[], $6::bytea[]) WITH ORDINALITY AS e(k, h, d, n)
	ORDER BY e.n`

// JournalAppend appends p.Entries to the journal of (p.RunID, p.Step) in
// one statement, fenced like EventAppend. See store.Journal.
func (s *Store) JournalAppend(ctx context.Context, p *store.JournalAppendParams) error {
	if _, err := s.begin(p.Now); err != nil {
		return err
	}
	if len(p.Entries) == 0 {
		return nil
	}
	keys := make([]string, len(p.Entries))
	hashes := make([]string, len(p.Entries))
	data := make([][]byte, len(p.Entries))
	for i, e := range p.Entries {
		keys[i], hashes[i], data[i] = e.Key, e.Hash, e.Data
	}
	var n int64
	err := s.write(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		tag, err := conn.Exec(ctx, journalAppendSQL, p.RunID, p.Epoch, p.Step, keys, hashes, data, callTime(p.Now))
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return mapError(fmt.Sprintf("journal append run %s step %d", p.RunID, p.Step), p.RunID, p.Epoch, err)
	}
	if n > 0 {
		return nil
	}
	return s.journalRefusal(ctx, p)
}

// CreateJournalAppend writes c, then p under the claim c made, in one
// transaction: BEGIN, the create and the insert in one pipeline, then
// COMMIT once the insert is known to have passed the fence (an insert
// the fence stops is no error to the server, which would commit the
// create alone). Two round trips and one commit flush, where
// ResponseCreate and JournalAppend make two of each
// (store.CreateJournaler). The entries are made at store.NewRunEpoch,
// the claim every new run's create makes.
func (s *Store) CreateJournalAppend(ctx context.Context, c *store.ResponseCreateParams, p *store.JournalAppendParams) (*store.ResponseCreateResult, error) {
	if err := store.CheckCreateJournal(c, p); err != nil {
		return nil, fmt.Errorf("store/postgres: %w", err)
	}
	if _, err := s.begin(c.Now); err != nil {
		return nil, err
	}
	if err := validateCreate(c); err != nil {
		return nil, err
	}
	cc := newCreateCall(c, callTime(c.Now))
	keys := make([]string, len(p.Entries))
	hashes := make([]string, len(p.Entries))
	data := make([][]byte, len(p.Entries))
	for i, e := range p.Entries {
		keys[i], hashes[i], data[i] = e.Key, e.Hash, e.Data
	}
	err := s.write(ctx, func(ctx context.Context, conn *pgxpool.Conn) (err error) {
		defer func() {
			if err != nil {
				// Ends the transaction if it is open (a no-op warning
				// otherwise); a broken connection is dropped by the pool.
				_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
			}
		}()
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(cc.sql(false), cc.args...).QueryRow(func(row pgx.Row) error { return row.Scan(cc.dest()...) })
		b.Queue(journalAppendSQL, p.RunID, int64(store.NewRunEpoch), p.Step, keys, hashes, data, callTime(p.Now)).Exec(
			func(tag pgconn.CommandTag) error {
				if tag.RowsAffected() != int64(len(p.Entries)) {
					// The run this transaction creates is claimed: only a
					// step other than its first misses the fence.
					return fmt.Errorf("%w: run %s: journal of step %d of a new run", store.ErrConflict, p.RunID, p.Step)
				}
				return nil
			})
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		_, err = conn.Exec(ctx, "COMMIT")
		return err
	})
	if err != nil {
		return nil, mapError("create response "+c.Response.ID+" with its journal", c.RunID, 0, err)
	}
	res := cc.result()
	if cc.enc != nil {
		s.parts.set(c.RunID, cc.enc.all, res.Run.Lease.Epoch, res.Run.LastStep)
	}
	return res, nil
}

var _ store.CreateJournaler = (*Store)(nil)

// journalRefusal explains an append that inserted nothing: which of the
// fence's conditions failed.
func (s *Store) journalRefusal(ctx context.Context, p *store.JournalAppendParams) error {
	var (
		epoch, last  int64
		owner        string
		active, live bool
	)
	err := s.pool.QueryRow(ctx, `SELECT lease_epoch, lease_owner, lease_expires_at > coalesce($2::timestamptz, now()),
		active, last_step FROM runs WHERE id = $1`, p.RunID, callTime(p.Now)).Scan(&epoch, &owner, &live, &active, &last)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("store/postgres: journal append run %s: %w", p.RunID, store.ErrNotFound)
	case err != nil:
		return mapError("journal append run "+p.RunID, p.RunID, p.Epoch, err)
	case epoch != p.Epoch || owner == "" || !live:
		return fmt.Errorf("store/postgres: journal append: %w", &store.FencedError{RunID: p.RunID, Epoch: p.Epoch, CurrentEpoch: epoch})
	}
	return fmt.Errorf("%w: run %s: journal of step %d (last step %d, active %v)", store.ErrConflict, p.RunID, p.Step, last, active)
}

// JournalList returns the entries of (runID, step) in append order.
func (s *Store) JournalList(ctx context.Context, runID string, step int64) ([]store.JournalEntry, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, epoch, key, hash, data, created_at FROM journal
		WHERE run_id = $1 AND step = $2 ORDER BY seq`, runID, step)
	if err != nil {
		return nil, mapError("journal list run "+runID, runID, 0, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.JournalEntry, error) {
		e := store.JournalEntry{RunID: runID, Step: step}
		err := row.Scan(&e.Seq, &e.Epoch, &e.Key, &e.Hash, &e.Data, &e.CreatedAt)
		return e, err
	})
	if err != nil {
		return nil, mapError("journal list run "+runID, runID, 0, err)
	}
	return out, nil
}
