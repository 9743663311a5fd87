package host

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/superstep/superstep/responses/wire"
	"github.com/superstep/superstep/store"
)

func (h *Host) cancel(ctx context.Context, id, owner string) (*store.Response, error) {
	resp, err := h.get(ctx, id, owner)
	if err != nil {
		return nil, err
	}
	if resp.Status.Terminal() {
		return resp, nil
	}
	if _, err := h.store.ResponseCancel(ctx, id); err != nil {
		return nil, fmt.Errorf("host: cancel response %s: %w", id, err)
	}
	if r := h.lookupRun(resp.RunID, id); r != nil {
		// After this no superstep of the run commits: the driver commits
		// the cancelled terminal event at its next boundary.
		r.requestCancel()
	} else if h.isRunning() {
		// No driver here. If the run has none at all (handed back, or its
		// host died and the lease expired), claim it now: resuming a run
		// whose cancel is recorded commits the cancelled event at once. A
		// run driven by another host is stopped by its owner on the store's
		// cancel notice (store.Notifier: milliseconds), or else at the
		// owner's next cancel watch or lease renewal.
		if err := h.claimAndResume(ctx, false); err != nil {
			h.log.Warn("host: cancel: claiming unowned runs failed", "response_id", id, "err", err)
		}
	}
	fresh, err := h.store.ResponseGet(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("host: cancel response %s: %w", id, err)
	}
	if fresh.Status.Terminal() {
		return fresh, nil // it finished before the cancel took hold
	}
	return cancelledView(fresh)
}

// cancelledView returns resp as it will read once its cancel is committed.
func cancelledView(resp *store.Response) (*store.Response, error) {
	var snap wire.Response
	if err := json.Unmarshal(resp.Snapshot, &snap); err != nil {
		return nil, fmt.Errorf("host: decode snapshot of response %s: %w", resp.ID, err)
	}
	snap.Status = wire.StatusCancelled
	data, err := json.Marshal(snap)
	if err != nil {
		return nil, fmt.Errorf("host: encode snapshot of response %s: %w", resp.ID, err)
	}
	c := *resp
	c.Status, c.Snapshot = store.StatusCancelled, data
	return &c, nil
}

func (h *Host) delete(ctx context.Context, id, owner string) error {
	resp, err := h.get(ctx, id, owner)
	if err != nil {
		return err
	}
	if r := h.lookupRun(resp.RunID, id); r != nil {
		r.requestCancel()
		select {
		case <-r.done:
		case <-ctx.Done():
			return fmt.Errorf("host: delete response %s: %w", id, ctx.Err())
		}
	}
	if err := h.store.ResponseDelete(ctx, id); err != nil {
		return fmt.Errorf("host: delete response %s: %w", id, err)
	}
	return nil
}
