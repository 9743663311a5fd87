package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/internal/snapref"
)

// ResponseCreate durably creates a response (and its run, for a new run)
// with its first events, optional step-0 checkpoint and lease claim, in one
// transaction. See store.Store. Its time (the lease's expiry, and the
// times it records but Response.CreatedAt) is p.Now or else the
// database's clock (callTime). The create of a new run (newRunOnly), the
// common one, is one statement, as a commit is (createNewRun), and rides
// group commit as commits do; the others are a transaction of a
// statement per row (createInTx).
func (s *Store) ResponseCreate(ctx context.Context, p *store.ResponseCreateParams) (*store.ResponseCreateResult, error) {
	if _, err := s.begin(p.Now); err != nil {
		return nil, err
	}
	now := callTime(p.Now)
	if err := validateCreate(p); err != nil {
		return nil, err
	}
	var res *store.ResponseCreateResult
	var enc *encodedParts
	var err error
	switch {
	case !newRunOnly(p) || s.opts.createInTx:
		res, enc, err = s.createInTx(ctx, p, now)
	case s.opts.GroupCommit && !s.opts.createAlone:
		// Made while a group-commit batch is in flight, it goes in the
		// next batch's transaction (failing alone if it fails), else
		// alone as below.
		c := newCreateCall(p, now)
		if err := s.commits.do(ctx, s.newCreateReq(ctx, c)); err != nil {
			return nil, err // mapped (commitReq.mapError)
		}
		res, enc = c.result(), c.enc
	default:
		res, enc, err = s.createNewRun(ctx, p, now)
	}
	if err != nil {
		return nil, mapError("create response "+p.Response.ID, p.RunID, 0, err)
	}
	if enc != nil {
		s.parts.set(p.RunID, enc.all, res.Run.Lease.Epoch, res.Run.LastStep)
	}
	// No event announcement: nobody can wait on a response before it
	// exists. A run left without an owner is announced to the hosts that
	// may claim it.
	if res.Run.Active && res.Run.Lease.Owner == "" {
		s.sendNotice(store.Notice{Kind: store.NoticeRunReady, RunID: res.Run.ID})
	}
	return res, nil
}

// newRunOnly reports whether p creates a new run and writes nothing
// else but the run's rows (no idempotency key, no conversation turn, not
// a continuation nor a branch): createNewRun's one statement.
func newRunOnly(p *store.ResponseCreateParams) bool {
	return p.IdempotencyKey == "" && p.Conversation == nil && p.Response.PreviousResponseID == "" && !p.Branch
}

// createNewRunSQL calls the migration's superstep_create (019): one
// statement, so one round trip and one transaction in autocommit. It
// returns runColumns and the response's times.
const createNewRunSQL = `SELECT o_id, o_model, o_head_response_id, o_last_step, o_lease_owner, o_lease_epoch,
	o_lease_expires_at, o_active, o_created_at, o_updated_at, o_resume_failures, o_resume_error, o_resume_not_before,
	o_resp_created_at, o_resp_updated_at, o_resp_completed_at
	FROM superstep_create($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
		coalesce($16::timestamptz, now()), $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30)`

// createCall is one new run's create (newRunOnly): createNewRunSQL's
// parameters and, once it ran, its result.
type createCall struct {
	p    *store.ResponseCreateParams
	args []any
	enc  *encodedParts // the checkpoint's parts, nil without one
	ev   *encodedEvents
	run  store.Run
	resp store.Response
}

func newCreateCall(p *store.ResponseCreateParams, now *time.Time) *createCall {
	r := p.Response
	var created *time.Time // the response's own, else the call's
	if !r.CreatedAt.IsZero() {
		c := normTime(r.CreatedAt)
		created = &c
	}
	base, forkRun, forkStep := int64(0), "", int64(-1)
	if f := p.ForkedFrom; f != nil {
		base, forkRun, forkStep = f.Step, f.RunID, f.Step
	}
	c := &createCall{p: p, ev: encodeEvents(p.Events), resp: *r}
	cp := &encodedParts{}
	if p.Checkpoint != nil {
		c.enc = encodeCreateParts(p)
		cp = c.enc
	}
	c.args = []any{p.RunID, r.ID, r.Model, r.Owner, string(r.Status), r.Status.Terminal(), r.Request,
		snapref.Encode(r.Snapshot, p.Events), r.Error, r.Usage, r.CancelRequested, r.Publication, r.Input,
		r.TraceContext, created, now, p.LeaseOwner, micros(p.LeaseDuration), base, forkRun, forkStep,
		c.ev.count, c.ev.bytes, c.ev.data,
		p.Checkpoint != nil, cp.manifest, cp.partHashes, cp.blobHashes, cp.blobData, cp.size}
	return c
}

// size is the bytes c sends, for Options.CommitBatchBytes.
func (c *createCall) size() int {
	r := c.p.Response
	n := len(r.Request) + len(r.Snapshot) + len(r.Input) + len(c.ev.data)
	if c.enc != nil {
		n += len(c.enc.manifest)
		for _, b := range c.enc.blobData {
			n += len(b)
		}
	}
	return n
}

// sql is c's statement, alone or as a member of a group-commit batch
// (inBatch: without a Now of its own, its time is its statement's, as it
// would be alone, not the batch's start).
func (c *createCall) sql(inBatch bool) string {
	if inBatch {
		return batchCreateSQL
	}
	return createNewRunSQL
}

// batchCreateSQL is createNewRunSQL for a member of a batch.
var batchCreateSQL = strings.Replace(createNewRunSQL, "now())", "statement_timestamp())", 1)

// dest are the scan destinations of c's statement's row.
func (c *createCall) dest() []any {
	return append(runDest(&c.run), &c.resp.CreatedAt, &c.resp.UpdatedAt, &c.resp.CompletedAt)
}

// result is c's result, once its row was scanned.
func (c *createCall) result() *store.ResponseCreateResult {
	normRun(&c.run)
	resp := &c.resp
	resp.RunID, resp.NextSeq, resp.CommitStep, resp.StartStep = c.p.RunID, c.ev.count, c.run.LastStep, c.run.LastStep
	resp.CreatedAt, resp.UpdatedAt = resp.CreatedAt.UTC(), resp.UpdatedAt.UTC()
	if resp.CompletedAt != nil {
		t := resp.CompletedAt.UTC()
		resp.CompletedAt = &t
	}
	return &store.ResponseCreateResult{Response: resp, Run: &c.run}
}

// createNewRun is ResponseCreate of a new run (newRunOnly) in one
// statement: it writes what createInTx writes for it, in the same order,
// and fails the same way (a run that exists is a conflict, a response
// that exists the violation of its key).
func (s *Store) createNewRun(ctx context.Context, p *store.ResponseCreateParams, now *time.Time) (*store.ResponseCreateResult, *encodedParts, error) {
	c := newCreateCall(p, now)
	if err := s.writeCreate(ctx, c); err != nil {
		return nil, nil, err
	}
	return c.result(), c.enc, nil
}

// writeCreate runs c's statement alone, in autocommit: createNewRun, and
// a create that leads a group-commit batch of one (commitAlone).
func (s *Store) writeCreate(ctx context.Context, c *createCall) error {
	return s.write(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		return conn.QueryRow(ctx, c.sql(false), c.args...).Scan(c.dest()...)
	})
}

// createInTx is ResponseCreate as a transaction of several statements,
// for every create.
func (s *Store) createInTx(ctx context.Context, p *store.ResponseCreateParams, now *time.Time) (*store.ResponseCreateResult, *encodedParts, error) {
	var res *store.ResponseCreateResult
	var enc *encodedParts
	err := s.writeTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if p.IdempotencyKey != "" {
			// First: a create that repeats a key is refused as such,
			// whatever else of it would conflict now (its run was
			// continued since).
			if err := recordIdempotencyKey(ctx, tx, p, now); err != nil {
				return err
			}
		}
		if p.Conversation != nil {
			if err := takeTurn(ctx, tx, p.Conversation, p.Response.ID); err != nil {
				return err
			}
		}
		run, created, err := createOrContinueRun(ctx, tx, p, now)
		if err != nil {
			return err
		}
		if err := recordClaim(ctx, tx, run, p.LeaseOwner); err != nil {
			return err
		}
		resp, err := insertResponse(ctx, tx, p, run, now)
		if err != nil {
			return err
		}
		if created && p.Checkpoint != nil {
			if enc, err = insertInitialCheckpoint(ctx, tx, p, run.LastStep, now); err != nil {
				return err
			}
		}
		res = &store.ResponseCreateResult{Response: resp, Run: run}
		return nil
	})
	return res, enc, err
}

func validateCreate(p *store.ResponseCreateParams) error {
	if p.Response == nil || p.Response.ID == "" || p.RunID == "" {
		return errors.New("store/postgres: create response: Response, Response.ID and RunID are required")
	}
	if len(p.IdempotencyKey) > store.IdempotencyKeyMax {
		return fmt.Errorf("store/postgres: create response: idempotency key of %d bytes, the limit is %d",
			len(p.IdempotencyKey), store.IdempotencyKeyMax)
	}
	if f := p.ForkedFrom; f != nil && (p.Response.PreviousResponseID != "" || f.RunID == "" || f.Step < 0) {
		return errors.New("store/postgres: create response: a fork is a new run from a step >= 0 of a named run, without PreviousResponseID")
	}
	if err := validateWrite("create response", p.Response.Status, p.Events, true); err != nil {
		return err
	}
	if len(p.Events) > 0 && p.Events[0].Seq != 0 {
		return fmt.Errorf("store/postgres: create response: first event seq %d, want 0: %w", p.Events[0].Seq, store.ErrConflict)
	}
	return nil
}

// createOrContinueRun inserts a new run headed by the response, or, for a
// continuation (PreviousResponseID set), moves an existing inactive run
// whose head is PreviousResponseID, and whose last commit is that
// response's, to it. A continuation never inserts a run: one whose run was
// deleted meanwhile (DELETE, retention) is refused, not restarted at step 0.
func createOrContinueRun(ctx context.Context, tx pgx.Tx, p *store.ResponseCreateParams, now *time.Time) (run *store.Run, created bool, err error) {
	r := p.Response
	active := !r.Status.Terminal()
	claim := p.LeaseOwner != ""
	lease := micros(p.LeaseDuration)
	base := int64(0) // the run's first step: a branch starts where the previous response left its run
	if r.PreviousResponseID != "" && p.Branch {
		// A branch is a new run continuing a previous response that must
		// still exist; the row lock keeps a delete from racing the check.
		err := tx.QueryRow(ctx, `SELECT `+respCommitStep+` FROM responses WHERE id = $1 FOR SHARE`, r.PreviousResponseID).Scan(&base)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, false, &store.ContinueError{RunID: p.RunID, PreviousResponseID: r.PreviousResponseID, Reason: store.ContinueGone}
		}
		if err != nil {
			return nil, false, err
		}
	}
	if r.PreviousResponseID == "" || p.Branch {
		forkRun, forkStep := "", int64(-1)
		if f := p.ForkedFrom; f != nil {
			base, forkRun, forkStep = f.Step, f.RunID, f.Step
		}
		run, err = scanRun(tx.QueryRow(ctx, `INSERT INTO runs AS r (id, model, head_response_id, active,
				lease_owner, lease_epoch, lease_expires_at, created_at, updated_at, last_step, forked_from_run, forked_from_step)
			VALUES ($1, $2, $3, $4, $5, CASE WHEN $6 THEN 1 ELSE 0 END,
				CASE WHEN $6 THEN coalesce($8::timestamptz, now()) + $7::bigint * interval '1 microsecond'
					ELSE 'epoch'::timestamptz END,
				coalesce($8::timestamptz, now()), coalesce($8::timestamptz, now()), $9, $10, $11)
			ON CONFLICT (id) DO NOTHING RETURNING `+runColumns,
			p.RunID, r.Model, r.ID, active, p.LeaseOwner, claim, lease, now, base, forkRun, forkStep))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, false, fmt.Errorf("store/postgres: run %s exists; a new response of it must name its head: %w", p.RunID, store.ErrConflict)
		}
		return run, err == nil, err
	}
	// The run row is locked by the UPDATE (as by ResponseDelete and
	// retention), so the response checked here is not deleted under it.
	run, err = scanRun(tx.QueryRow(ctx, `UPDATE runs SET head_response_id = $2, active = $3,
			lease_owner = CASE WHEN $4 THEN $5 ELSE lease_owner END,
			lease_epoch = CASE WHEN $4 THEN lease_epoch + 1 ELSE lease_epoch END,
			lease_expires_at = CASE WHEN $4
				THEN coalesce($7::timestamptz, now()) + $6::bigint * interval '1 microsecond'
				ELSE lease_expires_at END,
			updated_at = coalesce($7::timestamptz, now())
		WHERE id = $1 AND head_response_id = $8 AND NOT active
			AND last_step = (SELECT `+respCommitStep+` FROM responses WHERE id = $8 AND run_id = $1)
		RETURNING `+runColumns,
		p.RunID, r.ID, active, claim, p.LeaseOwner, lease, now, r.PreviousResponseID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, continueRefused(ctx, tx, p.RunID, r.PreviousResponseID)
	}
	return run, false, err
}

// continueRefused explains a continuation of run from prev that matched no
// row, as a store.ContinueError.
func continueRefused(ctx context.Context, tx pgx.Tx, runID, prev string) error {
	var head string
	var active bool
	var last int64
	var prevStep *int64
	err := tx.QueryRow(ctx, `SELECT r.head_response_id, r.active, r.last_step,
			(SELECT `+respCommitStep+` FROM responses WHERE id = $2 AND run_id = r.id)
		FROM runs r WHERE r.id = $1`, runID, prev).
		Scan(&head, &active, &last, &prevStep)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	ce := &store.ContinueError{RunID: runID, PreviousResponseID: prev}
	switch {
	case err != nil || prevStep == nil:
		ce.Reason = store.ContinueGone
	case head != prev:
		ce.Reason = store.ContinueNotHead
	case active:
		ce.Reason = store.ContinueActive
	case *prevStep != last:
		ce.Reason = store.ContinueNotLastCommit
	default:
		// Changed between the UPDATE and this read: a conflict all the same.
		ce.Reason = store.ContinueNotHead
	}
	return fmt.Errorf("store/postgres: %w", ce)
}

// insertResponse inserts the response and its first events. Its snapshot
// is stored by reference to response.created when long (snapref). Only
// the columns the database fills are read back: the request, snapshot and
// input the caller has are not sent back to it.
func insertResponse(ctx context.Context, tx pgx.Tx, p *store.ResponseCreateParams, run *store.Run, now *time.Time) (*store.Response, error) {
	r := p.Response
	var created *time.Time // the response's own, else the call's
	if !r.CreatedAt.IsZero() {
		c := normTime(r.CreatedAt)
		created = &c
	}
	resp := *r
	resp.RunID, resp.NextSeq, resp.CommitStep, resp.StartStep = p.RunID, int64(len(p.Events)), run.LastStep, run.LastStep
	err := tx.QueryRow(ctx, `INSERT INTO responses (id, run_id, previous_response_id,
			model, owner, status, request, snapshot, error, usage, next_seq, commit_step, start_step,
			publication, input, cancel_requested, created_at, updated_at, completed_at, trace_context)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $17, $18, $13,
			coalesce($14::timestamptz, $15::timestamptz, now()), coalesce($15::timestamptz, now()),
			CASE WHEN $16 THEN coalesce($15::timestamptz, now()) END, $19)
		RETURNING created_at, updated_at, completed_at`,
		r.ID, p.RunID, r.PreviousResponseID, r.Model, r.Owner, string(r.Status), r.Request, snapref.Encode(r.Snapshot, p.Events),
		r.Error, r.Usage, int64(len(p.Events)), run.LastStep, r.CancelRequested, created, now, r.Status.Terminal(),
		r.Publication, r.Input, r.TraceContext).Scan(&resp.CreatedAt, &resp.UpdatedAt, &resp.CompletedAt)
	resp.CreatedAt, resp.UpdatedAt = resp.CreatedAt.UTC(), resp.UpdatedAt.UTC()
	if resp.CompletedAt != nil {
		t := resp.CompletedAt.UTC()
		resp.CompletedAt = &t
	}
	if err != nil {
		return nil, err
	}
	if len(p.Events) > 0 {
		ev := encodeEvents(p.Events)
		_, err = tx.Exec(ctx, `INSERT INTO event_records (response_id, first_seq, last_seq, step, bytes, data)
			VALUES ($1, $2::bigint, $2::bigint + $3::bigint - 1, 0, $4, $5)`, r.ID, ev.first, ev.count, ev.bytes, ev.data)
	}
	return &resp, err
}

// encodeCreateParts encodes the checkpoint p's create writes: the run's
// first, nothing of it known before, its blobs referring to the request
// where they repeat it (partref).
func encodeCreateParts(p *store.ResponseCreateParams) *encodedParts {
	enc := encodeParts(p.Checkpoint, nil, false)
	enc.referRequest(p.Response.Request, p.Response.ID)
	return enc
}

// insertInitialCheckpoint writes the step-0 checkpoint of a new run.
func insertInitialCheckpoint(ctx context.Context, tx pgx.Tx, p *store.ResponseCreateParams, step int64, now *time.Time) (*encodedParts, error) {
	runID := p.RunID
	enc := encodeCreateParts(p)
	_, err := tx.Exec(ctx, `INSERT INTO blobs (run_id, hash, size, data)
		SELECT $1, u.h, octet_length(u.d), u.d FROM unnest($2::bytea[], $3::bytea[]) AS u(h, d)
		ON CONFLICT DO NOTHING`, runID, enc.blobHashes, enc.blobData)
	if err != nil {
		return nil, err
	}
	_, err = tx.Exec(ctx, `INSERT INTO checkpoints (run_id, step, parent_step, manifest, part_hashes, size, created_at)
		VALUES ($1, $6, -1, $2, $3, $4, coalesce($5::timestamptz, now()))`, runID, enc.manifest, enc.partHashes, enc.size, now, step)
	return enc, err
}

// ResponseGet returns a response by ID.
func (s *Store) ResponseGet(ctx context.Context, id string) (*store.Response, error) {
	return s.readResponse(ctx, "get response", responseColumns, id)
}

// readResponse reads response id by the columns cols (responseColumns or
// responseViewColumns), its snapshot resolved.
func (s *Store) readResponse(ctx context.Context, op, cols, id string) (*store.Response, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	r, err := scanResponse(s.pool.QueryRow(ctx, "SELECT "+cols+" FROM responses WHERE id = $1", id))
	if err == nil {
		err = s.readSnapshot(ctx, r)
	}
	return r, mapError(op+" "+id, "", 0, err)
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

// ResponseListByRun returns the responses of a run, oldest first.
func (s *Store) ResponseListByRun(ctx context.Context, runID string) ([]*store.Response, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, "SELECT "+responseColumns+" FROM responses WHERE run_id = $1 ORDER BY ord", runID)
	if err != nil {
		return nil, mapError("list responses of run "+runID, runID, 0, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Response, error) { return scanResponse(row) })
	for _, r := range out {
		if err != nil {
			break
		}
		err = s.readSnapshot(ctx, r)
	}
	return out, mapError("list responses of run "+runID, runID, 0, err)
}

// ResponseCancel records the cancel of a response that is not terminal:
// from then on it reads as cancelled (status cancelled, CompletedAt nil
// until its owner commits the cancelled event) and only a cancelled commit
// is accepted for it. The row lock orders it with the owner's commit: the
// one that comes second sees the other's result. A terminal response is
// returned as it is. Idempotent.
func (s *Store) ResponseCancel(ctx context.Context, id string) (*store.Response, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	var r *store.Response
	err := s.write(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		var err error
		// The run's row is share-locked first, in the order a commit
		// locks: a commit that leaves the response's row alone (nothing
		// it shows changed) is ordered with the cancel by it, and the
		// row records the run's last step (see responseColumns).
		r, err = scanResponse(conn.QueryRow(ctx, `WITH l AS (
				SELECT u.id AS lock_run, u.last_step AS lock_step FROM runs u JOIN responses r ON r.run_id = u.id
				WHERE r.id = $1 FOR SHARE OF u)
			UPDATE responses SET cancel_requested = true, status = 'cancelled', updated_at = now(), commit_step = l.lock_step
			FROM l WHERE id = $1 AND run_id = l.lock_run AND status NOT IN ('completed', 'failed', 'cancelled', 'incomplete')
			RETURNING `+storedResponseColumns, id))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return s.ResponseGet(ctx, id) // terminal already (or unknown: ErrNotFound)
	}
	if err == nil {
		err = s.readSnapshot(ctx, r)
	}
	if err != nil {
		return nil, mapError("cancel response "+id, "", 0, err)
	}
	s.sendNotice(store.Notice{Kind: store.NoticeCancel, RunID: r.RunID, ResponseID: r.ID})
	return r, nil
}
