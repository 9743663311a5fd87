package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"

	"github.com/superstep/superstep/internal/fault"
	"github.com/superstep/superstep/store"
)

// CheckpointGet returns the run's checkpoint at step with its parts
// (store.ErrNotFound; store.ErrCorrupt when a part does not match its
// hash).
func (s *Store) CheckpointGet(ctx context.Context, runID string, step int64) (*store.Checkpoint, error) {
	if err := s.checkOpen("checkpoint get"); err != nil {
		return nil, err
	}
	tx, err := s.rdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, mapError("checkpoint get", err)
	}
	defer tx.Rollback()
	return readCheckpoint(ctx, tx, runID, step)
}

// CheckpointGetLast returns the checkpoint of the run's last commit, found
// through the run record (store.ErrNotFound when the run is unknown or has
// no checkpoint).
func (s *Store) CheckpointGetLast(ctx context.Context, runID string) (*store.Checkpoint, error) {
	if err := s.checkOpen("checkpoint get last"); err != nil {
		return nil, err
	}
	tx, err := s.rdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, mapError("checkpoint get last", err)
	}
	defer tx.Rollback()
	run, err := getRunRow(ctx, tx, runID)
	if err != nil {
		return nil, err
	}
	return readCheckpoint(ctx, tx, runID, run.LastStep)
}

// CheckpointList returns the run's checkpoint history, oldest first
// (store.ErrNotFound for an unknown run).
func (s *Store) CheckpointList(ctx context.Context, runID string) ([]store.CheckpointInfo, error) {
	if err := s.checkOpen("checkpoint list"); err != nil {
		return nil, err
	}
	tx, err := s.rdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, mapError("checkpoint list", err)
	}
	defer tx.Rollback()
	run, err := getRunRow(ctx, tx, runID)
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, "SELECT step, parent_step, size, created_at FROM checkpoints WHERE k BETWEEN ? AND ? ORDER BY k",
		logKey(run.num, 0), logKey(run.num, lowMax))
	if err != nil {
		return nil, mapError("checkpoint list", err)
	}
	defer rows.Close()
	var out []store.CheckpointInfo
	for rows.Next() {
		c := store.CheckpointInfo{RunID: runID}
		var created int64
		if err := rows.Scan(&c.Step, &c.ParentStep, &c.Size, &created); err != nil {
			return nil, mapError("checkpoint list", err)
		}
		c.CreatedAt = fromNanos(created)
		out = append(out, c)
	}
	return out, mapError("checkpoint list", rows.Err())
}

// CheckpointPrune deletes the run's checkpoints except the newest
// p.KeepLast (at least 1) and those a response of the run still needs (its
// CommitStep), then deletes the blobs no remaining checkpoint references.
// It returns how many checkpoints were deleted (store.ErrNotFound).
func (s *Store) CheckpointPrune(ctx context.Context, p *store.CheckpointPruneParams) (int, error) {
	keep := max(p.KeepLast, 1)
	var deleted int
	err := s.write(ctx, "checkpoint prune", func(ctx context.Context, tx *sql.Conn) (err error) {
		deleted, err = pruneTx(ctx, tx, p.RunID, keep)
		return err
	})
	return deleted, err
}

// pruneTx is CheckpointPrune inside the writer's transaction.
func pruneTx(ctx context.Context, tx *sql.Conn, runID string, keep int) (int, error) {
	run, err := getRunRow(ctx, tx, runID)
	if err != nil {
		return 0, err
	}
	return pruneRunTx(ctx, tx, runID, run.num, keep)
}

// pruneBoundSQL reads, for run ?1 (checkpoint keys ?2..?3), the key of
// the newest checkpoint that is not among the newest ?4 (NULL: nothing to
// prune) and the lowest commit step of its responses (those checkpoints
// are kept).
const pruneBoundSQL = `SELECT (SELECT k FROM checkpoints WHERE k BETWEEN ?2 AND ?3 ORDER BY k DESC LIMIT 1 OFFSET ?4),
	(SELECT min(` + respCommitStep + `) FROM responses WHERE run_id = ?1)`

// pruneRange names the checkpoints of keys ?1..?2, pruneExcept those of
// keys ?2..?3 but the ones a response of run ?1 resumes from: pruneRunTx
// reads their manifests, then deletes them. One DELETE that ranked the
// history and excluded the commit steps itself, in subqueries, took 2.2
// times the CPU of the bound read and the range delete (180 against 83 µs
// for a run of 11 checkpoints, 9 deleted, transaction included). One
// DELETE … RETURNING manifest in place of the read and the delete cost
// more than both: 93 against 73 µs of CPU per W1 prune
// (BenchmarkWriterCPU/conc=1's profile).
const (
	pruneRange  = ` FROM checkpoints WHERE k BETWEEN ?1 AND ?2`
	pruneExcept = ` FROM checkpoints WHERE k BETWEEN ?2 AND ?3
	AND step NOT IN (SELECT ` + respCommitStep + ` FROM responses WHERE run_id = ?1)`
)

// pruneRunTx is pruneTx for the run whose number the caller read: it
// deletes the run's checkpoints older than the newest keep, but those a
// response resumes from (by a plain key range when none of those is
// among them, the common case). The run's blobs are collected only when a
// deleted checkpoint referenced one: a history of inline parts (the
// common one) is pruned by two statements.
func pruneRunTx(ctx context.Context, tx *sql.Conn, runID string, runNum int64, keep int) (int, error) {
	lo := logKey(runNum, 0)
	var hi, minCommit sql.NullInt64
	if err := tx.QueryRowContext(ctx, pruneBoundSQL, runID, lo, logKey(runNum, lowMax), keep).Scan(&hi, &minCommit); err != nil {
		return 0, err
	}
	if !hi.Valid {
		return 0, nil
	}
	where, args := pruneRange, []any{lo, hi.Int64}
	if minCommit.Valid && minCommit.Int64 <= hi.Int64-lo {
		where, args = pruneExcept, []any{runID, lo, hi.Int64}
	}
	rows, err := tx.QueryContext(ctx, "SELECT manifest"+where, args...)
	if err != nil {
		return 0, err
	}
	var n int
	var blobs bool
	for rows.Next() {
		var m sql.RawBytes // read in place: no copy per deleted row
		if err := rows.Scan(&m); err != nil {
			rows.Close()
			return 0, err
		}
		n++
		blobs = blobs || refersBlob(m)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, "DELETE"+where, args...); err != nil {
		return 0, err
	}
	if err := fault.Point(ctx, "prune.checkpoints_deleted"); err != nil {
		return 0, err
	}
	if !blobs {
		return n, nil
	}
	return n, collectBlobs(ctx, tx, runID, runNum)
}

// collectBlobs deletes the run's blobs that no checkpoint of the run
// references (blobs are shared only within a run).
func collectBlobs(ctx context.Context, tx *sql.Conn, runID string, runNum int64) error {
	rows, err := tx.QueryContext(ctx, "SELECT manifest FROM checkpoints WHERE k BETWEEN ? AND ?", logKey(runNum, 0), logKey(runNum, lowMax))
	if err != nil {
		return err
	}
	live := map[[sha256.Size]byte]bool{}
	for rows.Next() {
		var m []byte
		if err := rows.Scan(&m); err != nil {
			rows.Close()
			return err
		}
		es, err := decodeManifest(m)
		if err != nil {
			rows.Close()
			return err
		}
		for _, e := range es {
			if e.inline == nil {
				live[e.hash] = true
			}
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	return deleteDeadBlobs(ctx, tx, runID, live)
}

// deleteDeadBlobs deletes the run's blobs whose hash is not live.
func deleteDeadBlobs(ctx context.Context, tx *sql.Conn, runID string, live map[[sha256.Size]byte]bool) error {
	rows, err := tx.QueryContext(ctx, "SELECT hash FROM blobs WHERE run_id = ?", runID)
	if err != nil {
		return err
	}
	var dead [][]byte
	for rows.Next() {
		var h []byte
		if err := rows.Scan(&h); err != nil {
			rows.Close()
			return err
		}
		if len(h) != sha256.Size || !live[[sha256.Size]byte(h)] {
			dead = append(dead, h)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, h := range dead {
		if _, err := tx.ExecContext(ctx, "DELETE FROM blobs WHERE run_id = ? AND hash = ?", runID, h); err != nil {
			return err
		}
		if err := fault.Point(ctx, "prune.blob_deleted"); err != nil {
			return err
		}
	}
	return nil
}
