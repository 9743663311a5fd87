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
	err := row.Scan(&r.ID, &r.Model, &r.HeadResponseID, &r.LastStep, &r.Lease.Owner, &r.Lease.Epoch,
		&r.Lease.ExpiresAt, &r.Active, &r.CreatedAt, &r.UpdatedAt,
		&r.Resume.Failures, &r.Resume.Error, &r.Resume.NotBefore)
	if err != nil {
		return nil, err
	}
	r.Lease.ExpiresAt = r.Lease.ExpiresAt.UTC()
	if r.Resume.NotBefore.Unix() <= 0 {
		r.Resume.NotBefore = time.Time{} // 'epoch': none
	} else {
		r.Resume.NotBefore = r.Resume.NotBefore.UTC()
	}
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return &r, nil
}

// responseColumns are selected by every query that returns a response;
// scanResponse reads them.
const responseColumns = `id, run_id, previous_response_id, model, owner, status, request, snapshot,
	error, usage, next_seq, commit_step, start_step, publication, input, cancel_requested, created_at, updated_at,
	completed_at, trace_context`

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
