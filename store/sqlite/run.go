package sqlite

import (
	"context"

	"github.com/superstep/superstep/store"
)

const runColumns = `id, model, head_response_id, last_step, checkpoint_step, lease_owner, lease_epoch, lease_expires_at,
	active, created_at, updated_at, resume_failures, resume_error, resume_not_before, num`

// runRow is a run with the columns store.Run does not show.
type runRow struct {
	store.Run
	checkpointStep int64 // step of the newest checkpoint, -1 for none
	num            int64 // the run's number in checkpoint keys (logKey)
	// checkpointManifest is the manifest of the checkpoint at
	// checkpointStep when the query read it (checkWrite for a commit).
	checkpointManifest []byte
}

// scanRun scans a row of runColumns followed by extra columns.
func scanRun(row interface{ Scan(...any) error }, extra ...any) (*runRow, error) {
	var r runRow
	var expires, created, updated, notBefore int64
	dest := []any{&r.ID, &r.Model, &r.HeadResponseID, &r.LastStep, &r.checkpointStep, &r.Lease.Owner, &r.Lease.Epoch,
		&expires, &r.Active, &created, &updated, &r.Resume.Failures, &r.Resume.Error, &notBefore, &r.num}
	err := row.Scan(append(dest, extra...)...)
	if err != nil {
		return nil, err
	}
	r.Lease.ExpiresAt, r.CreatedAt, r.UpdatedAt = timeOrZero(expires), fromNanos(created), fromNanos(updated)
	r.Resume.NotBefore = timeOrZero(notBefore)
	return &r, nil
}

// getRunRow reads a run (store.ErrNotFound).
func getRunRow(ctx context.Context, q querier, id string) (*runRow, error) {
	r, err := scanRun(q.QueryRowContext(ctx, "SELECT "+runColumns+" FROM runs WHERE id = ?", id))
	return r, mapError("run "+id, err)
}

// getRun reads a run (store.ErrNotFound).
func getRun(ctx context.Context, q querier, id string) (*store.Run, error) {
	r, err := getRunRow(ctx, q, id)
	if err != nil {
		return nil, err
	}
	return &r.Run, nil
}

// RunGet returns a run by ID (store.ErrNotFound).
func (s *Store) RunGet(ctx context.Context, id string) (*store.Run, error) {
	if err := s.checkOpen("run get"); err != nil {
		return nil, err
	}
	return getRun(ctx, s.rdb, id)
}

// RunList returns runs with ID > p.After in ID order, at most p.Limit
// (default 100).
func (s *Store) RunList(ctx context.Context, p *store.RunListParams) ([]*store.Run, error) {
	if err := s.checkOpen("run list"); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	q := "SELECT " + runColumns + " FROM runs WHERE id > ? ORDER BY id LIMIT ?"
	if p.ActiveOnly {
		// The partial index of active runs (they are few) and a sort,
		// rather than a walk of every run in id order.
		q = "SELECT " + runColumns + " FROM runs INDEXED BY runs_claimable WHERE active = 1 AND id > ? ORDER BY id LIMIT ?"
	}
	rows, err := s.rdb.QueryContext(ctx, q, p.After, limit)
	if err != nil {
		return nil, mapError("run list", err)
	}
	defer rows.Close()
	var out []*store.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, mapError("run list", err)
		}
		out = append(out, &r.Run)
	}
	return out, mapError("run list", rows.Err())
}
