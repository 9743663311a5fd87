package postgres

import (
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/store"
)

// runColumns are selected by every query that returns a run; scanRun reads
// them.
const runColumns = `id, model, head_response_id, last_step, lease_owner, lease_epoch,
	lease_expires_at, active, created_at, updated_at, resume_failures, resume_error, resume_not_before`

func scanRun(row pgx.Row) (*store.Run, error) {
	var r store.Run
	if err := row.Scan(runDest(&r)...); err != nil {
		return nil, err
	}
	normRun(&r)
	return &r, nil
}

// runDest are the scan destinations of runColumns in r; normRun finishes
// a run so scanned.
func runDest(r *store.Run) []any {
	return []any{&r.ID, &r.Model, &r.HeadResponseID, &r.LastStep, &r.Lease.Owner, &r.Lease.Epoch,
		&r.Lease.ExpiresAt, &r.Active, &r.CreatedAt, &r.UpdatedAt,
		&r.Resume.Failures, &r.Resume.Error, &r.Resume.NotBefore}
}

func normRun(r *store.Run) {
	r.Lease.ExpiresAt = r.Lease.ExpiresAt.UTC()
	if r.Resume.NotBefore.Unix() <= 0 {
		r.Resume.NotBefore = time.Time{} // 'epoch': none
	} else {
		r.Resume.NotBefore = r.Resume.NotBefore.UTC()
	}
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
}

// responseColumns are selected by every query that returns a response;
// scanResponse reads them. A commit that changes nothing a response shows
// leaves its row alone (migration 016), so an unfinished response's
// CommitStep is its run's last step (respCommitStep) and its UpdatedAt
// that of the run's last commit when the row is behind it (respUpdatedAt).
var responseColumns = strings.NewReplacer("commit_step", respCommitStep, "updated_at", respUpdatedAt).
	Replace(storedResponseColumns)

// responseViewColumns are responseColumns without the request and the
// recorded input (NULL), for ResponseView.
var responseViewColumns = strings.NewReplacer(" request,", " NULL::bytea,", " input,", " NULL::bytea,").Replace(responseColumns)

// storedResponseColumns are responseColumns as stored, exact in a row
// just written (RETURNING).
const storedResponseColumns = `id, run_id, previous_response_id, model, owner, status, request, snapshot,
	error, usage, next_seq, commit_step, start_step, publication, input, cancel_requested, created_at, updated_at,
	completed_at, trace_context`

// respCommitStep and respUpdatedAt are a response's CommitStep and
// UpdatedAt, in a query on the table responses (see responseColumns): the
// stored values, but for an unfinished response (completed_at NULL) whose
// run has committed since its row's last write (its commit_step is below
// the run's last_step): then its CommitStep is last_step and its
// UpdatedAt the time of that commit, the created_at of its checkpoint.
const (
	respCommitStep = `CASE WHEN responses.completed_at IS NULL
		THEN coalesce((SELECT u.last_step FROM runs u WHERE u.id = responses.run_id), responses.commit_step)
		ELSE responses.commit_step END`
	respUpdatedAt = `CASE WHEN responses.completed_at IS NULL
			AND responses.commit_step < (SELECT u.last_step FROM runs u WHERE u.id = responses.run_id)
		THEN coalesce((SELECT c.created_at FROM runs u JOIN checkpoints c ON c.run_id = u.id AND c.step = u.last_step
			WHERE u.id = responses.run_id), responses.updated_at)
		ELSE responses.updated_at END`
)

func scanResponse(row pgx.Row) (*store.Response, error) {
	var r store.Response
	var status string
	err := row.Scan(&r.ID, &r.RunID, &r.PreviousResponseID, &r.Model, &r.Owner, &status, &r.Request,
		&r.Snapshot, &r.Error, &r.Usage, &r.NextSeq, &r.CommitStep, &r.StartStep, &r.Publication, &r.Input,
		&r.CancelRequested, &r.CreatedAt,
		&r.UpdatedAt, &r.CompletedAt, &r.TraceContext)
	if err != nil {
		return nil, err
	}
	r.Status = store.Status(status)
	if !r.Status.Valid() {
		return nil, store.Corruptf("store/postgres: response %s has unknown status %q", r.ID, status)
	}
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	if r.CompletedAt != nil {
		t := r.CompletedAt.UTC()
		r.CompletedAt = &t
	}
	return &r, nil
}

// splitColumns splits a comma-separated column list.
func splitColumns(columns string) []string {
	cs := strings.Split(columns, ",")
	for i := range cs {
		cs[i] = strings.TrimSpace(cs[i])
	}
	return cs
}
