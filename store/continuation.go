package store

import "fmt"

// ContinueError explains why ResponseCreate refused a continuation (a
// response naming PreviousResponseID). It matches ErrConflict, so callers
// that branch only on conflicts keep working, while the host can tell the
// client which case it hit.
type ContinueError struct {
	RunID              string
	PreviousResponseID string
	Reason             ContinueReason
}

// ContinueReason says why a continuation was refused.
type ContinueReason int

// Reasons for refusing a continuation.
const (
	// ContinueGone: the run or the previous response no longer exists
	// (deleted, pruned); a continuation never recreates a run.
	ContinueGone ContinueReason = iota + 1
	// ContinueNotHead: the previous response is not the run's head (a
	// later response continued it).
	ContinueNotHead
	// ContinueActive: the previous response is the head and still in
	// flight (the run is Active).
	ContinueActive
	// ContinueNotLastCommit: the previous response is the head but the
	// run's last commit is not its own (a later response that committed
	// was deleted): resuming would start from that deleted response's
	// state.
	ContinueNotLastCommit
)

// String returns the reason's name.
func (r ContinueReason) String() string {
	switch r {
	case ContinueGone:
		return "gone"
	case ContinueNotHead:
		return "not_head"
	case ContinueActive:
		return "active"
	case ContinueNotLastCommit:
		return "not_last_commit"
	}
	return "unknown"
}

func (e *ContinueError) Error() string {
	return fmt.Sprintf("store: conflict: cannot continue run %s from response %s: %s", e.RunID, e.PreviousResponseID, e.Reason.Why())
}

// Why says in words why a continuation was refused.
func (r ContinueReason) Why() string {
	switch r {
	case ContinueGone:
		return "the run or the previous response no longer exists"
	case ContinueNotHead:
		return "the previous response is not the latest response of its run"
	case ContinueActive:
		return "the previous response is still in progress"
	case ContinueNotLastCommit:
		return "the run's last commit is not the previous response's (a later response was deleted)"
	}
	return "refused"
}

// Is reports whether target is ErrConflict.
func (e *ContinueError) Is(target error) bool { return target == ErrConflict }
