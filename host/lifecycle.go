package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/superstep/superstep/store"
)

func (h *Host) start(ctx context.Context) error {
	h.mu.Lock()
	if h.mu.closed {
		h.mu.Unlock()
		return ErrHostClosed
	}
	if h.mu.started {
		h.mu.Unlock()
		return errors.New("host: already started")
	}
	h.mu.started = true
	h.mu.Unlock()
	if err := h.claimAndResume(ctx, h.exclusive()); err != nil {
		return err
	}
	h.loopWG.Add(1)
	go func() {
		defer h.loopWG.Done()
		h.leaseLoop(h.loopCtx)
	}()
	if !h.exclusive() && h.cfg.CancelPollInterval > 0 {
		h.loopWG.Add(1)
		go func() {
			defer h.loopWG.Done()
			h.cancelWatchLoop(h.loopCtx)
		}()
	}
	return nil
}

// exclusive reports whether no other host uses the store.
func (h *Host) exclusive() bool {
	if ex, ok := h.store.(interface{ Exclusive() bool }); ok && ex.Exclusive() {
		return true
	}
	return h.cfg.ExclusiveStore
}

// isRunning reports whether the host was started and is not shutting down.
func (h *Host) isRunning() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.started && !h.mu.closed
}

// isDraining reports whether Shutdown asked runs to stop after their
// current superstep.
func (h *Host) isDraining() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.draining
}

func (h *Host) shutdown(ctx context.Context) error {
	h.mu.Lock()
	h.mu.closed, h.mu.draining = true, true
	h.mu.Unlock()
	allStopped := make(chan struct{})
	go func() {
		h.runWG.Wait()
		close(allStopped)
	}()
	var err error
	select {
	case <-allStopped:
	case <-ctx.Done():
		err = fmt.Errorf("host: shutdown: runs still working, interrupting them: %w", ctx.Err())
		h.hardStop()
		<-allStopped
	}
	h.stopLoop()
	h.loopWG.Wait()
	h.hardStop()
	return err
}

// leaseLoop renews the leases of the runs driven here every
// LeaseDuration/3 and, every ClaimInterval, claims runs whose lease expired
// (their host died) or that are unowned (queued, handed back); a kick (a
// slot freed under MaxRuns) claims at once.
func (h *Host) leaseLoop(ctx context.Context) {
	renew := time.NewTicker(h.cfg.LeaseDuration / 3)
	defer renew.Stop()
	claim := time.NewTicker(h.cfg.ClaimInterval)
	defer claim.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-renew.C:
			h.renewLeases(ctx)
			continue
		case <-claim.C:
		case <-h.kick:
		}
		if h.isDraining() {
			continue
		}
		if err := h.claimAndResume(ctx, false); err != nil && ctx.Err() == nil {
			h.log.Warn("host: claiming unowned runs failed", "err", err)
		}
	}
}

// cancelWatchLoop notices, every CancelPollInterval, cancels recorded
// through other hosts on the runs driven here, so that they stop promptly
// rather than at their next lease renewal.
func (h *Host) cancelWatchLoop(ctx context.Context) {
	t := time.NewTicker(h.cfg.CancelPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, r := range h.runsSnapshot() {
			h.checkRemoteCancel(ctx, r)
		}
	}
}

// runsSnapshot returns the runs driven here.
func (h *Host) runsSnapshot() []*run {
	h.mu.Lock()
	defer h.mu.Unlock()
	runs := make([]*run, 0, len(h.mu.runs))
	for _, r := range h.mu.runs {
		runs = append(runs, r)
	}
	return runs
}

// renewLeases renews every owned run's lease; a run whose lease is lost
// stops without committing anything more.
func (h *Host) renewLeases(ctx context.Context) {
	for _, r := range h.runsSnapshot() {
		err := h.renewLease(ctx, r)
		switch {
		case errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrNotFound):
			h.fence(r, err)
		case err != nil:
			h.metrics.failed(opLeaseRenew)
			h.log.Warn("host: lease renewal failed; retrying at the next renewal", "run_id", r.id, "err", err)
		default:
			h.checkRemoteCancel(ctx, r)
		}
	}
}

// renewLease renews r's lease, with the FaultLeaseRenew point before.
func (h *Host) renewLease(ctx context.Context, r *run) error {
	if err := h.fault(ctx, &Fault{Point: FaultLeaseRenew, RunID: r.id, ResponseID: r.responseID()}); err != nil {
		return err
	}
	_, err := h.store.LeaseRenew(ctx, &store.LeaseParams{RunID: r.id, Owner: h.cfg.HostID,
		Epoch: r.epoch, Duration: h.cfg.LeaseDuration})
	return err
}

// fence stops r: another owner took its lease (or the run is gone).
func (h *Host) fence(r *run, cause error) {
	r.mu.Lock()
	finished := r.finished
	r.fenced = r.fenced || !finished
	r.mu.Unlock()
	if finished {
		return // its response is final; the goroutine is on its way out
	}
	r.cancel(fmt.Errorf("%w: %w", errLeaseLost, cause))
}

// checkRemoteCancel notices a cancel recorded by another host.
func (h *Host) checkRemoteCancel(ctx context.Context, r *run) {
	r.mu.Lock()
	skip := r.cancelled || r.finished
	r.mu.Unlock()
	if skip {
		return
	}
	resp, err := h.store.ResponseGet(ctx, r.responseID())
	if err == nil && resp.CancelRequested && r.requestCancel() {
		h.metrics.cancelsSeen.Inc()
		h.log.Info("host: cancel recorded through another host", "run_id", r.id, "response_id", r.responseID())
	}
}
