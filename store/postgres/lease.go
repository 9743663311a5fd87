package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/superstep/superstep/store"
)

// LeaseClaim claims active runs that are unowned or whose lease expired,
// incrementing their epoch; runs whose Resume.NotBefore is after now (a
// failed resume backs off) are skipped. Rows locked by another claimer are skipped (FOR
// UPDATE SKIP LOCKED), so concurrent claimers never wait for each other nor
// claim one run twice. Expiry and "now" are the database's clock's (see
// callTime), as in every lease-judged call.
func (s *Store) LeaseClaim(ctx context.Context, p *store.LeaseClaimParams) ([]*store.Run, error) {
	if _, err := s.begin(p.Now); err != nil {
		return nil, err
	}
	if p.Owner == "" {
		return nil, errors.New("store/postgres: claim leases: empty owner")
	}
	var limit *int
	if p.Limit > 0 {
		limit = &p.Limit
	}
	var runs []*store.Run
	err := s.write(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		// The claims are recorded (lease_claims) by the same statement.
		rows, err := conn.Query(ctx, `WITH c AS (
			SELECT id FROM runs
			WHERE active AND (lease_owner = '' OR lease_expires_at <= coalesce($1::timestamptz, now()))
				AND resume_not_before <= coalesce($1::timestamptz, now())
			ORDER BY lease_expires_at, id
			LIMIT $2
			FOR UPDATE SKIP LOCKED), u AS (
		UPDATE runs r SET lease_owner = $3, lease_epoch = r.lease_epoch + 1,
			lease_expires_at = coalesce($1::timestamptz, now()) + $4::bigint * interval '1 microsecond',
			updated_at = coalesce($1::timestamptz, now())
		FROM c WHERE r.id = c.id
		RETURNING `+qualify("r", runColumns)+`), claim AS (
			INSERT INTO lease_claims (run_id, epoch, owner, last_step, claimed_at)
			SELECT id, lease_epoch, lease_owner, last_step, updated_at FROM u)
		SELECT `+runColumns+` FROM u`, callTime(p.Now), limit, p.Owner, micros(p.Duration))
		if err != nil {
			return err
		}
		runs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Run, error) { return scanRun(row) })
		return err
	})
	if err != nil {
		return nil, mapError("claim leases", "", 0, err)
	}
	for _, r := range runs {
		if r.Resume.Failures > 0 {
			s.resumeFailed.Store(r.ID, struct{}{})
		}
	}
	return runs, nil
}

// LeaseRenew extends a lease still held at p.Epoch by p.Owner to
// p.Duration from now, and returns the new expiry, computed by the
// database: LeaseRenewBatch of one run.
func (s *Store) LeaseRenew(ctx context.Context, p *store.LeaseParams) (time.Time, error) {
	res, err := s.LeaseRenewBatch(ctx, &store.LeaseRenewBatchParams{Owner: p.Owner, Duration: p.Duration,
		Runs: []store.LeaseRef{{RunID: p.RunID, Epoch: p.Epoch}}, Now: p.Now})
	if err != nil {
		return time.Time{}, err
	}
	return res[0].ExpiresAt, res[0].Err
}

// LeaseRelease gives up a lease still held at p.Epoch by p.Owner, so that
// another host can claim the run at once. With p.Failure it records a
// failed resume instead (Resume.Failures+1, Error, NotBefore
// now+RetryAfter) and announces nothing: no host claims the run before
// NotBefore.
func (s *Store) LeaseRelease(ctx context.Context, p *store.LeaseParams) error {
	if _, err := s.begin(p.Now); err != nil {
		return err
	}
	failed, reason, retryAfter := false, "", time.Duration(0)
	if f := p.Failure; f != nil {
		if f.RetryAfter <= 0 {
			return errors.New("store/postgres: release lease: Failure.RetryAfter must be > 0")
		}
		failed, reason, retryAfter = true, f.Reason, f.RetryAfter
	}
	var active bool
	err := s.write(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		return conn.QueryRow(ctx, `UPDATE runs SET lease_owner = '',
			lease_expires_at = coalesce($3::timestamptz, now()), updated_at = coalesce($3::timestamptz, now()),
			resume_failures = CASE WHEN $5 THEN resume_failures + 1 ELSE resume_failures END,
			resume_error = CASE WHEN $5 THEN $6 ELSE resume_error END,
			resume_not_before = CASE WHEN $5
				THEN coalesce($3::timestamptz, now()) + $7::bigint * interval '1 microsecond'
				ELSE resume_not_before END
		WHERE id = $1 AND lease_epoch = $2 AND lease_owner = $4 AND lease_owner <> ''
			AND lease_expires_at > coalesce($3::timestamptz, now())
		RETURNING active`, p.RunID, p.Epoch, callTime(p.Now), p.Owner, failed, reason, micros(retryAfter)).Scan(&active)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return s.fenced(ctx, "release lease", p.RunID, p.Epoch)
	}
	if err != nil {
		return mapError("release lease of run "+p.RunID, p.RunID, p.Epoch, err)
	}
	s.resumeFailed.Delete(p.RunID) // the next claimer learns it again
	if active && !failed {
		// Handed back unfinished (drain): any host may take it now.
		s.sendNotice(store.Notice{Kind: store.NoticeRunReady, RunID: p.RunID})
	}
	return nil
}

// fenced explains a lease write that matched no row: the run is gone
// (ErrNotFound) or the lease was lost (FencedError).
func (s *Store) fenced(ctx context.Context, op, runID string, epoch int64) error {
	var current int64
	err := s.pool.QueryRow(ctx, "SELECT lease_epoch FROM runs WHERE id = $1", runID).Scan(&current)
	if err != nil {
		return mapError(op+" of run "+runID, runID, epoch, err)
	}
	return fmt.Errorf("store/postgres: %s: %w", op, &store.FencedError{RunID: runID, Epoch: epoch, CurrentEpoch: current})
}

// qualify prefixes each column of a comma-separated list with alias.
func qualify(alias, columns string) string {
	out := ""
	for i, c := range splitColumns(columns) {
		if i > 0 {
			out += ", "
		}
		out += alias + "." + c
	}
	return out
}

// execWrite runs one statement under write's rules.
func (s *Store) execWrite(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err := s.write(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		var err error
		tag, err = conn.Exec(ctx, sql, args...)
		return err
	})
	return tag, err
}
