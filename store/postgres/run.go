package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/store"
)

// RunGet returns a run by ID.
func (s *Store) RunGet(ctx context.Context, id string) (*store.Run, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	r, err := scanRun(s.pool.QueryRow(ctx, "SELECT "+runColumns+" FROM runs WHERE id = $1", id))
	return r, mapError("get run "+id, id, 0, err)
}

// RunList returns runs in ID order after p.After.
func (s *Store) RunList(ctx context.Context, p *store.RunListParams) ([]*store.Run, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	// With ActiveOnly the partial index runs_claimable (WHERE active)
	// serves the filter.
	rows, err := s.pool.Query(ctx, "SELECT "+runColumns+" FROM runs WHERE id > $1 AND (active OR NOT $3) ORDER BY id LIMIT $2",
		p.After, limit, p.ActiveOnly)
	if err != nil {
		return nil, mapError("list runs", "", 0, err)
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Run, error) { return scanRun(row) })
	return runs, mapError("list runs", "", 0, err)
}
