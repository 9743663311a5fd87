package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/store"
)

// hasExtras reports whether a commit writes more than superstep_commit
// does: a conversation append, pending calls or webhook deliveries. Such a
// commit runs in a transaction of its own (or a group commit's savepoint)
// with commitExtras after the function.
func hasExtras(p *store.CommitParams) bool {
	return p.Conversation != nil || len(p.PendingCalls) > 0 || len(p.Webhooks) > 0
}

// commitExtras writes what p adds besides the superstep, in the commit's
// transaction, after superstep_commit: its conversation append (skipped
// when the conversation was deleted), its pending calls and its webhook
// deliveries (the outbox).
func commitExtras(ctx context.Context, tx pgx.Tx, p *store.CommitParams) error {
	if a := p.Conversation; a != nil {
		_, err := appendItems(ctx, tx, a.ID, p.ResponseID, a.Items, callTime(p.Now))
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
	}
	if len(p.PendingCalls) > 0 {
		_, err := tx.Exec(ctx, `INSERT INTO pending_calls (owner, call_id, response_id)
			SELECT r.owner, c, r.id FROM responses r, (SELECT DISTINCT unnest($2::text[])) AS u(c) WHERE r.id = $1
			ON CONFLICT (owner, call_id) DO UPDATE SET response_id = excluded.response_id`, p.ResponseID, p.PendingCalls)
		if err != nil {
			return err
		}
	}
	return insertWebhooks(ctx, tx, p)
}
