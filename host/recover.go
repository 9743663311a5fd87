package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
)

// claimAllHorizon is how far ahead of the clock a claim of every run
// looks: any lease a dead process of an exclusive store left behind
// expires before it.
const claimAllHorizon = 7 * 24 * time.Hour

// claimAndResume claims every run that needs a host (unowned or lease
// expired; with all, every unfinished run) and resumes each from its own
// last commit. It fails only when the claim itself fails: a run that cannot
// be resumed is logged, counted and released with a back-off (see
// releaseFailed), so that no host claims it in a loop. ctx must be the
// host's, not a request's: a claimed run's resume and release use it.
func (h *Host) claimAndResume(ctx context.Context, all bool) error {
	defer h.test.claimed.Signal(struct{}{})
	free, capped := h.freeSlots()
	if capped && free == 0 {
		return nil // at Config.MaxRuns
	}
	p := &store.LeaseClaimParams{Owner: h.cfg.HostID, Duration: h.cfg.LeaseDuration}
	if all {
		// Leases renewed from now on expire on the real clock again.
		p.Now = h.now().Add(claimAllHorizon)
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
			h.releaseFailed(ctx, sr, err)
		}
	}
	return nil
}

// releaseClaim gives back a claimed run this host cannot drive now.
func (h *Host) releaseClaim(ctx context.Context, sr *store.Run) {
	h.release(ctx, &store.LeaseParams{RunID: sr.ID, Owner: h.cfg.HostID, Epoch: sr.Lease.Epoch})
}

// releaseFailed gives back a claimed run that could not be resumed here,
// recording the failure in the store (Run.Resume): the release announces
// nothing, and no host claims the run before the back-off ends, which
// doubles with each consecutive failure (resumeBackoff). One log line and
// one count per back-off.
func (h *Host) releaseFailed(ctx context.Context, sr *store.Run, err error) {
	backoff := h.resumeBackoff(sr.Resume.Failures)
	h.metrics.failed(opRecover)
	h.metrics.resumeBackoffs.Inc()
	h.log.Error("host: cannot resume run; released, and no host claims it before the back-off ends",
		"run_id", sr.ID, "model", sr.Model, "failures", sr.Resume.Failures+1, "retry_after", backoff, "err", err)
	h.release(ctx, &store.LeaseParams{RunID: sr.ID, Owner: h.cfg.HostID, Epoch: sr.Lease.Epoch,
		Failure: &store.ResumeFailure{Reason: err.Error(), RetryAfter: backoff}})
}

// release makes a LeaseRelease bounded by the renewal timeout.
func (h *Host) release(ctx context.Context, p *store.LeaseParams) {
	ctx, cancel := context.WithTimeout(ctx, h.renewTimeout())
	defer cancel()
	err := h.store.LeaseRelease(ctx, p)
	if err != nil && !errors.Is(err, store.ErrFenced) && !errors.Is(err, store.ErrNotFound) {
		h.metrics.failed(opLeaseRelease)
		h.log.Warn("host: lease release failed", "run_id", p.RunID, "err", err)
	}
}

// resumeBackoff is how long a run is left alone after its failures+1-th
// consecutive failed resume: Config.ResumeBackoff doubled per earlier
// failure, at most Config.ResumeBackoffMax.
func (h *Host) resumeBackoff(failures int) time.Duration {
	d := h.cfg.ResumeBackoff
	for range min(failures, 40) {
		if d >= h.cfg.ResumeBackoffMax {
			break
		}
		d *= 2
	}
	return min(d, h.cfg.ResumeBackoffMax)
}

// resume restarts a claimed run from the checkpoint of its last commit,
// found through the run record. When a driver of the run is still
// registered here (its lease expired during a stall and this host claimed
// the run again, or it is finishing the previous response), that driver is
// stopped and waited for on a goroutine of its own, so that the claim loop
// goes on: the store already refuses its writes.
func (h *Host) resume(ctx context.Context, sr *store.Run) error {
	old := h.registeredRun(sr.ID)
	if old == nil {
		return h.resumeNow(ctx, sr)
	}
	h.loopWG.Go(func() {
		if old.responseID() == sr.HeadResponseID {
			h.fence(old, fmt.Errorf("%w: run %s claimed again at epoch %d", store.ErrFenced, sr.ID, sr.Lease.Epoch))
		}
		<-old.done // a finished or fenced run exits on its own
		if err := h.resumeNow(h.loopCtx, sr); err != nil {
			h.releaseFailed(h.loopCtx, sr, err)
		}
	})
	return nil
}

// registeredRun returns the run driven here under runID, whatever its head.
func (h *Host) registeredRun(runID string) *run {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.runs[runID]
}

// resumeNow is resume once no driver of the run is left here. Answers of
// the head response that no commit absorbed yet are delivered again; a
// recorded cancel is committed at once.
func (h *Host) resumeNow(ctx context.Context, sr *store.Run) error {
	m, err := h.lookupModel(sr.Model)
	if err != nil {
		return fmt.Errorf("host: run %s: %w", sr.ID, err)
	}
	head, err := h.store.ResponseGet(ctx, sr.HeadResponseID)
	if err != nil {
		return fmt.Errorf("host: head response of run %s: %w", sr.ID, err)
	}
	var snap protocol.Response
	if err := json.Unmarshal(head.Snapshot, &snap); err != nil {
		return fmt.Errorf("host: snapshot of response %s: %w", head.ID, err)
	}
	cp, err := h.store.CheckpointGetLast(ctx, sr.ID)
	if err != nil {
		return fmt.Errorf("host: last checkpoint of run %s: %w", sr.ID, err)
	}
	r := h.newRun(m, head, &snap, sr.ID, sr.Lease, cp.Step, cp.Parts)
	r.journal.recovered()
	if m.params != nil {
		// The settings the request was accepted with, read again from it.
		if r.info.Params, err = modelParams(m, head.Request); err != nil {
			return fmt.Errorf("host: model settings of response %s: %w", head.ID, err)
		}
	}
	drive, err := h.resumeDriver(ctx, r, m, head, cp)
	if err != nil {
		return err
	}
	if err := h.loadReplay(ctx, r); err != nil {
		return err
	}
	if err := h.freshenLease(ctx, r); err != nil {
		return err
	}
	h.metrics.recovered.Inc()
	h.log.Info("host: resuming run", "run_id", sr.ID, "response_id", head.ID, "step", cp.Step, "epoch", sr.Lease.Epoch)
	if head.CancelRequested {
		r.cancelled.Store(true)
		drive = func(context.Context) error { return errRunCancelled }
	}
	h.startResumedSpan(r, head, cp.Step)
	return h.startRun(r, drive)
}

// freshenLease renews r's lease before its driver starts when less than
// 3/4 of it is left. A run claimed in a batch waits for the resumes before
// it, and the renewal loop knows a run only once it starts: started with
// less, the lease guard (which stops a run at 1/4 left) could fire before
// the loop's first renewal (up to 1/3 later), stopping the run in the
// middle of a superstep that would then run twice with nothing crashed.
func (h *Host) freshenLease(ctx context.Context, r *run) error {
	if h.clock.toLocal(r.leaseExpires).Sub(h.now()) >= h.cfg.LeaseDuration*3/4 {
		return nil
	}
	expires, err := h.renewLease(ctx, r)
	if err != nil {
		return fmt.Errorf("host: renew the lease of run %s before resuming it: %w", r.id, err)
	}
	r.leaseExpires = expires
	return nil
}

// resumeDriver returns the function that continues r from checkpoint cp.
func (h *Host) resumeDriver(ctx context.Context, r *run, m *model, head *store.Response, cp *store.Checkpoint) (func(context.Context) error, error) {
	wparts, err := toWorkflowParts(cp.Parts)
	if err != nil {
		return nil, fmt.Errorf("host: run %s at step %d: %w", r.id, cp.Step, err)
	}
	wr, err := m.wf.Restore(r.id, wparts)
	if err != nil {
		return nil, fmt.Errorf("host: restore run %s at step %d: %w", r.id, cp.Step, err)
	}
	// The head's answers are absorbed by its first commit (step
	// StartStep+1): deliver them again only when the run has not committed
	// since the response was created. After that, a pending request with an
	// answered id is a new question (a workflow may ask again with the same
	// id), never one the stored answer was meant for.
	if head.PreviousResponseID != "" && cp.Step == head.StartStep {
		in, err := storedInput(head)
		if err != nil {
			return nil, fmt.Errorf("host: answers of response %s: %w", head.ID, err)
		}
		if err := h.deliverInput(ctx, m, head.PreviousResponseID, r.id, wr, in); err != nil {
			return nil, fmt.Errorf("host: re-deliver the input of response %s: %w", head.ID, err)
		}
	}
	return h.driveWorkflow(r, wr), nil
}
