package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/superstep/superstep/internal/fault"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/internal/partref"
	"github.com/superstep/superstep/store/internal/snapref"
)

const responseColumns = `id, run_id, previous_response_id, model, owner, status, request, snapshot, error, usage,
	next_seq, commit_step, start_step, publication, input, cancel_requested, created_at, updated_at, completed_at,
	trace_context`

// responseSelect is responseColumns as read from the table responses:
// CommitStep and UpdatedAt through respCommitStep and respUpdatedAt. A
// query that reads commit_step or updated_at of a response must use those
// two: the stored columns of an open response lag its silent commits.
var responseSelect = strings.NewReplacer(" commit_step,", " "+respCommitStep+",", " updated_at,", " "+respUpdatedAt+",",
	" request,", " "+requestColumn+",",
	" input,", " "+inputColumn+",").
	Replace(responseColumns)

// responseViewSelect is responseSelect without the request and the
// recorded input (NULL), for ResponseView.
var responseViewSelect = strings.NewReplacer(" commit_step,", " "+respCommitStep+",", " updated_at,", " "+respUpdatedAt+",",
	" request,", " NULL,",
	" input,", " NULL,").
	Replace(responseColumns)

// requestColumn and inputColumn are a response's request and recorded
// input, in a query on the table responses: in its row, or apart
// (bodyApart).
const (
	requestColumn = "coalesce(request, (SELECT request FROM response_bodies b WHERE b.num = responses.num))"
	inputColumn   = "coalesce(input, (SELECT input FROM response_bodies b WHERE b.num = responses.num))"
)

// bodyApart is the size of a request and recorded input (together) from
// which they are stored in response_bodies, apart from the response's row
// (schema version 19): a row that outgrows its leaf page is written again
// whole, overflow pages and all, by every UPDATE that changes its size,
// and a commit's often does. Below it the row stays within a page (4 KiB
// by default) with a snapshot under snapref.MinBytes, and the create
// writes one row, not two.
const bodyApart = 1 << 10

// respCommitStep and respUpdatedAt are a response's CommitStep and
// UpdatedAt, in a query on the table responses: the stored values, but
// for an open response (completed_at NULL, the head of its run) whose run
// committed since its row was last written (a commit that changes
// nothing the response shows leaves the row alone, see commitRunTx):
// then its CommitStep is the run's last step and its UpdatedAt the time
// of that commit (its checkpoint's created_at), or of the row's own last
// write (a live append) if later.
const (
	respCommitStep = `CASE WHEN responses.completed_at IS NULL
		THEN coalesce((SELECT u.last_step FROM runs u WHERE u.id = responses.run_id), responses.commit_step)
		ELSE responses.commit_step END`
	respUpdatedAt = `CASE WHEN responses.completed_at IS NULL
			AND responses.commit_step < (SELECT u.last_step FROM runs u WHERE u.id = responses.run_id)
		THEN max(responses.updated_at, coalesce((SELECT c.created_at FROM checkpoints c
			WHERE c.k = (SELECT (u.num << 32) + u.last_step FROM runs u WHERE u.id = responses.run_id)), 0))
		ELSE responses.updated_at END`
)

// scanResponse scans a row of responseSelect.
func scanResponse(row interface{ Scan(...any) error }) (*store.Response, error) {
	var r store.Response
	var created, updated int64
	var completed sql.NullInt64
	err := row.Scan(&r.ID, &r.RunID, &r.PreviousResponseID, &r.Model, &r.Owner, &r.Status, &r.Request, &r.Snapshot,
		&r.Error, &r.Usage, &r.NextSeq, &r.CommitStep, &r.StartStep, &r.Publication, &r.Input, &r.CancelRequested, &created, &updated, &completed,
		&r.TraceContext)
	if err != nil {
		return nil, err
	}
	r.CreatedAt, r.UpdatedAt = fromNanos(created), fromNanos(updated)
	if completed.Valid {
		t := fromNanos(completed.Int64)
		r.CompletedAt = &t
	}
	return &r, nil
}

// ResponseCreate durably creates a response (and its run, for a new run)
// with its first events, an optional step-0 checkpoint and an optional
// lease claim, in one transaction. Errors: store.ErrConflict when the ID
// exists, when the events do not start at 0 contiguously, or when
// continuing a run whose head is not PreviousResponseID or that is Active.
func (s *Store) ResponseCreate(ctx context.Context, p *store.ResponseCreateParams) (*store.ResponseCreateResult, error) {
	if err := validateCreate(p); err != nil {
		return nil, err
	}
	now := orNow(p.Now)
	resp, w := prepareCreate(p, now)
	var run *store.Run
	err := s.writeWake(ctx, "response create", nil, func(ctx context.Context, tx *sql.Conn) (err error) {
		run, err = createTx(ctx, tx, p, resp, w, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	if run.Active && run.Lease.Owner == "" {
		// Queued: announced to the hosts that may claim it.
		s.notices.Publish(store.Notice{Kind: store.NoticeRunReady, RunID: run.ID})
	}
	return &store.ResponseCreateResult{Response: resp, Run: run}, nil
}

// prepareCreate makes, before the create queues for the writer, the
// response row it writes and what needs no database.
func prepareCreate(p *store.ResponseCreateParams, now time.Time) (*store.Response, *commitWork) {
	w := &commitWork{parts: hashParts(p.Checkpoint), rec: encodeRecord(p.Events), snapshot: snapref.Encode(p.Response.Snapshot, p.Events)}
	w.manifest = encodeManifest(w.parts)
	referRequest(w.parts, p.Response.Request, p.Response.ID)
	resp := *p.Response
	resp.RunID, resp.NextSeq, resp.CreatedAt, resp.UpdatedAt = p.RunID, int64(len(p.Events)), now, now
	if resp.CreatedAt = p.Response.CreatedAt; resp.CreatedAt.IsZero() {
		resp.CreatedAt = now
	}
	resp.CompletedAt, resp.CancelRequested = nil, false
	if resp.Status.Terminal() {
		resp.CompletedAt = &now
	}
	return &resp, w
}

// validateCreate checks the parameters that need no database.
func validateCreate(p *store.ResponseCreateParams) error {
	switch {
	case p == nil || p.Response == nil || p.Response.ID == "" || p.RunID == "":
		return errors.New("sqlite: response create: Response.ID and RunID are required")
	case !p.Response.Status.Valid():
		return fmt.Errorf("sqlite: response create: invalid status %q", p.Response.Status)
	case p.LeaseOwner != "" && p.LeaseDuration <= 0:
		return errors.New("sqlite: response create: LeaseDuration must be > 0 with LeaseOwner")
	case p.ForkedFrom != nil && (p.Response.PreviousResponseID != "" || p.ForkedFrom.RunID == "" || p.ForkedFrom.Step < 0):
		return errors.New("sqlite: response create: a fork is a new run from a step >= 0 of a named run, without PreviousResponseID")
	}
	if err := validateIdempotencyKey(p); err != nil {
		return err
	}
	if err := store.CheckSplices(p.Events); err != nil {
		return fmt.Errorf("sqlite: response create: %w", err)
	}
	return checkSeq("response create", p.Events, 0)
}

// checkSeq checks that events continue a log whose next seq is next.
func checkSeq(op string, events []store.EventInput, next int64) error {
	for i, ev := range events {
		if ev.Seq != next+int64(i) {
			return fmt.Errorf("sqlite: %s: %w: event %d has seq %d, want %d", op, store.ErrConflict, i, ev.Seq, next+int64(i))
		}
	}
	if len(events) > 0 {
		return checkLow(op, "event seq", events[len(events)-1].Seq)
	}
	return nil
}

// createCheckSQL reads, in one statement, what a create checks first:
// whether response ?1 exists, whether run ?2 does, and the number a new
// run gets (one more than the greatest). Three statements before; a new
// run (the common create) now reads nothing more, a continued one reads
// its run next.
const createCheckSQL = `SELECT (SELECT count(*) FROM responses WHERE id = ?1), (SELECT count(*) FROM runs WHERE id = ?2),
	(SELECT coalesce(max(num), 0) + 1 FROM runs)`

// createTx is ResponseCreate inside the writer's transaction.
func createTx(ctx context.Context, tx *sql.Conn, p *store.ResponseCreateParams, resp *store.Response, w *commitWork, now time.Time) (*store.Run, error) {
	if p.IdempotencyKey != "" {
		// First: a create that repeats a key is refused as such, whatever
		// else of it would conflict now (its run was continued since).
		if err := recordIdempotencyKey(ctx, tx, p, resp.ID, now); err != nil {
			return nil, err
		}
	}
	var exists, runExists, runNum int64
	err := tx.QueryRowContext(ctx, createCheckSQL, resp.ID, p.RunID).Scan(&exists, &runExists, &runNum)
	if err != nil {
		return nil, mapError("response create", err)
	}
	if exists > 0 {
		return nil, fmt.Errorf("sqlite: response create: %w: response %s exists", store.ErrConflict, resp.ID)
	}
	if p.Conversation != nil {
		if err := takeTurnTx(ctx, tx, p.Conversation, resp.ID); err != nil {
			return nil, err
		}
	}
	var run *store.Run
	if runExists == 0 {
		run, err = createRun(ctx, tx, p, resp, w, runNum, now)
	} else if run, err = getRun(ctx, tx, p.RunID); err == nil {
		if p.Branch {
			err = fmt.Errorf("sqlite: response create: %w: branch run %s exists", store.ErrConflict, p.RunID)
		} else {
			err = continueRun(ctx, tx, p, run, resp, now)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := fault.Point(ctx, "create.run_written"); err != nil {
		return nil, err
	}
	num, err := insertResponse(ctx, tx, resp, w.snapshot)
	if err != nil {
		return nil, err
	}
	if err := fault.Point(ctx, "create.response_inserted"); err != nil {
		return nil, err
	}
	if err := insertRecord(ctx, tx, num, 0, p.Events, w.rec); err != nil {
		return nil, err
	}
	return run, fault.Point(ctx, "create.events_inserted")
}

// createRun inserts a new run numbered num headed by resp, with its
// step-0 checkpoint.
func createRun(ctx context.Context, tx *sql.Conn, p *store.ResponseCreateParams, resp *store.Response, w *commitWork, num int64, now time.Time) (*store.Run, error) {
	base := int64(0) // the run's first step: a branch starts where the previous response left its run
	if resp.PreviousResponseID != "" {
		// A continuation never creates a run (its run was deleted), but a
		// branch does, of a previous response that still exists.
		err := tx.QueryRowContext(ctx, "SELECT "+respCommitStep+" FROM responses WHERE id = ?", resp.PreviousResponseID).Scan(&base)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, mapError("response create", err)
		}
		if !p.Branch || err != nil {
			return nil, fmt.Errorf("sqlite: response create: %w", &store.ContinueError{RunID: p.RunID, PreviousResponseID: resp.PreviousResponseID, Reason: store.ContinueGone})
		}
	}
	forkRun, forkStep := "", int64(-1)
	if f := p.ForkedFrom; f != nil {
		base, forkRun, forkStep = f.Step, f.RunID, f.Step
	}
	resp.CommitStep = base
	run := &store.Run{ID: p.RunID, Model: resp.Model, HeadResponseID: resp.ID, Active: !resp.Status.Terminal(), LastStep: base,
		CreatedAt: now, UpdatedAt: now}
	claimLease(run, p.LeaseOwner, p.LeaseDuration, now)
	if err := recordClaim(ctx, tx, run, p.LeaseOwner, now); err != nil {
		return nil, err
	}
	cpStep := int64(-1)
	if p.Checkpoint != nil {
		cpStep = base
		if _, err := writeCheckpoint(ctx, tx, run.ID, num, base, -1, nil, w.parts, w.manifest, now); err != nil {
			return nil, err
		}
		if err := fault.Point(ctx, "create.checkpoint_inserted"); err != nil {
			return nil, err
		}
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO runs (id, num, model, head_response_id, last_step, checkpoint_step, lease_owner,
		lease_epoch, lease_expires_at, active, created_at, updated_at, forked_from_run, forked_from_step)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		run.ID, num, run.Model, run.HeadResponseID, base, cpStep, run.Lease.Owner, run.Lease.Epoch, nanos(run.Lease.ExpiresAt),
		run.Active, now.UnixNano(), now.UnixNano(), forkRun, forkStep)
	return run, mapError("insert run", err)
}

// continueRun makes resp the head of an existing, inactive run whose head
// is resp.PreviousResponseID and whose last commit is that response's.
func continueRun(ctx context.Context, tx *sql.Conn, p *store.ResponseCreateParams, run *store.Run, resp *store.Response, now time.Time) error {
	if resp.PreviousResponseID == "" {
		return fmt.Errorf("sqlite: response create: %w: run %s exists; a new response of it must name its head", store.ErrConflict, run.ID)
	}
	var prevStep int64
	err := tx.QueryRowContext(ctx, "SELECT "+respCommitStep+" FROM responses WHERE id = ? AND run_id = ?", resp.PreviousResponseID, run.ID).Scan(&prevStep)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return mapError("response create", err)
	}
	if reason := continueReason(run, resp.PreviousResponseID, err == nil, prevStep); reason != 0 {
		return fmt.Errorf("sqlite: response create: %w", &store.ContinueError{RunID: run.ID, PreviousResponseID: resp.PreviousResponseID, Reason: reason})
	}
	run.HeadResponseID, run.Active, run.UpdatedAt = resp.ID, !resp.Status.Terminal(), now
	resp.CommitStep = run.LastStep
	claimLease(run, p.LeaseOwner, p.LeaseDuration, now)
	if err := recordClaim(ctx, tx, run, p.LeaseOwner, now); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE runs SET head_response_id = ?, active = ?, lease_owner = ?, lease_epoch = ?,
		lease_expires_at = ?, updated_at = ? WHERE id = ?`,
		run.HeadResponseID, run.Active, run.Lease.Owner, run.Lease.Epoch, nanos(run.Lease.ExpiresAt), now.UnixNano(), run.ID)
	return mapError("update run", err)
}

// continueReason says why run cannot be continued from response prev
// (found: it exists in the run, with CommitStep prevStep); 0 when it can.
// Only the response whose commit is the run's last may be continued, or
// the run would resume from a deleted later response's checkpoint.
func continueReason(run *store.Run, prev string, found bool, prevStep int64) store.ContinueReason {
	switch {
	case !found:
		return store.ContinueGone
	case run.HeadResponseID != prev:
		return store.ContinueNotHead
	case run.Active:
		return store.ContinueActive
	case prevStep != run.LastStep:
		return store.ContinueNotLastCommit
	}
	return 0
}

// claimLease sets run's lease to owner for d (epoch+1) when owner is set.
func claimLease(run *store.Run, owner string, d time.Duration, now time.Time) {
	if owner == "" {
		return
	}
	run.Lease = store.Lease{Owner: owner, Epoch: run.Lease.Epoch + 1, ExpiresAt: now.Add(d)}
}

// insertResponse inserts resp, with snapshot stored for its snapshot
// (snapref.Encode), and returns its number (for event keys).
func insertResponse(ctx context.Context, tx *sql.Conn, r *store.Response, snapshot []byte) (int64, error) {
	r.StartStep = r.CommitStep // the run's step now
	request, input := r.Request, r.Input
	apart := len(request)+len(input) >= bodyApart
	if apart {
		request, input = nil, nil
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO responses (`+responseColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.RunID, r.PreviousResponseID, r.Model, r.Owner, r.Status, request, snapshot, r.Error, r.Usage,
		r.NextSeq, r.CommitStep, r.CommitStep, r.Publication, input, r.CancelRequested, r.CreatedAt.UnixNano(), r.UpdatedAt.UnixNano(), nullNanos(r.CompletedAt),
		r.TraceContext)
	if err != nil {
		return 0, mapError("insert response", err)
	}
	num, err := res.LastInsertId()
	if err != nil || !apart {
		return num, mapError("insert response", err)
	}
	_, err = tx.ExecContext(ctx, "INSERT INTO response_bodies (num, request, input) VALUES (?, ?, ?)", num, r.Request, r.Input)
	return num, mapError("insert response body", err)
}

// ResponseGet returns a response by ID (store.ErrNotFound).
func (s *Store) ResponseGet(ctx context.Context, id string) (*store.Response, error) {
	return s.readResponse(ctx, "response get", responseSelect, id)
}

// readResponse reads response id by the columns cols (responseSelect or
// responseViewSelect), its snapshot resolved.
func (s *Store) readResponse(ctx context.Context, op, cols, id string) (*store.Response, error) {
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	r, err := scanResponse(s.rdb.QueryRowContext(ctx, "SELECT "+cols+" FROM responses WHERE id = ?", id))
	if err == nil {
		err = s.readSnapshot(ctx, r)
	}
	return r, mapError(op+" "+id, err)
}

// readSnapshot replaces r.Snapshot, as stored, by the snapshot it stands
// for (snapref: a reference to the event that carries it).
func (s *Store) readSnapshot(ctx context.Context, r *store.Response) error {
	snap, err := snapref.Read(r.ID, r.Snapshot, func(id string, seq int64) (*store.Event, error) {
		evs, err := s.EventList(ctx, &store.EventListParams{ResponseID: id, After: seq - 1, Limit: 1})
		if err != nil || len(evs) == 0 {
			return nil, err
		}
		return &evs[0], nil
	})
	r.Snapshot = snap
	return err
}

// ResponseListByRun returns the responses of a run, oldest first (an empty
// list for an unknown run).
func (s *Store) ResponseListByRun(ctx context.Context, runID string) ([]*store.Response, error) {
	if err := s.checkOpen("response list"); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, "SELECT "+responseSelect+" FROM responses WHERE run_id = ? ORDER BY rowid", runID)
	if err != nil {
		return nil, mapError("response list", err)
	}
	defer rows.Close()
	var out []*store.Response
	for rows.Next() {
		r, err := scanResponse(rows)
		if err != nil {
			return nil, mapError("response list", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, mapError("response list", err)
	}
	rows.Close()
	for _, r := range out {
		if err := s.readSnapshot(ctx, r); err != nil {
			return nil, mapError("response list", err)
		}
	}
	return out, nil
}

// ResponseCancel records the cancel of a response that is not terminal:
// from then on it reads as cancelled (its status is StatusCancelled, with
// CompletedAt still nil until its owner commits the cancelled event) and
// only a cancelled commit is accepted for it. A terminal response is
// returned as it is. Idempotent (store.ErrNotFound).
func (s *Store) ResponseCancel(ctx context.Context, id string) (*store.Response, error) {
	var recorded bool
	err := s.writeWake(ctx, "response cancel", []string{id}, func(ctx context.Context, tx *sql.Conn) error {
		res, err := tx.ExecContext(ctx, `UPDATE responses SET cancel_requested = 1, status = ?, updated_at = ?
			WHERE id = ? AND status NOT IN (?, ?, ?, ?)`, store.StatusCancelled, time.Now().UnixNano(), id,
			store.StatusCompleted, store.StatusFailed, store.StatusCancelled, store.StatusIncomplete)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		recorded = n > 0
		return nil
	})
	if err != nil {
		return nil, err
	}
	resp, err := s.ResponseGet(ctx, id)
	if err != nil {
		return nil, err
	}
	if recorded {
		s.notices.Publish(store.Notice{Kind: store.NoticeCancel, RunID: resp.RunID, ResponseID: resp.ID})
	}
	return resp, nil
}

// ResponseDelete deletes a response, its events and its idempotency key
// record; when it was the last response of its run, the run, its
// checkpoints and blobs go too. Deleting
// the head of a run that has other responses makes the newest remaining
// response the head and the run inactive (nothing is left to drive)
// (store.ErrNotFound).
func (s *Store) ResponseDelete(ctx context.Context, id string) error {
	return s.writeWake(ctx, "response delete", []string{id}, func(ctx context.Context, tx *sql.Conn) error {
		return deleteResponseTx(ctx, tx, id)
	})
}

// unreferBlobs rewrites each blob of runID that refers to the request of
// response id (partref) as the part it stands for, before the response
// is deleted.
func unreferBlobs(ctx context.Context, tx *sql.Conn, runID, id string) error {
	rows, err := tx.QueryContext(ctx, "SELECT hash, data FROM blobs WHERE run_id = ? AND substr(data, 1, ?) = CAST(? AS BLOB)",
		runID, len(partref.Magic), partref.Magic)
	if err != nil {
		return err
	}
	var blobs []partref.Blob
	for rows.Next() {
		var b partref.Blob
		if err := rows.Scan(&b.Hash, &b.Data); err != nil {
			rows.Close()
			return err
		}
		blobs = append(blobs, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(blobs) == 0 {
		return err
	}
	parts, err := requestResolver(ctx, tx, runID).Unrefer(blobs, id)
	if err != nil {
		return fmt.Errorf("sqlite: delete response %s: a blob of run %s: %w", id, runID, err)
	}
	for _, b := range parts {
		if _, err := tx.ExecContext(ctx, "UPDATE blobs SET data = ? WHERE run_id = ? AND hash = ?", nonNil(b.Data), runID, b.Hash); err != nil {
			return err
		}
	}
	return nil
}

// deleteResponseTx is ResponseDelete inside the writer's transaction (also
// used by ResponsePrune).
func deleteResponseTx(ctx context.Context, tx *sql.Conn, id string) error {
	var runID string
	var num int64
	var others bool
	if err := tx.QueryRowContext(ctx, `SELECT run_id, num, EXISTS (SELECT 1 FROM responses o WHERE o.run_id = r.run_id AND o.id != r.id)
		FROM responses r WHERE id = ?`, id).Scan(&runID, &num, &others); err != nil {
		return err
	}
	if others {
		// The run stays: its blobs that refer to this response's
		// request become the parts they stand for.
		if err := unreferBlobs(ctx, tx, runID, id); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM event_records WHERE k BETWEEN ? AND ?", logKey(num, 0), logKey(num, lowMax)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM responses WHERE id = ?", id); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM response_bodies WHERE num = ?", num); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM idempotency_keys WHERE response_id = ?", id); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM pending_calls WHERE response_id = ?", id); err != nil {
		return err
	}
	if err := fault.Point(ctx, "delete.response_deleted"); err != nil {
		return err
	}
	var left int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM responses WHERE run_id = ?", runID).Scan(&left); err != nil {
		return err
	}
	if left > 0 {
		// The newest remaining response becomes the head; it is
		// terminal (only a head can be live), so the run is inactive.
		_, err := tx.ExecContext(ctx, `UPDATE runs SET active = 0,
			head_response_id = (SELECT id FROM responses WHERE run_id = ?1 ORDER BY rowid DESC LIMIT 1)
			WHERE id = ?1 AND head_response_id = ?2`, runID, id)
		return err
	}
	for _, q := range []string{"DELETE FROM checkpoints WHERE k BETWEEN " + runKeyLo + " AND " + runKeyHi,
		"DELETE FROM blobs WHERE run_id = ?1", "DELETE FROM lease_claims WHERE run_id = ?1", "DELETE FROM journal WHERE run_id = ?1", "DELETE FROM runs WHERE id = ?1"} {
		if _, err := tx.ExecContext(ctx, q, runID); err != nil {
			return err
		}
		if err := fault.Point(ctx, "delete.run_statement"); err != nil {
			return err
		}
	}
	return nil
}

// orNow returns t, or the current time when t is zero.
func orNow(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

// nanos returns t as Unix nanoseconds, 0 for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// nullNanos returns *t as Unix nanoseconds, or NULL.
func nullNanos(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}
