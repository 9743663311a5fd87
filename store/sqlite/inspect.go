package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/superstep/superstep/store"
)

// inspectColumns are a run's columns (qualified by r) and those RunInfo
// adds: its head's owner and status and its lineage.
var inspectColumns = qualifyRun(runColumns) + ", h.owner, h.status, r.forked_from_run, r.forked_from_step"

func qualifyRun(columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = "r." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

func scanRunInfo(row interface{ Scan(...any) error }) (*store.RunInfo, error) {
	var ri store.RunInfo
	var forkRun string
	var forkStep int64
	r, err := scanRun(row, &ri.Owner, &ri.HeadStatus, &forkRun, &forkStep)
	if err != nil {
		return nil, err
	}
	ri.Run = r.Run
	if forkRun != "" {
		ri.ForkedFrom = &store.ForkPoint{RunID: forkRun, Step: forkStep}
	}
	return &ri, nil
}

// RunInfo returns one run with its head's owner and status and its
// lineage (store.ErrNotFound).
func (s *Store) RunInfo(ctx context.Context, id string) (*store.RunInfo, error) {
	if err := s.checkOpen("run info"); err != nil {
		return nil, err
	}
	ri, err := scanRunInfo(s.rdb.QueryRowContext(ctx, "SELECT "+inspectColumns+
		" FROM runs r JOIN responses h ON h.id = r.head_response_id WHERE r.id = ?", id))
	return ri, mapError("run "+id, err)
}

// RunQuery lists runs in creation order through runs_created, filtered
// per p (see store.RunQueryParams).
func (s *Store) RunQuery(ctx context.Context, p *store.RunQueryParams) ([]*store.RunInfo, error) {
	if err := s.checkOpen("run query"); err != nil {
		return nil, err
	}
	var where []string
	var args []any
	add := func(cond string, arg any) { where, args = append(where, cond), append(args, arg) }
	if !p.AnyOwner {
		add("h.owner = ?", p.Owner)
	}
	if p.Model != "" {
		add("r.model = ?", p.Model)
	}
	if p.Status != "" {
		add("h.status = ?", string(p.Status))
	}
	if p.Active != nil {
		add("r.active = ?", *p.Active)
	}
	if p.LeaseOwner != "" {
		add("r.lease_owner = ?", p.LeaseOwner)
	}
	if !p.CreatedAfter.IsZero() {
		add("r.created_at > ?", p.CreatedAfter.UnixNano())
	}
	if !p.CreatedBefore.IsZero() {
		add("r.created_at < ?", p.CreatedBefore.UnixNano())
	}
	cmp, order := ">", "ASC"
	if p.Desc {
		cmp, order = "<", "DESC"
	}
	if p.After != "" {
		var created int64
		err := s.rdb.QueryRowContext(ctx, "SELECT created_at FROM runs WHERE id = ?", p.After).Scan(&created)
		if err != nil {
			return nil, mapError("run query: run "+p.After, err)
		}
		where = append(where, "(r.created_at, r.id) "+cmp+" (?, ?)")
		args = append(args, created, p.After)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	q := "SELECT " + inspectColumns + " FROM runs r INDEXED BY runs_created JOIN responses h ON h.id = r.head_response_id"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY r.created_at " + order + ", r.id " + order + " LIMIT ?"
	rows, err := s.rdb.QueryContext(ctx, q, append(args, limit)...)
	if err != nil {
		return nil, mapError("run query", err)
	}
	defer rows.Close()
	var out []*store.RunInfo
	for rows.Next() {
		ri, err := scanRunInfo(rows)
		if err != nil {
			return nil, mapError("run query", err)
		}
		out = append(out, ri)
	}
	return out, mapError("run query", rows.Err())
}

var _ store.RunInspector = (*Store)(nil)

// recordClaim records the claim of run's lease that claimLease (or
// LeaseClaim) just made; nothing when owner is "" (no claim).
func recordClaim(ctx context.Context, tx *sql.Conn, run *store.Run, owner string, now time.Time) error {
	if owner == "" {
		return nil
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO lease_claims (run_id, epoch, owner, last_step, claimed_at) VALUES (?, ?, ?, ?, ?)",
		run.ID, run.Lease.Epoch, owner, run.LastStep, now.UnixNano())
	return mapError("record lease claim", err)
}

// RunClaims returns the claims of the run's lease, oldest first.
func (s *Store) RunClaims(ctx context.Context, runID string) ([]store.LeaseClaimRecord, error) {
	if err := s.checkOpen("run claims"); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, "SELECT epoch, owner, last_step, claimed_at FROM lease_claims WHERE run_id = ? ORDER BY epoch", runID)
	if err != nil {
		return nil, mapError("run claims", err)
	}
	defer rows.Close()
	var out []store.LeaseClaimRecord
	for rows.Next() {
		var c store.LeaseClaimRecord
		var at int64
		if err := rows.Scan(&c.Epoch, &c.Owner, &c.LastStep, &at); err != nil {
			return nil, mapError("run claims", err)
		}
		c.ClaimedAt = fromNanos(at)
		out = append(out, c)
	}
	return out, mapError("run claims", rows.Err())
}
