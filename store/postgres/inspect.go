package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/store"
)

// inspectColumns are a run's columns (qualified by r) and those RunInfo
// adds: its head's owner and status and its lineage.
var inspectColumns = qualify("r", runColumns) + ", h.owner, h.status, r.forked_from_run, r.forked_from_step"

func scanRunInfo(row pgx.Row) (*store.RunInfo, error) {
	var ri store.RunInfo
	var forkRun, status string
	var forkStep int64
	// scanRun reads a run's columns only; the extra ones are read by a
	// row wrapper that appends their destinations.
	r, err := scanRun(extraRow{row, []any{&ri.Owner, &status, &forkRun, &forkStep}})
	if err != nil {
		return nil, err
	}
	ri.Run, ri.HeadStatus = *r, store.Status(status)
	if forkRun != "" {
		ri.ForkedFrom = &store.ForkPoint{RunID: forkRun, Step: forkStep}
	}
	return &ri, nil
}

// extraRow scans its row into the destinations given and then extra.
type extraRow struct {
	pgx.Row
	extra []any
}

func (r extraRow) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.extra...)...) }

// RunInfo returns one run with its head's owner and status and its
// lineage (store.ErrNotFound).
func (s *Store) RunInfo(ctx context.Context, id string) (*store.RunInfo, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	ri, err := scanRunInfo(s.pool.QueryRow(ctx, "SELECT "+inspectColumns+
		" FROM runs r JOIN responses h ON h.id = r.head_response_id WHERE r.id = $1", id))
	return ri, mapError("run info "+id, id, 0, err)
}

// RunQuery lists runs in creation order through runs_created, filtered
// per p (see store.RunQueryParams).
func (s *Store) RunQuery(ctx context.Context, p *store.RunQueryParams) ([]*store.RunInfo, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	var where []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if !p.AnyOwner {
		add("h.owner = $%d", p.Owner)
	}
	if p.Model != "" {
		add("r.model = $%d", p.Model)
	}
	if p.Status != "" {
		add("h.status = $%d", string(p.Status))
	}
	if p.Active != nil {
		add("r.active = $%d", *p.Active)
	}
	if p.LeaseOwner != "" {
		add("r.lease_owner = $%d", p.LeaseOwner)
	}
	if !p.CreatedAfter.IsZero() {
		add("r.created_at > $%d", p.CreatedAfter)
	}
	if !p.CreatedBefore.IsZero() {
		add("r.created_at < $%d", p.CreatedBefore)
	}
	cmp, order := ">", "ASC"
	if p.Desc {
		cmp, order = "<", "DESC"
	}
	if p.After != "" {
		var created time.Time
		if err := s.pool.QueryRow(ctx, "SELECT created_at FROM runs WHERE id = $1", p.After).Scan(&created); err != nil {
			return nil, mapError("run query: run "+p.After, p.After, 0, err)
		}
		args = append(args, created, p.After)
		where = append(where, fmt.Sprintf("(r.created_at, r.id) %s ($%d, $%d)", cmp, len(args)-1, len(args)))
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	args = append(args, limit)
	q := "SELECT " + inspectColumns + " FROM runs r JOIN responses h ON h.id = r.head_response_id"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += fmt.Sprintf(" ORDER BY r.created_at %s, r.id %s LIMIT $%d", order, order, len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, mapError("run query", "", 0, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.RunInfo, error) { return scanRunInfo(row) })
	return out, mapError("run query", "", 0, err)
}

var _ store.RunInspector = (*Store)(nil)

// recordClaim records the claim of run's lease a create just made;
// nothing when owner is "" (no claim). The claim's time is the run's
// updated_at, which the create set.
func recordClaim(ctx context.Context, tx pgx.Tx, run *store.Run, owner string) error {
	if owner == "" {
		return nil
	}
	_, err := tx.Exec(ctx, "INSERT INTO lease_claims (run_id, epoch, owner, last_step, claimed_at) VALUES ($1, $2, $3, $4, $5)",
		run.ID, run.Lease.Epoch, owner, run.LastStep, run.UpdatedAt)
	return err
}

// RunClaims returns the claims of the run's lease, oldest first.
func (s *Store) RunClaims(ctx context.Context, runID string) ([]store.LeaseClaimRecord, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, "SELECT epoch, owner, last_step, claimed_at FROM lease_claims WHERE run_id = $1 ORDER BY epoch", runID)
	if err != nil {
		return nil, mapError("run claims", runID, 0, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.LeaseClaimRecord, error) {
		var c store.LeaseClaimRecord
		err := row.Scan(&c.Epoch, &c.Owner, &c.LastStep, &c.ClaimedAt)
		c.ClaimedAt = c.ClaimedAt.UTC()
		return c, err
	})
	return out, mapError("run claims", runID, 0, err)
}
