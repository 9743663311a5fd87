package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/superstep/superstep/responses/wire"
	"github.com/superstep/superstep/store"
)

// claimAllHorizon is how far ahead of the clock a claim of every run
// looks: any lease a dead process of an exclusive store left behind
// expires before it.
const claimAllHorizon = 7 * 24 * time.Hour

// claimAndResume claims every run that needs a host (unowned or lease
// expired; with all, every unfinished run) and resumes each from its own
// last commit. It fails only when the claim itself fails: a run that cannot
// be resumed is logged, counted and released, so the next claim (here or on
// another host) tries again.
func (h *Host) claimAndResume(ctx context.Context, all bool) error {
	free, capped := h.freeSlots()
	if capped && free == 0 {
		return nil // at Config.MaxRuns
	}
	p := &store.LeaseClaimParams{Owner: h.cfg.HostID, Duration: h.cfg.LeaseDuration}
	if all {
		// Leases renewed from now on expire on the real clock again.
		p.Now = time.Now().Add(claimAllHorizon)
	} else if capped {
		p.Limit = free
	}
	runs, err := h.store.LeaseClaim(ctx, p)
	if err != nil {
		h.metrics.failed(opRecover)
		return fmt.Errorf("host: claim runs: %w", err)
	}
	// Slots are reserved only now, so a Create meanwhile had priority.
	slots, _ := h.reserve(len(runs))
	defer h.unreserve(slots)
	for i, sr := range runs {
		if capped && i >= slots {
			// Claimed with every other run of an exclusive store, beyond
			// the cap: unowned now, claimed as soon as a slot frees.
			h.releaseClaim(ctx, sr)
			continue
		}
		if err := h.resume(ctx, sr); err != nil {
			h.metrics.failed(opRecover)
			h.log.Error("host: cannot resume run; releasing it for a later attempt", "run_id", sr.ID, "err", err)
			h.releaseClaim(ctx, sr)
		}
	}
	return nil
}

// releaseClaim gives back a claimed run this host cannot drive.
func (h *Host) releaseClaim(ctx context.Context, sr *store.Run) {
	err := h.store.LeaseRelease(ctx, &store.LeaseParams{RunID: sr.ID, Owner: h.cfg.HostID, Epoch: sr.Lease.Epoch})
	if err != nil && !errors.Is(err, store.ErrFenced) && !errors.Is(err, store.ErrNotFound) {
		h.metrics.failed(opLeaseRelease)
		h.log.Warn("host: lease release failed", "run_id", sr.ID, "err", err)
	}
}

// resume restarts a claimed run from the checkpoint of its last commit,
// found through the run record. Answers of the head response that no commit
// absorbed yet are delivered again; a recorded cancel is committed at once.
func (h *Host) resume(ctx context.Context, sr *store.Run) error {
	if r := h.lookupRun(sr.ID, sr.HeadResponseID); r != nil {
		// A stale driver of ours (its lease expired): it is fenced now.
		h.fence(r, store.ErrFenced)
		<-r.done // a finished run exits on its own
	}
	m, err := h.lookupModel(sr.Model)
	if err != nil {
		return fmt.Errorf("host: run %s: %w", sr.ID, err)
	}
	head, err := h.store.ResponseGet(ctx, sr.HeadResponseID)
	if err != nil {
		return fmt.Errorf("host: head response of run %s: %w", sr.ID, err)
	}
	var snap wire.Response
	if err := json.Unmarshal(head.Snapshot, &snap); err != nil {
		return fmt.Errorf("host: snapshot of response %s: %w", head.ID, err)
	}
	cp, err := h.store.CheckpointGetLast(ctx, sr.ID)
	if err != nil {
		return fmt.Errorf("host: last checkpoint of run %s: %w", sr.ID, err)
	}
	r := h.newRun(m, head, &snap, sr.ID, sr.Lease, cp.Step, cp.Parts)
	drive, err := h.resumeDriver(ctx, r, m, head, cp)
	if err != nil {
		return err
	}
	if err := h.resetUncommitted(ctx, r); err != nil {
		return err
	}
	h.metrics.recovered.Inc()
	h.log.Info("host: resuming run", "run_id", sr.ID, "response_id", head.ID, "step", cp.Step, "epoch", sr.Lease.Epoch)
	if head.CancelRequested {
		r.cancelled = true
		drive = func(context.Context) error { return errRunCancelled }
	}
	return h.startRun(r, drive)
}

// resumeDriver returns the function that continues r from checkpoint cp.
func (h *Host) resumeDriver(ctx context.Context, r *run, m *model, head *store.Response, cp *store.Checkpoint) (func(context.Context) error, error) {
	if m.wf == nil {
		return h.resumeAgentTurn(r, m, head, cp)
	}
	wr, err := m.wf.Restore(r.id, toWorkflowParts(cp.Parts))
	if err != nil {
		return nil, fmt.Errorf("host: restore run %s at step %d: %w", r.id, cp.Step, err)
	}
	// The head's answers are absorbed by its first commit (step
	// StartStep+1): deliver them again only when the run has not committed
	// since the response was created. After that, a pending request with an
	// answered id is a new question (a workflow may ask again with the same
	// id), never one the stored answer was meant for.
	if head.PreviousResponseID != "" && cp.Step == head.StartStep {
		if err := h.applyAnswers(ctx, r.id, wr, storedInput(head.Request)); err != nil {
			return nil, fmt.Errorf("host: re-deliver answers of response %s: %w", head.ID, err)
		}
	}
	return h.driveWorkflow(r, wr), nil
}
