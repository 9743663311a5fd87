package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/superstep/superstep/store"
)

var _ store.IdempotencyKeyReader = (*Store)(nil)

// idempotencyPruneBatch is how many expired idempotency keys a create that
// records a key deletes.
const idempotencyPruneBatch = 16

// validateIdempotencyKey checks the key of a create.
func validateIdempotencyKey(p *store.ResponseCreateParams) error {
	if len(p.IdempotencyKey) > store.IdempotencyKeyMax {
		return fmt.Errorf("sqlite: response create: idempotency key of %d bytes, the limit is %d",
			len(p.IdempotencyKey), store.IdempotencyKeyMax)
	}
	return nil
}

// recordIdempotencyKey records p's idempotency key for the response id, or
// returns an *store.IdempotencyError when a live record of it exists. It
// first deletes a few expired records.
func recordIdempotencyKey(ctx context.Context, tx *sql.Conn, p *store.ResponseCreateParams, id string, now time.Time) error {
	expired := now.Add(-store.IdempotencyWindow).UnixNano() // created at or before: expired
	_, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE (owner, key) IN
		(SELECT owner, key FROM idempotency_keys WHERE created_at <= ? ORDER BY created_at LIMIT ?)`,
		expired, idempotencyPruneBatch)
	if err != nil {
		return mapError("prune idempotency keys", err)
	}
	owner := p.Response.Owner
	rec, err := getIdempotencyKey(ctx, tx, owner, p.IdempotencyKey)
	switch {
	case err == nil && rec.CreatedAt.UnixNano() > expired:
		return fmt.Errorf("sqlite: response create: %w", &store.IdempotencyError{Record: *rec})
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO idempotency_keys (owner, key, request_hash, response_id, created_at)
		VALUES (?, ?, ?, ?, ?)`, owner, p.IdempotencyKey, p.RequestHash, id, now.UnixNano())
	return mapError("record idempotency key", err)
}

// getIdempotencyKey reads the record of owner's key, live or not
// (store.ErrNotFound).
func getIdempotencyKey(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, owner, key string) (*store.IdempotencyRecord, error) {
	rec := store.IdempotencyRecord{Owner: owner, Key: key}
	var created int64
	err := q.QueryRowContext(ctx, `SELECT request_hash, response_id, created_at FROM idempotency_keys
		WHERE owner = ? AND key = ?`, owner, key).Scan(&rec.RequestHash, &rec.ResponseID, &created)
	if err != nil {
		return nil, mapError("idempotency key get", err)
	}
	rec.CreatedAt = fromNanos(created)
	return &rec, nil
}

// IdempotencyKeyGet returns the record of p's owner and key when it was
// recorded less than store.IdempotencyWindow before p.Now
// (store.ErrNotFound otherwise).
func (s *Store) IdempotencyKeyGet(ctx context.Context, p *store.IdempotencyKeyGetParams) (*store.IdempotencyRecord, error) {
	if err := s.checkOpen("idempotency key get"); err != nil {
		return nil, err
	}
	rec, err := getIdempotencyKey(ctx, s.rdb, p.Owner, p.Key)
	if err != nil {
		return nil, err
	}
	if !rec.CreatedAt.After(orNow(p.Now).Add(-store.IdempotencyWindow)) {
		return nil, fmt.Errorf("sqlite: idempotency key get: expired: %w", store.ErrNotFound)
	}
	return rec, nil
}
