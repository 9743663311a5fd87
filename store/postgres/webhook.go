package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/superstep/superstep/store"
)

var _ store.WebhookOutbox = (*Store)(nil)

const webhookColumns = "id, event_id, type, response_id, endpoint, status, attempts, created_at, next_attempt_at, claim_owner, last_error, done_at"

func scanWebhook(row pgx.Row) (*store.WebhookDelivery, error) {
	var d store.WebhookDelivery
	var status string
	var attempts int32
	if err := row.Scan(&d.ID, &d.EventID, &d.Type, &d.ResponseID, &d.Endpoint, &status, &attempts,
		&d.CreatedAt, &d.NextAttemptAt, &d.ClaimOwner, &d.LastError, &d.DoneAt); err != nil {
		return nil, err
	}
	d.Status, d.Attempts = store.WebhookStatus(status), int(attempts)
	d.CreatedAt, d.NextAttemptAt = d.CreatedAt.UTC(), d.NextAttemptAt.UTC()
	if d.DoneAt != nil {
		t := d.DoneAt.UTC()
		d.DoneAt = &t
	}
	return &d, nil
}

// insertWebhooksSQL writes a commit's deliveries, due at once, at the
// commit's time (statement_timestamp: a member of a group commit is timed
// as its own statement, as batchCommitSQL is).
const insertWebhooksSQL = `INSERT INTO webhook_deliveries (event_id, type, response_id, endpoint, created_at, next_attempt_at)
	SELECT e, t, $4, u, coalesce($5::timestamptz, statement_timestamp()), coalesce($5::timestamptz, statement_timestamp())
	FROM unnest($1::text[], $2::text[], $3::text[]) AS w(e, t, u)`

// insertWebhooks writes p's webhook deliveries in the commit's
// transaction, after its superstep_commit call (which returned, so the
// commit is accepted): a response that finished has them, a commit that
// failed wrote none.
func insertWebhooks(ctx context.Context, tx pgx.Tx, p *store.CommitParams) error {
	if len(p.Webhooks) == 0 {
		return nil
	}
	ids, types, urls := make([]string, len(p.Webhooks)), make([]string, len(p.Webhooks)), make([]string, len(p.Webhooks))
	for i, w := range p.Webhooks {
		ids[i], types[i], urls[i] = w.EventID, w.Type, w.Endpoint
	}
	_, err := tx.Exec(ctx, insertWebhooksSQL, ids, types, urls, p.ResponseID, callTime(p.Now))
	return err
}

// WebhookClaim claims due deliveries (see store.WebhookOutbox). Rows
// another host is claiming are skipped (SKIP LOCKED), so concurrent claims
// never wait for each other nor return one delivery twice.
func (s *Store) WebhookClaim(ctx context.Context, p *store.WebhookClaimParams) ([]*store.WebhookDelivery, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	if p.Owner == "" || p.Lease <= 0 {
		return nil, errors.New("store/postgres: webhook claim: an Owner and a Lease > 0 are required")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	var out []*store.WebhookDelivery
	err := s.write(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		rows, err := conn.Query(ctx, `WITH t AS (SELECT coalesce($4::timestamptz, now()) AS now),
			due AS (SELECT id FROM webhook_deliveries, t WHERE status = 'pending' AND next_attempt_at <= t.now
				ORDER BY next_attempt_at, id LIMIT $3 FOR UPDATE SKIP LOCKED)
			UPDATE webhook_deliveries d SET attempts = d.attempts + 1, claim_owner = $1,
				next_attempt_at = t.now + $2 * interval '1 microsecond'
			FROM due, t WHERE d.id = due.id
			RETURNING `+qualify("d", webhookColumns), p.Owner, micros(p.Lease), limit, callTime(p.Now))
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.WebhookDelivery, error) { return scanWebhook(row) })
		return err
	})
	if err != nil {
		return nil, mapError("webhook claim", "", 0, err)
	}
	slices.SortFunc(out, func(a, b *store.WebhookDelivery) int {
		if c := a.NextAttemptAt.Compare(b.NextAttemptAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, nil
}

// WebhookReport records a claimed attempt's outcome (see
// store.WebhookOutbox).
func (s *Store) WebhookReport(ctx context.Context, p *store.WebhookReportParams) error {
	if _, err := s.begin(time.Time{}); err != nil {
		return err
	}
	switch p.Status {
	case store.WebhookDelivered, store.WebhookFailed:
	case store.WebhookPending:
		if p.RetryAfter < 0 {
			return errors.New("store/postgres: webhook report: negative RetryAfter")
		}
	default:
		return fmt.Errorf("store/postgres: webhook report: invalid status %q", p.Status)
	}
	// One statement: the update, and whether the row exists at all.
	var updated, exists bool
	err := s.write(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		return conn.QueryRow(ctx, `WITH t AS (SELECT coalesce($7::timestamptz, now()) AS now),
			u AS (UPDATE webhook_deliveries d SET
				status = $4,
				last_error = $5,
				next_attempt_at = CASE WHEN $4 = 'pending' THEN t.now + $6 * interval '1 microsecond' ELSE d.next_attempt_at END,
				done_at = CASE WHEN $4 = 'pending' THEN NULL ELSE t.now END,
				claim_owner = CASE WHEN $4 = 'pending' THEN '' ELSE d.claim_owner END
			FROM t WHERE d.id = $1 AND d.claim_owner = $2 AND d.attempts = $3 AND d.status = 'pending'
			RETURNING d.id)
			SELECT EXISTS (SELECT 1 FROM u), EXISTS (SELECT 1 FROM webhook_deliveries WHERE id = $1)`,
			p.ID, p.Owner, int32(p.Attempt), string(p.Status), p.Error, micros(p.RetryAfter), callTime(p.Now)).Scan(&updated, &exists)
	})
	if err != nil {
		return mapError("webhook report", "", 0, err)
	}
	switch {
	case updated:
		return nil
	case !exists:
		return fmt.Errorf("store/postgres: webhook report: delivery %d: %w", p.ID, store.ErrNotFound)
	}
	return fmt.Errorf("store/postgres: webhook report: delivery %d attempt %d of %s: claim lost: %w", p.ID, p.Attempt, p.Owner, store.ErrFenced)
}

// WebhookList returns deliveries in ID order.
func (s *Store) WebhookList(ctx context.Context, p *store.WebhookListParams) ([]*store.WebhookDelivery, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, "SELECT "+webhookColumns+` FROM webhook_deliveries
		WHERE id > $1 AND ($2 = '' OR status = $2) AND ($3 = '' OR response_id = $3) ORDER BY id LIMIT $4`,
		p.After, string(p.Status), p.ResponseID, limit)
	if err != nil {
		return nil, mapError("webhook list", "", 0, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.WebhookDelivery, error) { return scanWebhook(row) })
	return out, mapError("webhook list", "", 0, err)
}

// WebhookCount counts the deliveries per status.
func (s *Store) WebhookCount(ctx context.Context) (*store.WebhookCounts, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	var c store.WebhookCounts
	err := s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'delivered'),
		count(*) FILTER (WHERE status = 'failed') FROM webhook_deliveries`).Scan(&c.Pending, &c.Delivered, &c.Failed)
	if err != nil {
		return nil, mapError("webhook count", "", 0, err)
	}
	return &c, nil
}

// WebhookPrune deletes delivered and failed deliveries done before
// p.Before.
func (s *Store) WebhookPrune(ctx context.Context, p *store.WebhookPruneParams) (int, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return 0, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	tag, err := s.execWrite(ctx, `DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries
		WHERE status <> 'pending' AND done_at < $1 ORDER BY done_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, normTime(p.Before), limit)
	if err != nil {
		return 0, mapError("webhook prune", "", 0, err)
	}
	return int(tag.RowsAffected()), nil
}
