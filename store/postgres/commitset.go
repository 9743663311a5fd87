package postgres

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/superstep/superstep/store"
)

// The set-based batch: superstep_commit_batch (migration 014; since 016 a
// loop over superstep_write_step, superstep_commit's body) writes all
// the commits of a group-commit batch in one statement, so one round trip
// and one transaction in autocommit, with no savepoint per member. A
// member that is fenced or does not follow its run fails alone (a code
// per member); the rarer refusals undo the statement, and the batch is
// then written again by the savepoint path (commitPlain, commitMixed),
// where each member fails alone with the error it gets today.

// commitSetSQL calls superstep_commit_batch; see the migration for the
// parameters.
const commitSetSQL = `SELECT o_code, o_message, o_detail, o_next_seq, o_bytes, o_pruned FROM superstep_commit_batch(
	$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,
	$21, $22, $23, $24, $25, $26, $27, $28, $29, $30)`

// setEligible reports whether r can be a member of superstep_commit_batch
// (a commit with its run's create, fused, goes with the creates):
// what it writes besides the superstep is a checkpoint or journal prune at
// most. The others (a cancel reopened, resumes reset, conversation items,
// pending calls, webhooks) and a commit armed with a fault (tests) take
// the savepoint path.
func (r *commitReq) setEligible() bool {
	return r.create == nil && r.fused == nil && r.failAt == "" && !r.cancelling && !r.reset && !hasExtras(r.p)
}

// setBatch reports whether the batch order (in run order) can be written
// by superstep_commit_batch: every member eligible, each run once.
func setBatch(order []*commitReq) bool {
	for i, r := range order {
		if !r.setEligible() || (i > 0 && order[i-1].p.RunID == r.p.RunID) {
			return false
		}
	}
	return true
}

// commitSet writes the members of order (in run order, setBatch) with one
// superstep_commit_batch statement and records each member's own failure
// in errs. declined reports that the statement was refused as a whole
// (one of the refusals it leaves to the savepoint path), nothing written:
// the caller writes the batch again that way. err is a failure of the
// statement itself (the connection lost, a timeout), as for a batch.
func (s *Store) commitSet(ctx context.Context, order []*commitReq, errs map[*commitReq]error) (declined bool, err error) {
	args := setArgs(order, s.txChannel())
	err = s.write(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		rows, err := conn.Query(ctx, commitSetSQL, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return readSetRows(rows, order, errs)
	})
	return setOutcome(order, errs, err)
}

// readSetRows reads superstep_commit_batch's rows for the members of
// order: each member's result, or its own failure in errs.
func readSetRows(rows pgx.Rows, order []*commitReq, errs map[*commitReq]error) error {
	i := 0
	for rows.Next() {
		if i >= len(order) {
			return errors.New("store/postgres: commit batch: more results than members")
		}
		r := order[i]
		var code, msg, detail string
		var res store.CommitResult
		var pruned int64
		if err := rows.Scan(&code, &msg, &detail, &res.NextSeq, &res.BytesWritten, &pruned); err != nil {
			return err
		}
		res.Pruned = int(pruned)
		if code != "" {
			// The error superstep_fence raises for it alone.
			errs[r] = &pgconn.PgError{Severity: "ERROR", Code: code, Message: msg, Detail: detail}
			res = store.CommitResult{}
		}
		r.res = res
		i++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if i != len(order) {
		return errors.New("store/postgres: commit batch: fewer results than members")
	}
	return nil
}

// commitSetCreates writes a batch of new runs' creates and of commits
// that superstep_commit_batch can write (setBatch) in one transaction,
// in one round trip: BEGIN, the commits' statement, the creates'
// statements, COMMIT, with no savepoint. The creates come last, so that
// each runs (and takes its times, its lease's expiry among them) after
// the commits' waits for their runs' rows, right before the COMMIT that
// makes its run visible. A commit that is fenced or does
// not follow its run fails alone (errs); any statement that raises (a
// create that conflicts, one of the refusals superstep_commit_batch
// leaves to the savepoint path) undoes the transaction, declined: the
// caller writes the batch again by the savepoint path, where each member
// fails alone; byCreate then reports that the set statement (if any) was
// done and a create raised. err is a failure of the transaction itself,
// as for a batch.
func (s *Store) commitSetCreates(ctx context.Context, creates, commits []*commitReq, errs map[*commitReq]error) (declined, byCreate bool, err error) {
	all := slices.Concat(commits, creates)
	setDone := len(commits) == 0
	err = s.write(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		if len(commits) > 0 {
			b.Queue(commitSetSQL, setArgs(commits, s.txChannel())...).Query(func(rows pgx.Rows) error {
				if err := readSetRows(rows, commits, errs); err != nil {
					return err
				}
				setDone = true
				return nil
			})
		}
		for _, r := range creates {
			r.queue(b, s.txChannel(), func() {}) // a commit with its create (fused) may notify
		}
		b.Queue("COMMIT")
		err := conn.SendBatch(ctx, b).Close()
		if err != nil {
			// Ends the transaction if it is open (a no-op warning
			// otherwise); a broken connection is dropped by the pool.
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
		return err
	})
	declined, err = setOutcome(all, errs, err)
	return declined, declined && setDone, err
}

// setOutcome is the outcome of a set statement for the members of order
// that failed with err (nil: written).
func setOutcome(order []*commitReq, errs map[*commitReq]error, err error) (declined bool, _ error) {
	if err == nil {
		return false, nil
	}
	for _, r := range order {
		delete(errs, r)
		r.res = store.CommitResult{}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && !transient(err) {
		// The server refused the statement, which undid it.
		return true, nil
	}
	return false, err
}

// setArgs are superstep_commit_batch's parameters for the members rs.
func setArgs(rs []*commitReq, channel string) []any {
	n := len(rs)
	var (
		runs, responses, statuses            = make([]string, n), make([]string, n), make([]string, n)
		epochs, steps, firsts, counts, bytes = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		sizes                                = make([]int64, n)
		datas, snapshots, errs, usages       = make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
		nows                                 = make([]*time.Time, n)
		terminals, releases, journals        = make([]bool, n), make([]bool, n), make([]bool, n)
		keeps                                = make([]int32, n)
		partLo, partHi                       = make([]int32, n), make([]int32, n)
		blobLo, blobHi                       = make([]int32, n), make([]int32, n)
		refLo, refHi                         = make([]int32, n), make([]int32, n)
		manifests                            = make([][]byte, n)
		partHashes, blobHashes, blobDatas    = [][]byte{}, [][]byte{}, [][]byte{}
		refs                                 = [][]byte{}
	)
	for i, r := range rs {
		p := r.p
		runs[i], epochs[i], steps[i], responses[i] = p.RunID, p.Epoch, p.Step, p.ResponseID
		firsts[i], counts[i], bytes[i], datas[i] = r.ev.first, r.ev.count, r.ev.bytes, r.ev.data
		sizes[i], statuses[i], snapshots[i], errs[i], usages[i] = r.enc.size, string(p.Status), r.snap, p.Error, p.Usage
		nows[i], terminals[i] = callTime(p.Now), p.Status.Terminal()
		releases[i] = p.Release && p.Status.Terminal()
		keeps[i], journals[i] = int32(max(p.PruneKeep, 0)), p.JournalPrune
		// Member i's elements are [lo, hi] (1-based, inclusive; empty when
		// hi < lo) of the concatenated arrays.
		manifests[i] = r.enc.manifest
		partLo[i] = int32(len(partHashes) + 1)
		partHashes = append(partHashes, r.enc.partHashes...)
		partHi[i] = int32(len(partHashes))
		blobLo[i] = int32(len(blobHashes) + 1)
		blobHashes = append(blobHashes, r.enc.blobHashes...)
		blobDatas = append(blobDatas, r.enc.blobData...)
		blobHi[i] = int32(len(blobHashes))
		refLo[i] = int32(len(refs) + 1)
		refs = append(refs, r.enc.refHashes...)
		refHi[i] = int32(len(refs))
	}
	return []any{runs, epochs, steps, responses, firsts, counts, bytes, datas,
		sizes, statuses, snapshots, errs, usages, nows, terminals, releases, keeps, journals,
		manifests, partLo, partHi, partHashes, blobLo, blobHi, blobHashes, blobDatas, refLo, refHi, refs, channel}
}
