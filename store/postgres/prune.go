package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/store"
)

var _ store.ResponsePruner = (*Store)(nil)

// ResponsePrune deletes up to p.Limit terminal responses completed before
// p.Before with their events (and a run whose responses are all gone, with
// its checkpoints and parts); see store.ResponsePruner for which are kept.
// Candidates are found through the index responses_completed and locked
// with their run FOR UPDATE SKIP LOCKED: hosts pruning at once take
// disjoint batches, and a run being committed or continued is skipped
// (its responses are retried by a later call).
func (s *Store) ResponsePrune(ctx context.Context, p *store.ResponsePruneParams) (int, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return 0, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = store.ResponsePruneLimitDefault
	}
	var deleted []string
	var runs []string
	err := s.writeTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		deleted, runs = deleted[:0], runs[:0]
		rows, err := tx.Query(ctx, `SELECT r.id, r.run_id, r.id = u.head_response_id FROM responses r
			JOIN runs u ON u.id = r.run_id
			WHERE r.completed_at IS NOT NULL AND r.completed_at < $1 AND NOT u.active
			ORDER BY r.completed_at LIMIT $2
			FOR UPDATE OF u, r SKIP LOCKED`, normTime(p.Before), limit)
		if err != nil {
			return err
		}
		type cand struct {
			id, run string
			head    bool
		}
		cands, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (cand, error) {
			var c cand
			err := row.Scan(&c.id, &c.run, &c.head)
			return c, err
		})
		if err != nil {
			return err
		}
		// Heads last: deleting one moves the head to the newest remaining
		// response, which must not be one deleted after it.
		for _, head := range []bool{false, true} {
			for _, c := range cands {
				if c.head != head {
					continue
				}
				if err := s.pruneOne(ctx, tx, c.id, c.run); err != nil {
					return err
				}
				deleted, runs = append(deleted, c.id), append(runs, c.run)
			}
		}
		return nil
	})
	if err != nil {
		return 0, mapError("prune responses", "", 0, err)
	}
	for i, id := range deleted {
		s.parts.forget(runs[i])
		s.announce(id)
	}
	return len(deleted), nil
}

// pruneOne deletes one locked response of runID and its events, and fixes
// its run as ResponseDelete does.
func (s *Store) pruneOne(ctx context.Context, tx pgx.Tx, id, runID string) error {
	if err := unreferBlobs(ctx, tx, runID, id); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "DELETE FROM responses WHERE id = $1", id); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "DELETE FROM event_records WHERE response_id = $1", id); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "DELETE FROM idempotency_keys WHERE response_id = $1", id); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "DELETE FROM pending_calls WHERE response_id = $1", id); err != nil {
		return err
	}
	if err := fixRunAfterDelete(ctx, tx, runID, id); err != nil {
		return err
	}
	return s.notifyTx(ctx, tx, id)
}
