package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/internal/partref"
)

// ResponseDelete deletes a response and its events; when it was the last
// response of its run, the run, its checkpoints and parts go too. When it
// was the head of a run that keeps other responses, the newest remaining
// response becomes the head.
func (s *Store) ResponseDelete(ctx context.Context, id string) error {
	if _, err := s.begin(time.Time{}); err != nil {
		return err
	}
	var runID string
	err := s.writeTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT run_id FROM responses WHERE id = $1", id).Scan(&runID); err != nil {
			return err
		}
		// Lock the run before the response, in the order Commit does.
		if _, err := tx.Exec(ctx, "SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", runID); err != nil {
			return err
		}
		if err := unreferBlobs(ctx, tx, runID, id); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, "DELETE FROM responses WHERE id = $1", id)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM event_records WHERE response_id = $1", id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM idempotency_keys WHERE response_id = $1", id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM pending_calls WHERE response_id = $1", id); err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("store/postgres: delete response %s: %w", id, store.ErrNotFound)
		}
		if err := fixRunAfterDelete(ctx, tx, runID, id); err != nil {
			return err
		}
		return s.notifyTx(ctx, tx, id)
	})
	if err != nil {
		return mapError("delete response "+id, runID, 0, err)
	}
	s.parts.forget(runID)
	s.announce(id)
	return nil
}

// unreferBlobs rewrites each blob of runID that refers to the request of
// response id (partref) as the part it stands for, before the response is
// deleted, when the run keeps other responses (else the blobs go with it).
func unreferBlobs(ctx context.Context, tx pgx.Tx, runID, id string) error {
	rows, err := tx.Query(ctx, `SELECT hash, data FROM blobs
		WHERE run_id = $1 AND substr(data, 1, $3::int) = $4::bytea
		AND EXISTS (SELECT 1 FROM responses o WHERE o.run_id = $1 AND o.id <> $2)`,
		runID, id, len(partref.Magic), []byte(partref.Magic))
	if err != nil {
		return err
	}
	blobs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[partref.Blob])
	if err != nil || len(blobs) == 0 {
		return err
	}
	parts, err := requestResolver(ctx, tx, runID).Unrefer(blobs, id)
	if err != nil {
		return fmt.Errorf("store/postgres: delete response %s: a blob of run %s: %w", id, runID, err)
	}
	for _, b := range parts {
		if _, err := tx.Exec(ctx, "UPDATE blobs SET data = $3::bytea, size = octet_length($3::bytea) WHERE run_id = $1 AND hash = $2",
			runID, b.Hash, b.Data); err != nil {
			return err
		}
	}
	return nil
}

// fixRunAfterDelete deletes the run when it has no response left, or moves
// its head to the newest remaining response when the head was deleted.
func fixRunAfterDelete(ctx context.Context, tx pgx.Tx, runID, deleted string) error {
	tag, err := tx.Exec(ctx, `DELETE FROM runs WHERE id = $1
		AND NOT EXISTS (SELECT 1 FROM responses WHERE run_id = $1)`, runID)
	if err != nil {
		return err
	}
	if tag.RowsAffected() > 0 {
		if _, err := tx.Exec(ctx, "DELETE FROM checkpoints WHERE run_id = $1", runID); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "DELETE FROM blobs WHERE run_id = $1", runID)
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE runs r SET head_response_id = h.id,
			active = h.status NOT IN ('completed', 'failed', 'cancelled', 'incomplete')
		FROM (SELECT id, status FROM responses WHERE run_id = $1 ORDER BY ord DESC LIMIT 1) h
		WHERE r.id = $1 AND r.head_response_id = $2`, runID, deleted)
	return err
}
