package host

import (
	"context"
	"errors"
	"time"

	"github.com/superstep/superstep/store"
)

// commitWait waits d before commit's next attempt, with r.mu released so
// that whatever stops the run meanwhile can take it: the lease guard
// (which fences the run before its lease can expire, when the store could
// not be reached to renew it), a renewal that found the run fenced, a
// cancel (which does not stop a commit). It returns with r.mu held again,
// and with the reason when the commit must not be retried: the host's
// hard stop, or the run's lease lost or about to be.
//
// Releasing r.mu here is safe: commit changes r only once the store
// accepted p, the run's driver is blocked in the commit, and its live
// appends are done (awaitLive) or stopped (stopLive) before any commit.
func (h *Host) commitWait(r *run, d time.Duration) error {
	r.mu.Unlock()
	stop := func() error {
		t := time.NewTimer(d)
		defer t.Stop()
		runDone := r.ctx.Done()
		for {
			select {
			case <-t.C:
				return nil
			case <-h.runCtx.Done():
				return h.runCtx.Err()
			case <-runDone:
				if cause := context.Cause(r.ctx); errors.Is(cause, errLeaseLost) {
					return cause
				}
				runDone = nil // cancelled: the commit goes on
			}
		}
	}()
	r.mu.Lock()
	if stop == nil && r.fenced {
		stop = errLeaseLost
	}
	return stop
}

// storeUnavailable reports whether a read of the run fails as transient:
// commit's check of a conflict could not tell whether an earlier attempt
// committed.
func (h *Host) storeUnavailable(ctx context.Context, runID string) bool {
	_, err := h.store.RunGet(ctx, runID)
	return errors.Is(err, store.ErrUnavailable)
}
