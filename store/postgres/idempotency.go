package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/store"
)

var _ store.IdempotencyKeyReader = (*Store)(nil)

// idempotencyPruneBatch is how many expired idempotency keys a create that
// records a key deletes.
const idempotencyPruneBatch = 16

// recordIdempotencyKey records p's idempotency key for its response as
// the first write of ResponseCreate's transaction, or returns an
// *store.IdempotencyError when a live record of it exists. A concurrent
// create with the same key waits on the primary key until the first
// commits (then finds its row) or rolls back (then inserts). It first
// deletes a few expired records, skipping those another create holds.
func recordIdempotencyKey(ctx context.Context, tx pgx.Tx, p *store.ResponseCreateParams, now *time.Time) error {
	window := micros(store.IdempotencyWindow)
	_, err := tx.Exec(ctx, `DELETE FROM idempotency_keys WHERE (owner, key) IN
		(SELECT owner, key FROM idempotency_keys
			WHERE created_at <= coalesce($1::timestamptz, now()) - $2::bigint * interval '1 microsecond'
			ORDER BY created_at LIMIT $3 FOR UPDATE SKIP LOCKED)`, now, window, idempotencyPruneBatch)
	if err != nil {
		return err
	}
	r := p.Response
	// ON CONFLICT DO UPDATE locks the existing row even when its WHERE
	// refuses the update (a live record), so the row read next cannot be
	// deleted under this transaction.
	var recorded bool
	err = tx.QueryRow(ctx, `INSERT INTO idempotency_keys AS k (owner, key, request_hash, response_id, created_at)
		VALUES ($1, $2, $3, $4, coalesce($5::timestamptz, now()))
		ON CONFLICT (owner, key) DO UPDATE SET request_hash = excluded.request_hash,
			response_id = excluded.response_id, created_at = excluded.created_at
		WHERE k.created_at <= excluded.created_at - $6::bigint * interval '1 microsecond'
		RETURNING true`, r.Owner, p.IdempotencyKey, p.RequestHash, r.ID, now, window).Scan(&recorded)
	if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	rec, err := getIdempotencyKey(ctx, tx, r.Owner, p.IdempotencyKey)
	if err != nil {
		return err
	}
	return fmt.Errorf("store/postgres: %w", &store.IdempotencyError{Record: *rec})
}

// getIdempotencyKey reads the record of owner's key, live or not
// (pgx.ErrNoRows).
func getIdempotencyKey(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, owner, key string) (*store.IdempotencyRecord, error) {
	rec := store.IdempotencyRecord{Owner: owner, Key: key}
	err := q.QueryRow(ctx, `SELECT request_hash, response_id, created_at FROM idempotency_keys
		WHERE owner = $1 AND key = $2`, owner, key).Scan(&rec.RequestHash, &rec.ResponseID, &rec.CreatedAt)
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// IdempotencyKeyGet returns the record of p's owner and key when it was
// recorded less than store.IdempotencyWindow before p.Now, or the
// database's clock when p.Now is zero (store.ErrNotFound otherwise).
func (s *Store) IdempotencyKeyGet(ctx context.Context, p *store.IdempotencyKeyGetParams) (*store.IdempotencyRecord, error) {
	if _, err := s.begin(p.Now); err != nil {
		return nil, err
	}
	rec := store.IdempotencyRecord{Owner: p.Owner, Key: p.Key}
	err := s.pool.QueryRow(ctx, `SELECT request_hash, response_id, created_at FROM idempotency_keys
		WHERE owner = $1 AND key = $2
			AND created_at > coalesce($3::timestamptz, now()) - $4::bigint * interval '1 microsecond'`,
		p.Owner, p.Key, callTime(p.Now), micros(store.IdempotencyWindow)).Scan(&rec.RequestHash, &rec.ResponseID, &rec.CreatedAt)
	if err != nil {
		return nil, mapError("get idempotency key", "", 0, err)
	}
	return &rec, nil
}
