package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/superstep/superstep/store"
)

var _ store.WebhookOutbox = (*Store)(nil)

const webhookColumns = "id, event_id, type, response_id, endpoint, status, attempts, created_at, next_attempt_at, claim_owner, last_error, done_at"

func scanWebhook(row interface{ Scan(...any) error }) (*store.WebhookDelivery, error) {
	var d store.WebhookDelivery
	var created, next int64
	var done sql.NullInt64
	if err := row.Scan(&d.ID, &d.EventID, &d.Type, &d.ResponseID, &d.Endpoint, &d.Status, &d.Attempts,
		&created, &next, &d.ClaimOwner, &d.LastError, &done); err != nil {
		return nil, err
	}
	d.CreatedAt, d.NextAttemptAt = fromNanos(created), fromNanos(next)
	if done.Valid {
		t := fromNanos(done.Int64)
		d.DoneAt = &t
	}
	return &d, nil
}

// insertWebhooks writes p's webhook deliveries in the commit's
// transaction (commitTx), due at once.
func insertWebhooks(ctx context.Context, tx *sql.Conn, p *store.CommitParams, now time.Time) error {
	for _, w := range p.Webhooks {
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (event_id, type, response_id, endpoint, created_at, next_attempt_at)
			VALUES (?, ?, ?, ?, ?, ?)`, w.EventID, w.Type, p.ResponseID, w.Endpoint, now.UnixNano(), now.UnixNano()); err != nil {
			return mapError("insert webhook", err)
		}
	}
	return nil
}

// WebhookClaim claims due deliveries (see store.WebhookOutbox). The one
// writer serialises claims.
func (s *Store) WebhookClaim(ctx context.Context, p *store.WebhookClaimParams) ([]*store.WebhookDelivery, error) {
	if p.Owner == "" || p.Lease <= 0 {
		return nil, errors.New("sqlite: webhook claim: an Owner and a Lease > 0 are required")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	now := orNow(p.Now)
	var out []*store.WebhookDelivery
	err := s.write(ctx, "webhook claim", func(ctx context.Context, tx *sql.Conn) error {
		out = out[:0]
		rows, err := tx.QueryContext(ctx, `UPDATE webhook_deliveries SET attempts = attempts + 1, claim_owner = ?1, next_attempt_at = ?2
			WHERE id IN (SELECT id FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ?3
				ORDER BY next_attempt_at, id LIMIT ?4)
			RETURNING `+webhookColumns, p.Owner, now.Add(p.Lease).UnixNano(), now.UnixNano(), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			d, err := scanWebhook(rows)
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, mapError("webhook claim", err)
	}
	sortWebhooks(out)
	return out, nil
}

// sortWebhooks orders claimed deliveries by due time, then ID (RETURNING
// has no order).
func sortWebhooks(ds []*store.WebhookDelivery) {
	slices.SortFunc(ds, func(a, b *store.WebhookDelivery) int {
		if c := a.NextAttemptAt.Compare(b.NextAttemptAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// WebhookReport records a claimed attempt's outcome (see
// store.WebhookOutbox).
func (s *Store) WebhookReport(ctx context.Context, p *store.WebhookReportParams) error {
	if err := checkWebhookReport(p); err != nil {
		return err
	}
	now := orNow(p.Now)
	return s.write(ctx, "webhook report", func(ctx context.Context, tx *sql.Conn) error {
		var res sql.Result
		var err error
		if p.Status == store.WebhookPending {
			res, err = tx.ExecContext(ctx, `UPDATE webhook_deliveries SET next_attempt_at = ?, last_error = ?, claim_owner = ''
				WHERE id = ? AND claim_owner = ? AND attempts = ? AND status = 'pending'`,
				now.Add(p.RetryAfter).UnixNano(), p.Error, p.ID, p.Owner, p.Attempt)
		} else {
			res, err = tx.ExecContext(ctx, `UPDATE webhook_deliveries SET status = ?, last_error = ?, done_at = ?
				WHERE id = ? AND claim_owner = ? AND attempts = ? AND status = 'pending'`,
				p.Status, p.Error, now.UnixNano(), p.ID, p.Owner, p.Attempt)
		}
		if err != nil {
			return mapError("webhook report", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
		var exists bool
		if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE id = ?)", p.ID).Scan(&exists); err != nil {
			return mapError("webhook report", err)
		}
		if !exists {
			return fmt.Errorf("sqlite: webhook report: delivery %d: %w", p.ID, store.ErrNotFound)
		}
		return fmt.Errorf("sqlite: webhook report: delivery %d attempt %d of %s: claim lost: %w", p.ID, p.Attempt, p.Owner, store.ErrFenced)
	})
}

// checkWebhookReport checks what a report can be checked for without the
// database (both backends).
func checkWebhookReport(p *store.WebhookReportParams) error {
	switch p.Status {
	case store.WebhookDelivered, store.WebhookFailed:
	case store.WebhookPending:
		if p.RetryAfter < 0 {
			return errors.New("sqlite: webhook report: negative RetryAfter")
		}
	default:
		return fmt.Errorf("sqlite: webhook report: invalid status %q", p.Status)
	}
	return nil
}

// WebhookList returns deliveries in ID order.
func (s *Store) WebhookList(ctx context.Context, p *store.WebhookListParams) ([]*store.WebhookDelivery, error) {
	if err := s.checkOpen("webhook list"); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	q, args := "SELECT "+webhookColumns+" FROM webhook_deliveries WHERE id > ?", []any{p.After}
	var where strings.Builder
	if p.Status != "" {
		where.WriteString(" AND status = ?")
		args = append(args, p.Status)
	}
	if p.ResponseID != "" {
		where.WriteString(" AND response_id = ?")
		args = append(args, p.ResponseID)
	}
	rows, err := s.rdb.QueryContext(ctx, q+where.String()+" ORDER BY id LIMIT ?", append(args, limit)...)
	if err != nil {
		return nil, mapError("webhook list", err)
	}
	defer rows.Close()
	var out []*store.WebhookDelivery
	for rows.Next() {
		d, err := scanWebhook(rows)
		if err != nil {
			return nil, mapError("webhook list", err)
		}
		out = append(out, d)
	}
	return out, mapError("webhook list", rows.Err())
}

// WebhookCount counts the deliveries per status.
func (s *Store) WebhookCount(ctx context.Context) (*store.WebhookCounts, error) {
	if err := s.checkOpen("webhook count"); err != nil {
		return nil, err
	}
	var c store.WebhookCounts
	err := s.rdb.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'),
		(SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'),
		(SELECT count(*) FROM webhook_deliveries WHERE status = 'failed')`).Scan(&c.Pending, &c.Delivered, &c.Failed)
	if err != nil {
		return nil, mapError("webhook count", err)
	}
	return &c, nil
}

// WebhookPrune deletes delivered and failed deliveries done before
// p.Before.
func (s *Store) WebhookPrune(ctx context.Context, p *store.WebhookPruneParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	var n int64
	err := s.write(ctx, "webhook prune", func(ctx context.Context, tx *sql.Conn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries
			WHERE status <> 'pending' AND done_at < ? ORDER BY done_at LIMIT ?)`, p.Before.UnixNano(), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), mapError("webhook prune", err)
}

// releaseWebhookClaims makes the deliveries claimed by a previous process
// (which held the file lock, so it is gone) due at once, as releaseLeases
// does for its leases: a crashed server's deliveries are sent again when
// it restarts, not when their claims would have expired.
func releaseWebhookClaims(ctx context.Context, db *sql.DB) error {
	_, err := db.ExecContext(ctx, `UPDATE webhook_deliveries SET claim_owner = '', next_attempt_at = ?
		WHERE status = 'pending' AND claim_owner <> ''`, time.Now().UnixNano())
	return mapError("release webhook claims of a previous process", err)
}
