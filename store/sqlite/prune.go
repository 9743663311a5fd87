package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/superstep/superstep/store"
)

var _ store.ResponsePruner = (*Store)(nil)

// pruneCandidatesSQL selects the responses ResponsePrune may delete,
// through the index responses_completed: terminal (completed_at set),
// completed before ?1, of an inactive run.
const pruneCandidatesSQL = `SELECT r.id FROM responses r JOIN runs u ON u.id = r.run_id
	WHERE r.completed_at IS NOT NULL AND r.completed_at < ?1 AND u.active = 0
	ORDER BY r.completed_at LIMIT ?2`

// pruneRecheckSQL checks, by primary key, that response ?2 is still a
// candidate of pruneCandidatesSQL.
const pruneRecheckSQL = `SELECT r.id FROM responses r JOIN runs u ON u.id = r.run_id
	WHERE r.id = ?2 AND r.completed_at IS NOT NULL AND r.completed_at < ?1 AND u.active = 0`

// ResponsePrune deletes up to p.Limit terminal responses completed before
// p.Before with their events (and a run whose responses are all gone, with
// its checkpoints); see store.ResponsePruner for which are kept. The
// candidates are read first, then re-checked and deleted in one write
// transaction, so a run continued meanwhile keeps its responses.
func (s *Store) ResponsePrune(ctx context.Context, p *store.ResponsePruneParams) (int, error) {
	if err := s.checkOpen("response prune"); err != nil {
		return 0, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = store.ResponsePruneLimitDefault
	}
	before := nanos(p.Before)
	ids, err := s.pruneCandidates(ctx, before, limit)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	var deleted int
	err = s.writeWake(ctx, "response prune", ids, func(ctx context.Context, tx *sql.Conn) error {
		deleted = 0
		for _, id := range ids {
			var still string
			err := tx.QueryRowContext(ctx, pruneRecheckSQL, before, id).Scan(&still)
			if errors.Is(err, sql.ErrNoRows) {
				continue // deleted or continued meanwhile
			}
			if err != nil {
				return err
			}
			if err := deleteResponseTx(ctx, tx, id); err != nil {
				return err
			}
			deleted++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return deleted, nil
}

// pruneCandidates reads the ids of up to limit responses to prune.
func (s *Store) pruneCandidates(ctx context.Context, before int64, limit int) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, pruneCandidatesSQL, before, limit)
	if err != nil {
		return nil, mapError("response prune", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, mapError("response prune", err)
		}
		ids = append(ids, id)
	}
	return ids, mapError("response prune", rows.Err())
}
