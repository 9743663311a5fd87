package host

import (
	"context"
	"fmt"

	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
)

// cancel records the cancel in the store, which decides: a response not
// terminal yet reads as cancelled from then on and its owner, wherever it
// runs, can only finish it as cancelled; one that finished first stays as
// it is. The reply is the store's answer, so it and every later read agree.
func (h *Host) cancel(ctx context.Context, id, owner string) (*store.Response, error) {
	resp, err := h.get(ctx, id, owner)
	if err != nil {
		return nil, err
	}
	if resp.Status.Terminal() {
		return resp, nil // finished, or its cancel already recorded
	}
	got, err := h.store.ResponseCancel(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("host: cancel response %s: %w", id, err)
	}
	if got.CancelRequested && !got.Finished() {
		h.stopCancelled(got)
	}
	return rendered(got)
}

// stopCancelled stops the run of resp, whose cancel is recorded: at once
// when it is driven here; when nobody drives it (handed back, or its host
// died and the lease expired), the claim loop claims it now, on the host's
// context, not the request's, and its resume commits the cancelled event.
// A run driven by another host is stopped by its owner on the store's
// cancel notice (store.Notifier: milliseconds), at its cancel watch, or at
// its next commit, which the store refuses.
func (h *Host) stopCancelled(resp *store.Response) {
	if r := h.lookupRun(resp.RunID, resp.ID); r != nil {
		r.requestCancel()
	} else if h.isRunning() && !h.isDraining() {
		h.kickClaim()
	}
}

// rendered returns resp as clients see it: while a recorded cancel waits
// for its owner's cancelled commit, the record says cancelled but the
// snapshot (opaque to the store, written by commits) does not yet, so the
// status is rendered into it from the record.
func rendered(resp *store.Response) (*store.Response, error) {
	if !resp.CancelRequested || resp.Finished() {
		return resp, nil
	}
	return cancelledView(resp)
}

// cancelledView returns resp as it will read once its cancel is committed.
func cancelledView(resp *store.Response) (*store.Response, error) {
	data, err := protocol.CancelledSnapshot(resp.Snapshot)
	if err != nil {
		return nil, fmt.Errorf("host: response %s: %w", resp.ID, err)
	}
	c := *resp
	c.Status, c.Snapshot = store.StatusCancelled, data
	return &c, nil
}

// delete cancels a response that has not finished, wherever its run is
// driven, before deleting it: the owner's next write is refused (cancelled,
// then not found once the response is gone) and it stops quietly. A run
// driven here is waited for, so that it does not write after the delete.
func (h *Host) delete(ctx context.Context, id, owner string) error {
	resp, err := h.get(ctx, id, owner)
	if err != nil {
		return err
	}
	if !resp.Finished() {
		if _, err := h.store.ResponseCancel(ctx, id); err != nil {
			return fmt.Errorf("host: delete response %s: cancel: %w", id, err)
		}
		if r := h.lookupRun(resp.RunID, id); r != nil {
			r.requestCancel()
			select {
			case <-r.done:
			case <-ctx.Done():
				return fmt.Errorf("host: delete response %s: %w", id, ctx.Err())
			}
		}
	}
	if err := h.store.ResponseDelete(ctx, id); err != nil {
		return fmt.Errorf("host: delete response %s: %w", id, err)
	}
	return nil
}
