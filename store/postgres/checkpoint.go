package postgres

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/internal/partref"
)

// checkpointSQL reads one checkpoint with its blob parts' bytes in order,
// one row per element of part_hashes (one row with a NULL hash for none);
// the first row carries the names and the manifest (migration 016: a row
// with a manifest lists its parts there, one without lists them in
// part_names, all of them blobs).
const checkpointSQL = `SELECT c.step, c.parent_step, c.created_at,
		CASE WHEN coalesce(u.i, 1) = 1 THEN c.part_names END, CASE WHEN coalesce(u.i, 1) = 1 THEN c.manifest END,
		u.hash, b.data
	FROM checkpoints c
	LEFT JOIN LATERAL unnest(c.part_hashes) WITH ORDINALITY AS u(hash, i) ON true
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
		s.parts.set(runID, hs, trustNone, cp.Step)
	}
	return cp, err
}

// readCheckpoint runs a checkpointSQL query, verifies every blob part's
// hash and returns the checkpoint with its parts as the part cache holds
// them.
func (s *Store) readCheckpoint(ctx context.Context, sql, runID string, args ...any) (*store.Checkpoint, map[hash]bool, error) {
	op := "read checkpoint of run " + runID
	rows, err := s.pool.Query(ctx, sql, append([]any{runID}, args...)...)
	if err != nil {
		return nil, nil, mapError(op, runID, 0, err)
	}
	defer rows.Close()
	cp := &store.Checkpoint{RunID: runID, Parts: []store.Part{}}
	var names []string
	var manifest []byte
	var blobs []blob
	n := 0
	for rows.Next() {
		var ns []string
		var m, h, data []byte
		if err := rows.Scan(&cp.Step, &cp.ParentStep, &cp.CreatedAt, &ns, &m, &h, &data); err != nil {
			return nil, nil, mapError(op, runID, 0, err)
		}
		if n++; n == 1 {
			names, manifest = ns, m
		}
		if h == nil {
			continue
		}
		if data == nil {
			return nil, nil, store.Corruptf("store/postgres: run %s step %d: blob part %x missing", runID, cp.Step, h)
		}
		if partref.IsRef(data) {
			if len(h) != len(hash{}) {
				return nil, nil, store.Corruptf("store/postgres: run %s step %d: blob hash of %d bytes", runID, cp.Step, len(h))
			}
			blobs = append(blobs, blob{hash(h), data, true})
			continue
		}
		sum := sha256.Sum256(data)
		if !bytes.Equal(sum[:], h) {
			return nil, nil, store.Corruptf("store/postgres: run %s step %d: blob part %x does not match its hash", runID, cp.Step, h)
		}
		blobs = append(blobs, blob{sum, data, false})
	}
	if err := rows.Err(); err != nil {
		return nil, nil, mapError(op, runID, 0, err)
	}
	if n == 0 {
		return nil, nil, fmt.Errorf("store/postgres: %s: %w", op, store.ErrNotFound)
	}
	rows.Close() // its connection back before the requests are read
	if err := resolveBlobs(ctx, s.pool, runID, cp.Step, blobs); err != nil {
		return nil, nil, err
	}
	entries, err := checkpointEntries(names, manifest)
	if err != nil {
		return nil, nil, fmt.Errorf("run %s step %d: %w", runID, cp.Step, err)
	}
	hs := make(map[hash]bool, len(entries))
	for _, e := range entries {
		data := e.inline
		if data == nil {
			if len(blobs) == 0 {
				return nil, nil, store.Corruptf("store/postgres: run %s step %d: part %q has no blob", runID, cp.Step, e.name)
			}
			// Hashed once, when checked above.
			data, hs[blobs[0].sum] = blobs[0].data, true
			blobs = blobs[1:]
		} else {
			hs[sha256.Sum256(data)] = false
		}
		cp.Parts = append(cp.Parts, store.Part{Name: e.name, Data: data})
	}
	if len(blobs) > 0 {
		return nil, nil, store.Corruptf("store/postgres: run %s step %d: %d blobs more than its parts", runID, cp.Step, len(blobs))
	}
	cp.CreatedAt = cp.CreatedAt.UTC()
	return cp, hs, nil
}

// blob is a blob part as readCheckpoint read it.
type blob struct {
	sum  hash // checked against the row's hash
	data []byte
	ref  bool // data is a reference (partref), resolved and checked by resolveBlobs
}

// rowQuerier is what reads a row: a pool, a connection, a transaction.
type rowQuerier interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}

// resolveBlobs replaces each reference among blobs, read from run runID's
// checkpoint at step, by its part, checked against its hash.
func resolveBlobs(ctx context.Context, q rowQuerier, runID string, step int64, blobs []blob) error {
	var refs *partref.Resolver
	for i := range blobs {
		b := &blobs[i]
		if !b.ref {
			continue
		}
		if refs == nil {
			refs = requestResolver(ctx, q, runID)
		}
		data, err := refs.Part(b.data, b.sum[:])
		if err == nil && sha256.Sum256(data) != b.sum {
			err = store.Corruptf("its bytes do not match their hash")
		}
		if err != nil {
			return fmt.Errorf("store/postgres: run %s step %d: blob part %x: %w", runID, step, b.sum[:], err)
		}
		b.data = data
	}
	return nil
}

// requestResolver returns a partref.Resolver of run runID's blobs that
// reads requests, and blobs again, through q.
func requestResolver(ctx context.Context, q rowQuerier, runID string) *partref.Resolver {
	return &partref.Resolver{
		Request: func(id string) ([]byte, bool, error) {
			var request []byte
			err := q.QueryRow(ctx, "SELECT request FROM responses WHERE id = $1", id).Scan(&request)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil, false, nil
			}
			return request, err == nil, err
		},
		Blob: func(hash []byte) ([]byte, error) {
			var data []byte
			err := q.QueryRow(ctx, "SELECT data FROM blobs WHERE run_id = $1 AND hash = $2", runID, hash).Scan(&data)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil, nil
			}
			return data, err
		},
	}
}

// checkpointEntries are a checkpoint row's parts: its manifest's, or for
// a row written before manifests, its part_names, each a blob.
func checkpointEntries(names []string, manifest []byte) ([]manifestEntry, error) {
	if manifest != nil {
		return decodeManifest(manifest)
	}
	es := make([]manifestEntry, len(names))
	for i, n := range names {
		es[i].name = n
	}
	return es, nil
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
// deletes the blobs no remaining checkpoint references
// (superstep_prune_checkpoints, as a commit that prunes).
func pruneTx(ctx context.Context, tx pgx.Tx, runID string, keep int) (int64, error) {
	var last int64
	if err := tx.QueryRow(ctx, "SELECT last_step FROM runs WHERE id = $1 FOR UPDATE", runID).Scan(&last); err != nil {
		return 0, err
	}
	return pruneAtTx(ctx, tx, runID, keep, last)
}

// pruneAtTx is pruneTx for a caller that holds the run's row lock and
// knows its last step (a commit that just wrote it).
func pruneAtTx(ctx context.Context, tx pgx.Tx, runID string, keep int, last int64) (int64, error) {
	var n int64
	err := tx.QueryRow(ctx, pruneAtSQL, runID, keep, last).Scan(&n)
	return n, err
}

// pruneAtSQL is pruneAtTx's statement (the run, keep, its last step); it
// returns how many checkpoints it deleted.
const pruneAtSQL = "SELECT superstep_prune_checkpoints($1, $2, $3)"
