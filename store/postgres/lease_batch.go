package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/superstep/superstep/store"
)

var _ store.LeaseBatchRenewer = (*Store)(nil)

// LeaseRenewBatch renews the leases of p.Runs held by p.Owner in one
// statement on the lease pool, judged by the database's clock as
// LeaseRenew is. A run the statement did not renew gets the error
// LeaseRenew would give (read apart: the rare case).
func (s *Store) LeaseRenewBatch(ctx context.Context, p *store.LeaseRenewBatchParams) ([]store.LeaseRenewResult, error) {
	if _, err := s.begin(p.Now); err != nil {
		return nil, err
	}
	if len(p.Runs) == 0 {
		return nil, nil
	}
	ids := make([]string, len(p.Runs))
	epochs := make([]int64, len(p.Runs))
	for i, r := range p.Runs {
		ids[i], epochs[i] = r.RunID, r.Epoch
	}
	renewed := make(map[store.LeaseRef]time.Time, len(p.Runs))
	err := s.writeOn(ctx, s.leases, func(ctx context.Context, conn *pgxpool.Conn) error {
		// The rows are locked in run order first, as a group commit locks
		// its members' (commitBatch): an UPDATE ... FROM unnest locks them
		// in whatever order its join yields, and deadlocked with a batch
		// holding some of them (TestMultihost_Spread, group commit on).
		rows, err := conn.Query(ctx, `WITH l AS (
			SELECT r.id FROM runs AS r JOIN unnest($1::text[], $2::bigint[]) AS u(id, epoch) ON r.id = u.id
			WHERE r.lease_epoch = u.epoch AND r.lease_owner = $5 AND r.lease_owner <> ''
				AND r.lease_expires_at > coalesce($3::timestamptz, now())
			ORDER BY r.id COLLATE "C"
			FOR UPDATE OF r)
		UPDATE runs AS r
		SET lease_expires_at = coalesce($3::timestamptz, now()) + $4::bigint * interval '1 microsecond',
			updated_at = coalesce($3::timestamptz, now())
		FROM l
		WHERE r.id = l.id
		RETURNING r.id, r.lease_epoch, r.lease_expires_at`, ids, epochs, callTime(p.Now), micros(p.Duration), p.Owner)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var ref store.LeaseRef
			var expires time.Time
			if err := rows.Scan(&ref.RunID, &ref.Epoch, &expires); err != nil {
				return err
			}
			renewed[ref] = expires.UTC()
		}
		return rows.Err()
	})
	if err != nil {
		return nil, mapError("renew leases", "", 0, err)
	}
	out := make([]store.LeaseRenewResult, len(p.Runs))
	var lost []string
	for i, r := range p.Runs {
		if expires, ok := renewed[r]; ok {
			out[i].ExpiresAt = expires
		} else {
			lost = append(lost, r.RunID)
		}
	}
	if len(lost) == 0 {
		return out, nil
	}
	// Say why each lost lease was not renewed, in one read on the lease
	// pool (a busy main pool must not hold the renewal loop).
	current := make(map[string]int64, len(lost))
	err = func() error {
		rows, err := s.leases.Query(ctx, "SELECT id, lease_epoch FROM runs WHERE id = ANY($1)", lost)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var epoch int64
			if err := rows.Scan(&id, &epoch); err != nil {
				return err
			}
			current[id] = epoch
		}
		return rows.Err()
	}()
	if err != nil {
		return nil, mapError("renew leases", "", 0, err)
	}
	for i, r := range p.Runs {
		if !out[i].ExpiresAt.IsZero() {
			continue
		}
		epoch, ok := current[r.RunID]
		if !ok {
			out[i].Err = fmt.Errorf("store/postgres: renew lease of run %s: %w", r.RunID, store.ErrNotFound)
			continue
		}
		out[i].Err = fmt.Errorf("store/postgres: renew lease: %w", &store.FencedError{RunID: r.RunID, Epoch: r.Epoch, CurrentEpoch: epoch})
	}
	return out, nil
}
