package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/superstep/superstep/internal/fault"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/internal/snapref"
)

// Commit atomically writes one superstep: the checkpoint (parts unchanged
// since the parent are kept by reference), the step's events and the head
// response's status and snapshot. It is group-committed with concurrent
// writes of other runs in one transaction. After an error none of it is
// visible. Errors: store.ErrFenced (*store.FencedError: stale epoch,
// released or expired lease), store.ErrConflict (Step is not LastStep+1,
// the run is not active, the response is not the head, or the events' Seq
// do not continue the log), store.ErrCancelled (the response's cancel is
// recorded and p.Status is not cancelled), store.ErrNotFound (unknown run
// or response). A commit resets the run's Resume; with p.Release (terminal
// commits only) it also releases the lease. The store does not keep
// p or its slices after Commit returns.
func (s *Store) Commit(ctx context.Context, p *store.CommitParams) (*store.CommitResult, error) {
	if err := validateCommit(p); err != nil {
		return nil, err
	}
	now := orNow(p.Now)
	w := prepareCommit(p)
	res := &store.CommitResult{}
	err := s.writeWake(ctx, "commit", []string{p.ResponseID}, func(ctx context.Context, tx *sql.Conn) error {
		return commitAllTx(ctx, tx, p, w, now, res)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// CreateCommit writes c and then p in one transaction (store.CreateCommitter):
// one write of the writer's batch where ResponseCreate and Commit are two.
func (s *Store) CreateCommit(ctx context.Context, c *store.ResponseCreateParams, p *store.CommitParams) (*store.ResponseCreateResult, *store.CommitResult, error) {
	if err := store.CheckCreateCommit(c, p); err != nil {
		return nil, nil, fmt.Errorf("sqlite: %w", err)
	}
	if err := validateCreate(c); err != nil {
		return nil, nil, err
	}
	if err := validateCommit(p); err != nil {
		return nil, nil, err
	}
	cnow, now := orNow(c.Now), orNow(p.Now)
	resp, cw := prepareCreate(c, cnow)
	w := prepareCommit(p)
	referRequest(w.parts, c.Response.Request, c.Response.ID)
	var run *store.Run
	res := &store.CommitResult{}
	err := s.writeWake(ctx, "create and commit", []string{p.ResponseID}, func(ctx context.Context, tx *sql.Conn) (err error) {
		if run, err = createTx(ctx, tx, c, resp, cw, cnow); err != nil {
			return err
		}
		q := *p
		q.Epoch = run.Lease.Epoch // the claim the create made
		return commitAllTx(ctx, tx, &q, w, now, res)
	})
	if err != nil {
		return nil, nil, err
	}
	// The create's result as ResponseCreate returns it: the run and the
	// response before the commit (res says what the commit did).
	return &store.ResponseCreateResult{Response: resp, Run: run}, res, nil
}

// validateCommit checks the parameters of a commit that need no database.
func validateCommit(p *store.CommitParams) error {
	if p == nil || !p.Status.Valid() {
		return errors.New("sqlite: commit: a valid Status is required")
	}
	if err := p.CheckFinishing(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	if err := store.CheckSplices(p.Events); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	return nil
}

// prepareCommit makes what a commit writes that needs no database, by the
// caller's goroutine, not by the single writer inside its transaction.
func prepareCommit(p *store.CommitParams) *commitWork {
	w := &commitWork{parts: hashParts(p.Checkpoint), rec: encodeRecord(p.Events), snapshot: snapref.Encode(p.Snapshot, p.Events)}
	w.manifest = encodeManifest(w.parts)
	return w
}

// commitAllTx is Commit inside the writer's transaction: the commit, its
// extras (webhooks, ...) and the prunes it asks for.
func commitAllTx(ctx context.Context, tx *sql.Conn, p *store.CommitParams, w *commitWork, now time.Time, res *store.CommitResult) error {
	runNum, err := commitTx(ctx, tx, p, w, now, res)
	if err != nil {
		return err
	}
	if err := commitExtrasTx(ctx, tx, p, now); err != nil {
		return err
	}
	if p.JournalPrune {
		if err := pruneJournalTx(ctx, tx, p.RunID, p.Step); err != nil {
			return err
		}
	}
	if p.PruneKeep <= 0 {
		return nil
	}
	res.Pruned, err = pruneRunTx(ctx, tx, p.RunID, runNum, p.PruneKeep)
	return err
}

// commitWork is what Commit makes of its parameters before it queues for
// the writer.
type commitWork struct {
	parts    []hashedPart
	manifest []byte // encodeManifest(parts)
	rec      []byte // encodeRecord(events)
	snapshot []byte // snapref.Encode(snapshot, events)
}

// commitTx is Commit inside the writer's transaction. It returns the
// run's number. The parent checkpoint's manifest is read with the run
// only when a part is a blob (see writeCheckpoint).
func commitTx(ctx context.Context, tx *sql.Conn, p *store.CommitParams, w *commitWork, now time.Time, res *store.CommitResult) (int64, error) {
	var same *sameCheck
	if len(p.Events) == 0 && p.Snapshot == nil && !p.Status.Terminal() {
		same = &sameCheck{status: p.Status, error: p.Error, usage: p.Usage}
	}
	c, err := checkWrite(ctx, tx, p.RunID, p.Epoch, p.ResponseID, p.Events, now, p.Status == store.StatusCancelled, !allInline(w.parts), same)
	if err != nil {
		return 0, err
	}
	return c.run.num, commitRunTx(ctx, tx, p, w, now, res, c)
}

// commitRunTx is commitTx after checkWrite.
func commitRunTx(ctx context.Context, tx *sql.Conn, p *store.CommitParams, w *commitWork, now time.Time, res *store.CommitResult, c *checked) error {
	run, next, respNum := c.run, c.next, c.num
	var err error
	if err := checkLow("commit", "step", p.Step); err != nil {
		return err
	}
	if p.Step != run.LastStep+1 {
		return fmt.Errorf("%w: run %s: step %d is not the next step after %d", store.ErrConflict, p.RunID, p.Step, run.LastStep)
	}
	if err := fault.Point(ctx, "commit.checked"); err != nil {
		return err
	}
	if res.BytesWritten, err = writeCheckpoint(ctx, tx, p.RunID, run.num, p.Step, run.checkpointStep, run.checkpointManifest, w.parts, w.manifest, now); err != nil {
		return err
	}
	if err := fault.Point(ctx, "commit.checkpoint_inserted"); err != nil {
		return err
	}
	if err := insertRecord(ctx, tx, respNum, p.Step, p.Events, w.rec); err != nil {
		return err
	}
	if err := fault.Point(ctx, "commit.events_inserted"); err != nil {
		return err
	}
	res.NextSeq = next + int64(len(p.Events))
	if !c.same {
		// By rowid (num), not by id: no descent of the id index. Only a
		// terminal commit names completed_at: naming it makes SQLite
		// maintain the partial index responses_completed for the row,
		// and before the end it is NULL anyway (a finished response
		// takes no commit). A commit that changes nothing the response
		// shows (no events, no snapshot, the same status, error and
		// usage: a silent step) leaves the row alone, one statement and
		// one page fewer: its CommitStep and UpdatedAt, read while it is
		// open, are the run's (respCommitStep, respUpdatedAt).
		uq := `UPDATE responses SET status = ?1, snapshot = coalesce(?2, snapshot), error = ?3, usage = ?4, next_seq = ?5,
		commit_step = ?6, updated_at = ?7`
		if p.Status.Terminal() {
			uq += ", completed_at = ?7"
		}
		_, err = tx.ExecContext(ctx, uq+" WHERE num = ?8",
			p.Status, w.snapshot, p.Error, p.Usage, res.NextSeq, p.Step, now.UnixNano(), respNum)
		if err != nil {
			return mapError("update response", err)
		}
	}
	if err := fault.Point(ctx, "commit.response_updated"); err != nil {
		return err
	}
	// checkWrite found the run active. Setting active (even to 1) would
	// make SQLite rewrite the run's entry in the partial index
	// runs_claimable, one more page per commit, so only the commit that
	// ends the run names it.
	q := "UPDATE runs SET last_step = ?1, checkpoint_step = ?1, updated_at = ?2"
	if p.Status.Terminal() {
		q += ", active = 0"
		if p.Release {
			// As LeaseRelease: unowned and expired, the epoch kept.
			q += ", lease_owner = '', lease_expires_at = 0"
		}
	}
	if run.Resume.Failures > 0 || run.Resume.Error != "" || !run.Resume.NotBefore.IsZero() {
		// A commit shows the run can be resumed: failed attempts are
		// forgotten (only then, to keep the common commit's row small).
		q += ", resume_failures = 0, resume_error = '', resume_not_before = 0"
	}
	q += " WHERE id = ?3"
	_, err = tx.ExecContext(ctx, q, p.Step, now.UnixNano(), p.RunID)
	if err != nil {
		return mapError("update run", err)
	}
	if len(p.Webhooks) > 0 {
		if err := insertWebhooks(ctx, tx, p, now); err != nil {
			return err
		}
		if err := fault.Point(ctx, "commit.webhooks_inserted"); err != nil {
			return err
		}
	}
	return fault.Point(ctx, "commit.run_updated")
}

// The statement of checkWrite reads, in one statement, the run ?2 and the
// fields of the response ?1 that a write checks (NULL when it does not
// exist). With checkManifest it also reads the manifest of the run's
// newest checkpoint (NULL for none), which a commit's checkpoint is
// diffed against: one statement fewer per commit. With checkSame it also
// reads whether the response's status, error and usage are ?3, ?4 and
// ?5: a commit that changes nothing else of the response then leaves its
// row alone (see commitRunTx). Subqueries, not joins: with a join in its
// FROM, SQLite re-prepared the statement at every execution (its
// reprepare count grew by one per call).
const (
	checkWriteCols = "SELECT " + runColumns + `, (SELECT next_seq FROM responses WHERE id = ?1),
		(SELECT num FROM responses WHERE id = ?1), (SELECT cancel_requested FROM responses WHERE id = ?1)`
	checkManifest = `,
		(SELECT manifest FROM checkpoints WHERE k = (runs.num << 32) + runs.checkpoint_step AND runs.checkpoint_step >= 0)`
	checkSame = `,
		(SELECT status = ?3 AND error IS ?4 AND usage IS ?5 FROM responses WHERE id = ?1)`
	checkFrom = " FROM runs WHERE id = ?2"
)

// checkWriteSQL is the statement of checkWrite, by what it reads besides:
// [manifest][same].
var checkWriteSQL = [2][2]string{
	{checkWriteCols + checkFrom, checkWriteCols + checkSame + checkFrom},
	{checkWriteCols + checkManifest + checkFrom, checkWriteCols + checkManifest + checkSame + checkFrom},
}

// sameCheck is what checkWrite compares the response's row with: a
// commit's status, error and usage.
type sameCheck struct {
	status       store.Status
	error, usage []byte
}

// checked is what checkWrite found.
type checked struct {
	run       *runRow // with manifest, its checkpointManifest
	next, num int64   // the response's NextSeq and number (for event keys)
	// same reports, when checkWrite was given a sameCheck, that the
	// response's status, error and usage are the ones it names.
	same bool
}

// checkWrite checks that a write to runID's response at epoch is allowed
// now: the run and the response exist (ErrNotFound), the lease is held at
// epoch and unexpired (ErrFenced), the run is active and responseID is its
// head (ErrConflict), the response's cancel is not recorded unless
// cancelling (the write finishes it as cancelled; ErrCancelled otherwise),
// and events continue the response's log (ErrConflict).
func checkWrite(ctx context.Context, tx *sql.Conn, runID string, epoch int64, responseID string, events []store.EventInput, now time.Time, cancelling, manifest bool, same *sameCheck) (*checked, error) {
	var nextSeq, respNum sql.NullInt64
	var cancelRequested, isSame sql.NullBool
	extra := []any{&nextSeq, &respNum, &cancelRequested}
	args := []any{responseID, runID}
	var m []byte
	mi, si := 0, 0
	if manifest {
		mi = 1
		extra = append(extra, &m)
	}
	if same != nil {
		si = 1
		extra = append(extra, &isSame)
		args = append(args, string(same.status), same.error, same.usage)
	}
	run, err := scanRun(tx.QueryRowContext(ctx, checkWriteSQL[mi][si], args...), extra...)
	if err != nil {
		return nil, mapError("run "+runID, err)
	}
	run.checkpointManifest = m
	if epoch != run.Lease.Epoch || run.Lease.Owner == "" || !now.Before(run.Lease.ExpiresAt) {
		return nil, &store.FencedError{RunID: runID, Epoch: epoch, CurrentEpoch: run.Lease.Epoch}
	}
	if !nextSeq.Valid || !respNum.Valid {
		// Deleted (a DELETE, retention): the owner stops quietly.
		return nil, fmt.Errorf("sqlite: write: response %s: %w", responseID, store.ErrNotFound)
	}
	if !run.Active || responseID != run.HeadResponseID {
		return nil, fmt.Errorf("%w: run %s: response %s is not the active head (head %s, active %v)",
			store.ErrConflict, runID, responseID, run.HeadResponseID, run.Active)
	}
	if cancelRequested.Bool && !cancelling {
		return nil, fmt.Errorf("sqlite: write: response %s: %w", responseID, store.ErrCancelled)
	}
	if err := checkSeq("write", events, nextSeq.Int64); err != nil {
		return nil, err
	}
	return &checked{run: run, next: nextSeq.Int64, num: respNum.Int64, same: isSame.Bool}, nil
}

// EventAppend appends events outside a commit (live publication), fenced
// like Commit and group-committed with other writes. The events get Step
// -1. Errors: store.ErrFenced, store.ErrConflict, store.ErrCancelled (the
// response's cancel is recorded), store.ErrNotFound.
func (s *Store) EventAppend(ctx context.Context, p *store.EventAppendParams) error {
	if err := store.CheckSplices(p.Events); err != nil {
		return fmt.Errorf("sqlite: event append: %w", err)
	}
	now := orNow(p.Now)
	rec := encodeRecord(p.Events)
	return s.writeWake(ctx, "event append", []string{p.ResponseID}, func(ctx context.Context, tx *sql.Conn) error {
		c, err := checkWrite(ctx, tx, p.RunID, p.Epoch, p.ResponseID, p.Events, now, false, false, nil)
		if err != nil {
			return err
		}
		run, next, respNum := c.run, c.next, c.num
		if err := insertRecord(ctx, tx, respNum, -1, p.Events, rec); err != nil {
			return err
		}
		if len(p.Journal) > 0 && len(p.Events) > 0 {
			if err := insertJournal(ctx, tx, run, p.Epoch, p.JournalStep, p.Journal, now); err != nil {
				return err
			}
		}
		if err := fault.Point(ctx, "append.events_inserted"); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "UPDATE responses SET next_seq = ?, updated_at = ? WHERE num = ?",
			next+int64(len(p.Events)), now.UnixNano(), respNum)
		if err != nil {
			return err
		}
		return fault.Point(ctx, "append.response_updated")
	})
}
