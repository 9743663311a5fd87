package postgres

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/store"
)

// checkpointSQL reads one checkpoint with its parts' bytes in order; a
// checkpoint without parts yields one row with a NULL name.
const checkpointSQL = `SELECT c.step, c.parent_step, c.created_at, u.name, u.hash, b.data
	FROM checkpoints c
	LEFT JOIN LATERAL unnest(c.part_names, c.part_hashes) WITH ORDINALITY AS u(name, hash, i) ON true
	LEFT JOIN blobs b ON b.run_id = c.run_id AND b.hash = u.hash
	WHERE c.run_id = $1 AND c.step = %s
	ORDER BY u.i`

// CheckpointGet returns the run's checkpoint at step.
func (s *Store) CheckpointGet(ctx context.Context, runID string, step int64) (*store.Checkpoint, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	cp, _, err := s.readCheckpoint(ctx, fmt.Sprintf(checkpointSQL, "$2"), runID, step)
	return cp, err
}

// CheckpointGetLast returns the checkpoint at the run's last step, found
// through the run's primary key and the checkpoint's: O(1) in history.
func (s *Store) CheckpointGetLast(ctx context.Context, runID string) (*store.Checkpoint, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	cp, hs, err := s.readCheckpoint(ctx, fmt.Sprintf(checkpointSQL, "(SELECT last_step FROM runs WHERE id = $1)"), runID)
	if err == nil {
		s.parts.set(runID, hs)
	}
	return cp, err
}

// readCheckpoint runs a checkpointSQL query and verifies every part's hash.
func (s *Store) readCheckpoint(ctx context.Context, sql, runID string, args ...any) (*store.Checkpoint, map[hash]struct{}, error) {
	op := "read checkpoint of run " + runID
	rows, err := s.pool.Query(ctx, sql, append([]any{runID}, args...)...)
	if err != nil {
		return nil, nil, mapError(op, runID, 0, err)
	}
	defer rows.Close()
	cp := &store.Checkpoint{RunID: runID, Parts: []store.Part{}}
	hs := make(map[hash]struct{})
	n := 0
	for rows.Next() {
		var name *string
		var h, data []byte
		if err := rows.Scan(&cp.Step, &cp.ParentStep, &cp.CreatedAt, &name, &h, &data); err != nil {
			return nil, nil, mapError(op, runID, 0, err)
		}
		n++
		if name == nil {
			continue
		}
		if data == nil {
			return nil, nil, store.Corruptf("store/postgres: run %s step %d: part %q missing", runID, cp.Step, *name)
		}
		if sum := sha256.Sum256(data); !bytes.Equal(sum[:], h) {
			return nil, nil, store.Corruptf("store/postgres: run %s step %d: part %q does not match its hash", runID, cp.Step, *name)
		}
		hs[hash(h)] = struct{}{}
		cp.Parts = append(cp.Parts, store.Part{Name: *name, Data: data})
	}
	if err := rows.Err(); err != nil {
		return nil, nil, mapError(op, runID, 0, err)
	}
	if n == 0 {
		return nil, nil, fmt.Errorf("store/postgres: %s: %w", op, store.ErrNotFound)
	}
	cp.CreatedAt = cp.CreatedAt.UTC()
	return cp, hs, nil
}

// CheckpointList returns the run's checkpoint history, oldest first.
func (s *Store) CheckpointList(ctx context.Context, runID string) ([]store.CheckpointInfo, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	op := "list checkpoints of run " + runID
	rows, err := s.pool.Query(ctx, `SELECT step, parent_step, size, created_at FROM checkpoints
		WHERE run_id = $1 ORDER BY step`, runID)
	if err != nil {
		return nil, mapError(op, runID, 0, err)
	}
	infos, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.CheckpointInfo, error) {
		ci := store.CheckpointInfo{RunID: runID}
		err := row.Scan(&ci.Step, &ci.ParentStep, &ci.Size, &ci.CreatedAt)
		ci.CreatedAt = ci.CreatedAt.UTC()
		return ci, err
	})
	if err != nil {
		return nil, mapError(op, runID, 0, err)
	}
	if len(infos) == 0 {
		if _, err := s.RunGet(ctx, runID); err != nil {
			return nil, err
		}
	}
	return infos, nil
}

// CheckpointPrune deletes the run's checkpoints except the newest KeepLast,
// the last commit's and those a response still resumes from, then deletes
// the parts no remaining checkpoint references. It holds the run's row lock,
// so a concurrent Commit referencing a part cannot lose it.
func (s *Store) CheckpointPrune(ctx context.Context, p *store.CheckpointPruneParams) (int, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return 0, err
	}
	var deleted int64
	err := s.writeTx(ctx, func(ctx context.Context, tx pgx.Tx) (err error) {
		deleted, err = pruneTx(ctx, tx, p.RunID, max(p.KeepLast, 1))
		return err
	})
	if err != nil {
		return 0, mapError("prune checkpoints of run "+p.RunID, p.RunID, 0, err)
	}
	return int(deleted), nil
}

// pruneTx is CheckpointPrune inside tx: it keeps the newest keep
// checkpoints, the last commit's and every response's CommitStep, and
// deletes the blobs no remaining checkpoint references.
func pruneTx(ctx context.Context, tx pgx.Tx, runID string, keep int) (int64, error) {
	var last int64
	if err := tx.QueryRow(ctx, "SELECT last_step FROM runs WHERE id = $1 FOR UPDATE", runID).Scan(&last); err != nil {
		return 0, err
	}
	tag, err := tx.Exec(ctx, `DELETE FROM checkpoints WHERE run_id = $1 AND step <> $3
		AND step NOT IN (SELECT step FROM checkpoints WHERE run_id = $1 ORDER BY step DESC LIMIT $2)
		AND step NOT IN (SELECT commit_step FROM responses WHERE run_id = $1)`, runID, keep, last)
	if err != nil || tag.RowsAffected() == 0 {
		return 0, err
	}
	_, err = tx.Exec(ctx, `DELETE FROM blobs b WHERE b.run_id = $1 AND NOT EXISTS (
		SELECT 1 FROM checkpoints c WHERE c.run_id = $1 AND b.hash = ANY (c.part_hashes))`, runID)
	return tag.RowsAffected(), err
}
