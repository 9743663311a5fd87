package store

import (
	"context"
	"time"
)

// ForkPoint names the run and step a forked run started from: the
// checkpoint of Step of run RunID.
type ForkPoint struct {
	RunID string
	Step  int64
}

// RunInfo is a run as inspection tools show it: the run with what its head
// response says of it and where it came from.
type RunInfo struct {
	Run
	// Owner is the owner of the run's responses (its head's).
	Owner string
	// HeadStatus is the status of the head response.
	HeadStatus Status
	// ForkedFrom is where a fork started (ResponseCreateParams.ForkedFrom);
	// nil for a run that is not a fork.
	ForkedFrom *ForkPoint
}

// RunQueryParams are the arguments of RunQuery. Zero fields do not filter.
type RunQueryParams struct {
	// Owner lists only the runs whose head response has this owner. It
	// always filters: "" is the owner of responses made with auth off.
	Owner string
	// AnyOwner lists every owner's runs (Owner is ignored).
	AnyOwner bool
	Model    string
	// Status lists only runs whose head response has this status.
	Status Status
	// Active, when not nil, lists only runs whose Active equals it.
	Active *bool
	// LeaseOwner lists only runs whose lease this host holds.
	LeaseOwner string
	// CreatedAfter and CreatedBefore bound CreatedAt (exclusive).
	CreatedAfter  time.Time
	CreatedBefore time.Time
	// After is a cursor: the page starts after this run in the order
	// (ErrNotFound when no such run exists).
	After string
	// Desc orders newest first; the order is (CreatedAt, ID).
	Desc bool
	// Limit caps the runs returned; <= 0 means 100.
	Limit int
}

// RunInspector is implemented by stores that can list runs for inspection
// (GET /v1/runs) with filters and paging in creation order, and read the
// facts a run's list entry shows. Both backends implement it. It is
// optional: callers find it with a type assertion.
type RunInspector interface {
	// RunQuery returns the runs matching p in creation order (see
	// RunQueryParams.Desc), at most p.Limit of them.
	RunQuery(ctx context.Context, p *RunQueryParams) ([]*RunInfo, error)
	// RunInfo returns one run with its head's owner and status and its
	// lineage (ErrNotFound).
	RunInfo(ctx context.Context, id string) (*RunInfo, error)
	// RunClaims returns the claims of the run's lease, oldest first
	// (none for an unknown run): every ResponseCreate with a LeaseOwner
	// and every LeaseClaim of it records one in its transaction.
	RunClaims(ctx context.Context, runID string) ([]LeaseClaimRecord, error)
}

// LeaseClaimRecord is one claim of a run's lease. The commits made under
// Epoch are of steps after LastStep (and before the next claim's
// LastStep+1): commits are fenced by epoch.
type LeaseClaimRecord struct {
	Epoch int64
	Owner string
	// LastStep is the run's LastStep when it was claimed.
	LastStep  int64
	ClaimedAt time.Time
}
