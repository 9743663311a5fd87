package store

import (
	"errors"
	"fmt"
)

// Sentinel errors. Backends wrap them (with %w) so callers branch with
// errors.Is.
var (
	// ErrNotFound is returned when a response, run or checkpoint does not
	// exist.
	ErrNotFound = errors.New("store: not found")
	// ErrFenced is returned when a write names a lease epoch that is no
	// longer the run's current one, or a lease that expired: another host
	// owns the run now.
	ErrFenced = errors.New("store: fenced")
	// ErrConflict is returned when a write does not fit the current state:
	// a duplicate ID, a step that is not the next one, events whose
	// sequence numbers do not continue the log, or a continuation of a run
	// that is not at the named response.
	ErrConflict = errors.New("store: conflict")
	// ErrCorrupt marks data that cannot be read back as written.
	ErrCorrupt = errors.New("store: corrupt")
	// ErrClosed is returned by calls made after Close.
	ErrClosed = errors.New("store: closed")
	// ErrCancelled is returned by Commit (and EventAppend) for a response
	// whose cancel is recorded, unless the commit finishes it as
	// cancelled: the owner must finish it with StatusCancelled.
	ErrCancelled = errors.New("store: response cancelled")
	// ErrUnavailable marks a transient failure: the store could not be
	// reached or could not do the work now (connection lost, timeout,
	// serialization failure, disk full, database locked). Nothing of the
	// call is visible, or (for a write whose reply was lost) it may be;
	// the caller retries later. Every other backend failure is
	// deterministic.
	ErrUnavailable = errors.New("store: unavailable")
)

// FencedError carries the epochs of a fenced write. It matches ErrFenced.
type FencedError struct {
	RunID        string
	Epoch        int64 // the epoch the write was made under
	CurrentEpoch int64 // the run's epoch now
}

func (e *FencedError) Error() string {
	if e.Epoch == e.CurrentEpoch {
		// Nobody claimed the run since: the writer's own lease ran out.
		return fmt.Sprintf("store: fenced: run %s: lease expired (or released) at epoch %d", e.RunID, e.Epoch)
	}
	return fmt.Sprintf("store: fenced: run %s written at epoch %d, current epoch %d (claimed since)", e.RunID, e.Epoch, e.CurrentEpoch)
}

// Is reports whether target is ErrFenced.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// Corruptf returns an error that matches ErrCorrupt.
func Corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}
