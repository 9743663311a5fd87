package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/superstep/superstep/internal/fault"
	"github.com/superstep/superstep/store"
)

// LeaseClaim claims Active runs that are unowned or whose lease expired,
// oldest lease first, incrementing their epoch, and returns them. Runs
// whose Resume.NotBefore is after now (a failed resume backs off) are
// skipped.
func (s *Store) LeaseClaim(ctx context.Context, p *store.LeaseClaimParams) ([]*store.Run, error) {
	if p.Owner == "" || p.Duration <= 0 {
		return nil, errors.New("sqlite: lease claim: Owner and a Duration > 0 are required")
	}
	now := orNow(p.Now)
	limit := int64(p.Limit)
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	var runs []*store.Run
	err := s.write(ctx, "lease claim", func(ctx context.Context, tx *sql.Conn) error {
		runs = nil
		rows, err := tx.QueryContext(ctx, `UPDATE runs SET lease_owner = ?, lease_epoch = lease_epoch + 1, lease_expires_at = ?,
			updated_at = ? WHERE id IN (SELECT id FROM runs WHERE active = 1 AND (lease_owner = '' OR lease_expires_at <= ?4)
			AND resume_not_before <= ?4 ORDER BY lease_expires_at, id LIMIT ?5) RETURNING `+runColumns,
			p.Owner, now.Add(p.Duration).UnixNano(), now.UnixNano(), now.UnixNano(), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanRun(rows)
			if err != nil {
				return err
			}
			runs = append(runs, &r.Run)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range runs {
			if err := recordClaim(ctx, tx, r, p.Owner, now); err != nil {
				return err
			}
		}
		return nil
	})
	return runs, err
}

// LeaseRenew extends a lease held at p.Epoch by p.Duration from p.Now and
// returns the new expiry (store.ErrFenced when the lease was lost: another
// epoch, released, or expired; store.ErrNotFound).
func (s *Store) LeaseRenew(ctx context.Context, p *store.LeaseParams) (time.Time, error) {
	if p.Duration <= 0 {
		return time.Time{}, errors.New("sqlite: lease renew: Duration must be > 0")
	}
	now := orNow(p.Now)
	expires := now.Add(p.Duration)
	err := s.write(ctx, "lease renew", func(ctx context.Context, tx *sql.Conn) error {
		if _, err := checkLease(ctx, tx, p, now); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE runs SET lease_expires_at = ? WHERE id = ?", expires.UnixNano(), p.RunID)
		return err
	})
	if err != nil {
		return time.Time{}, err
	}
	return expires, nil
}

// LeaseRelease gives a lease up so another host can claim the run at once
// (store.ErrFenced when it was already lost; store.ErrNotFound). With
// p.Failure it records a failed resume instead (Resume.Failures+1, Error,
// NotBefore now+RetryAfter) and announces nothing: no host claims the run
// before NotBefore.
func (s *Store) LeaseRelease(ctx context.Context, p *store.LeaseParams) error {
	if p.Failure != nil && p.Failure.RetryAfter <= 0 {
		return errors.New("sqlite: lease release: Failure.RetryAfter must be > 0")
	}
	now := orNow(p.Now)
	var active bool
	err := s.write(ctx, "lease release", func(ctx context.Context, tx *sql.Conn) error {
		run, err := checkLease(ctx, tx, p, now)
		if err != nil {
			return err
		}
		if err := fault.Point(ctx, "lease.checked"); err != nil {
			return err
		}
		active = run.Active
		if f := p.Failure; f != nil {
			_, err = tx.ExecContext(ctx, `UPDATE runs SET lease_owner = '', lease_expires_at = 0,
				resume_failures = resume_failures + 1, resume_error = ?, resume_not_before = ? WHERE id = ?`,
				f.Reason, now.Add(f.RetryAfter).UnixNano(), p.RunID)
			return err
		}
		_, err = tx.ExecContext(ctx, "UPDATE runs SET lease_owner = '', lease_expires_at = 0 WHERE id = ?", p.RunID)
		return err
	})
	if err == nil && active && p.Failure == nil {
		// Handed back unfinished: any host may take it now.
		s.notices.Publish(store.Notice{Kind: store.NoticeRunReady, RunID: p.RunID})
	}
	return err
}

// checkLease returns the run, or a *store.FencedError unless p.Owner holds
// the run's lease at p.Epoch and it has not expired at now.
func checkLease(ctx context.Context, tx *sql.Conn, p *store.LeaseParams, now time.Time) (*runRow, error) {
	run, err := getRunRow(ctx, tx, p.RunID)
	if err != nil {
		return nil, err
	}
	l := run.Lease
	if l.Epoch != p.Epoch || l.Owner == "" || l.Owner != p.Owner || !now.Before(l.ExpiresAt) {
		return nil, &store.FencedError{RunID: p.RunID, Epoch: p.Epoch, CurrentEpoch: l.Epoch}
	}
	return run, nil
}
