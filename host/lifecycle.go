package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/superstep/superstep/internal/wait"
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
	// Subscribed before the first claim, so that a run queued meanwhile is
	// announced to this host; registered before it too, so that the host
	// is listed while it recovers runs.
	notifier, notified := h.store.(store.Notifier)
	notified = notified && !h.exclusive() // else everything comes through this host
	var notices <-chan store.Notice
	if notified {
		notices = notifier.Notices(h.loopCtx, noticeBuffer)
	}
	h.heartbeat(ctx)
	clock := &storeClock{}
	h.syncClock(ctx, clock) // before the first claim, whose expiries the guard maps
	h.clock = clock
	if err := h.claimAndResume(ctx, h.exclusive()); err != nil {
		return err
	}
	h.startRetention()
	leases := newLeaseTracker(clock)
	h.loopWG.Add(3)
	go func() {
		defer h.loopWG.Done()
		h.renewLoop(h.loopCtx, leases)
	}()
	go func() {
		defer h.loopWG.Done()
		h.claimLoop(h.loopCtx)
	}()
	go func() {
		defer h.loopWG.Done()
		h.leaseGuardLoop(h.loopCtx, leases)
	}()
	if h.exclusive() {
		return nil // every cancel and every run comes through this host
	}
	if notified {
		h.loopWG.Add(1)
		go func() {
			defer h.loopWG.Done()
			h.noticeLoop(h.loopCtx, notices)
		}()
	}
	if poll := h.cancelPollInterval(notified); poll > 0 {
		h.loopWG.Add(1)
		go func() {
			defer h.loopWG.Done()
			h.cancelWatchLoop(h.loopCtx, poll)
		}()
	}
	return nil
}

// cancelPollInterval is the period of the cancel watch: Config's, or with
// a store that announces cancels (notified) at least LeaseDuration/3, the
// watch being only the fallback for a lost notice. 0 means no watch.
func (h *Host) cancelPollInterval(notified bool) time.Duration {
	poll := h.cfg.CancelPollInterval
	if poll <= 0 {
		return 0
	}
	if notified {
		poll = max(poll, h.cfg.LeaseDuration/3)
	}
	return poll
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
	h.unregister(ctx)
	return err
}

// renewLoop renews the leases of the runs driven here, the host's registry
// entry and its reading of the store's clock (syncClock) every
// LeaseDuration/3 (a failed renewal is retried after
// LeaseDuration/12, so that a short outage does not cost the runs). It
// never waits on a run: it reads only what never changes in a run (id,
// epoch), takes no run's lock, and stops a fenced run on a goroutine of its
// own; claims and resumes are the claim loop's. Each store call is bounded
// by renewTimeout, so one hung call cannot outlast the lease.
func (h *Host) renewLoop(ctx context.Context, leases *leaseTracker) {
	renew := time.NewTicker(h.cfg.LeaseDuration / 3)
	defer renew.Stop()
	retry := time.NewTimer(time.Hour) // armed only after a failed renewal
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-renew.C:
			if !h.renewLeases(ctx, leases) {
				retry.Reset(h.cfg.LeaseDuration / 12)
			}
			hctx, cancel := context.WithTimeout(ctx, h.renewTimeout())
			h.heartbeat(hctx)
			cancel()
			h.syncClock(ctx, leases.clock)
		case <-retry.C:
			if !h.renewLeases(ctx, leases) {
				retry.Reset(h.cfg.LeaseDuration / 12)
			}
		}
	}
}

// renewTimeout bounds one lease renewal: below a quarter of the lease, so
// that a renewal that hangs still leaves time to retry (every
// LeaseDuration/12) before the lease guard stops the run at 3/4.
func (h *Host) renewTimeout() time.Duration { return h.cfg.LeaseDuration / 5 }

// claimLoop claims, every ClaimInterval, runs whose lease expired (their
// host died) or that are unowned (queued, handed back); a kick (a slot
// freed under MaxRuns, a notice of a ready run, a cancel of a run nobody
// drives) claims at once. It runs apart from the renewals, which a large
// takeover or a resume waiting for a stale driver must not delay.
func (h *Host) claimLoop(ctx context.Context) {
	claim := time.NewTicker(h.cfg.ClaimInterval)
	defer claim.Stop()
	for {
		select {
		case <-ctx.Done():
			return
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

// cancelWatchLoop notices, every poll, cancels recorded through other
// hosts on the runs driven here, so that they stop promptly rather than at
// their next lease renewal (with a store.Notifier it is the fallback for a
// lost notice).
func (h *Host) cancelWatchLoop(ctx context.Context, poll time.Duration) {
	t := time.NewTicker(poll)
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

// noticeBuffer is how many notices may wait for the notice loop; beyond
// it the store drops them and sends NoticeResync, which re-checks all.
const noticeBuffer = 256

// noticeLoop acts on the store's notices until their channel closes (the
// subscription's context ended, or the store closed): a cancel of a run
// driven here stops it (after the durable flag is confirmed), a run that
// needs a host is claimed at once when there is room, and a resync (notices
// lost) does both for everything.
func (h *Host) noticeLoop(ctx context.Context, notices <-chan store.Notice) {
	for notice := range notices {
		switch notice.Kind {
		case store.NoticeCancel:
			if r := h.lookupRun(notice.RunID, notice.ResponseID); r != nil {
				h.checkRemoteCancel(ctx, r)
			}
		case store.NoticeRunReady:
			if !h.isDraining() {
				h.kickClaim()
			}
		case store.NoticeResync:
			if !h.isDraining() {
				h.kickClaim()
			}
			for _, r := range h.runsSnapshot() {
				h.checkRemoteCancel(ctx, r)
			}
		}
	}
}

// runsSnapshot returns the runs driven here.
func (h *Host) runsSnapshot() []*run {
	h.mu.Lock()
	defer h.mu.Unlock()
	runs := make([]*run, 0, len(h.mu.runs))
	for _, r := range h.mu.runs {
		if !r.pending.Load() { // not in the store yet: no lease to renew, no cancel to read
			runs = append(runs, r)
		}
	}
	return runs
}

// renewLeases renews every owned run's lease (in batches of
// renewBatchMax through one store write each when the store is a
// store.LeaseBatchRenewer); a run whose lease is lost is stopped (on its
// own goroutine: stopping takes the run's lock, which a commit may hold)
// without committing anything more. It reports whether every renewal
// that was not fenced succeeded.
func (h *Host) renewLeases(ctx context.Context, leases *leaseTracker) bool {
	runs := h.runsSnapshot()
	br, batch := h.store.(store.LeaseBatchRenewer)
	if !batch {
		ok := true
		for _, r := range runs {
			expires, err := h.renewLease(ctx, r)
			ok = h.renewed(r, expires, err, leases) && ok
		}
		return ok || ctx.Err() != nil
	}
	ok := true
	for chunk := range slices.Chunk(runs, renewBatchMax) {
		refs := make([]store.LeaseRef, 0, len(chunk))
		asked := make([]*run, 0, len(chunk))
		for _, r := range chunk {
			if err := h.renewFault(ctx, r); err != nil {
				ok = h.renewed(r, time.Time{}, err, leases) && ok
				continue
			}
			refs = append(refs, store.LeaseRef{RunID: r.id, Epoch: r.epoch})
			asked = append(asked, r)
		}
		if len(refs) == 0 {
			continue
		}
		bctx, cancel := context.WithTimeout(ctx, h.renewTimeout())
		res, err := br.LeaseRenewBatch(bctx, &store.LeaseRenewBatchParams{Owner: h.cfg.HostID,
			Duration: h.cfg.LeaseDuration, Runs: refs})
		cancel()
		for i, r := range asked {
			if err != nil {
				ok = h.renewed(r, time.Time{}, err, leases) && ok
			} else {
				ok = h.renewed(r, res[i].ExpiresAt, res[i].Err, leases) && ok
			}
		}
	}
	return ok || ctx.Err() != nil
}

// renewBatchMax is the most leases renewed by one store write.
const renewBatchMax = 1000

// renewed acts on the outcome of r's renewal: records the new expiry,
// stops r when its lease is lost, or counts and logs a failure (false).
func (h *Host) renewed(r *run, expires time.Time, err error, leases *leaseTracker) bool {
	switch {
	case errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrNotFound):
		h.fenceAsync(r, err)
	case err != nil:
		h.metrics.failed(opLeaseRenew)
		h.log.Warn("host: lease renewal failed; retrying", "run_id", r.id, "err", err)
		return false
	default:
		leases.renewed(r, expires)
	}
	return true
}

// renewFault is the FaultLeaseRenew point of r's renewal, within
// renewTimeout.
func (h *Host) renewFault(ctx context.Context, r *run) error {
	ctx, cancel := context.WithTimeout(ctx, h.renewTimeout())
	defer cancel()
	return h.fault(ctx, &Fault{Point: FaultLeaseRenew, RunID: r.id, ResponseID: r.responseID()})
}

// renewLease renews r's lease within renewTimeout, with the
// FaultLeaseRenew point before. It reads only r's immutable fields.
func (h *Host) renewLease(ctx context.Context, r *run) (expires time.Time, err error) {
	if err := h.renewFault(ctx, r); err != nil {
		return time.Time{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, h.renewTimeout())
	defer cancel()
	return h.store.LeaseRenew(ctx, &store.LeaseParams{RunID: r.id, Owner: h.cfg.HostID,
		Epoch: r.epoch, Duration: h.cfg.LeaseDuration})
}

// fenceAsync stops r on a goroutine of its own, once, so that the caller
// (the renewal loop) does not wait for r's lock.
func (h *Host) fenceAsync(r *run, cause error) {
	if !r.fencing.CompareAndSwap(false, true) {
		return
	}
	h.loopWG.Go(func() { h.fence(r, cause) })
}

// fence stops r: its lease was lost (or the run is gone).
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

// checkRemoteCancel notices a cancel recorded by another host and stops
// r, once, without r's lock (a commit may hold it).
func (h *Host) checkRemoteCancel(ctx context.Context, r *run) {
	if r.cancelled.Load() {
		return
	}
	requested, err := h.cancelRequested(ctx, r.responseID())
	if err != nil || !requested || !r.cancelled.CompareAndSwap(false, true) {
		return
	}
	h.metrics.cancelsSeen.Inc()
	h.log.Info("host: cancel recorded through another host", "run_id", r.id, "response_id", r.responseID())
	r.cancel(errRunCancelled)
}

// cancelRequested reports whether the cancel of response id is recorded:
// from that column alone when the store can (store.ResponseCancelReader),
// not the whole row with its request and snapshot, every poll.
func (h *Host) cancelRequested(ctx context.Context, id string) (bool, error) {
	if cr, ok := h.store.(store.ResponseCancelReader); ok {
		return cr.ResponseCancelRequested(ctx, id)
	}
	resp, err := h.store.ResponseGet(ctx, id)
	if err != nil {
		return false, err
	}
	return resp.CancelRequested, nil
}

// leaseEnded logs and counts why r stopped fenced, from the run as the
// store has it now: another owner claimed it (a lost lease), this host
// claimed it again after a stall (it resumes here), or nobody has it yet
// (the lease expired, or the guard stopped the run before it could).
//
// When the store cannot be read (a host continued after a pause finds its
// connections busy, or the store is slow), the reason is not known yet:
// it is asked again, off the run's goroutine (r.mu is held, and a resume
// of the run here waits for the goroutine to exit), until the store
// answers, and only then counted. Counting it as expired at once said
// "nobody else has it" of runs another host had taken over.
func (h *Host) leaseEnded(r *run, err error, log *slog.Logger) {
	h.test.leaseLost.Signal(r.id)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), h.renewTimeout())
	defer cancel()
	sr, gerr := h.store.RunGet(ctx, r.id)
	if storeAnswered(gerr) {
		h.classifyLeaseEnd(r.epoch, err, log, sr, gerr)
		return
	}
	log.Info("host: run stopped: its lease ended; the store could not be read to tell why, asking again",
		"epoch", r.epoch, "err", err, "run_err", gerr)
	id, epoch := r.id, r.epoch // not r: the goroutine may outlive the run by long
	h.loopWG.Go(func() { h.leaseEndedLater(id, epoch, err, log, gerr) })
}

// storeAnswered reports whether a read of a run that returned err tells
// its state: read, or not found.
func storeAnswered(err error) bool { return err == nil || errors.Is(err, store.ErrNotFound) }

// leaseEndedLater reads run id from the store until it answers, backing
// off from LeaseDuration/12 up to LeaseDuration, and classifies why the
// run, driven here at epoch, stopped (classifyLeaseEnd). When the host
// stops first, the stop is counted as expired with the last error, so
// that every fenced stop is counted once.
func (h *Host) leaseEndedLater(id string, epoch int64, err error, log *slog.Logger, gerr error) {
	ctx := h.loopCtx
	backoff := max(h.cfg.LeaseDuration/12, time.Millisecond)
	var sr *store.Run
	for wait.Sleep(ctx, backoff) {
		rctx, cancel := context.WithTimeout(ctx, h.renewTimeout())
		sr, gerr = h.store.RunGet(rctx, id)
		cancel()
		if storeAnswered(gerr) {
			break
		}
		backoff = min(2*backoff, h.cfg.LeaseDuration)
	}
	h.classifyLeaseEnd(epoch, err, log, sr, gerr)
}

// classifyLeaseEnd logs and counts why a run driven here at epoch stopped
// fenced, from sr, the run as the store has it, or gerr, why it could not
// be read.
func (h *Host) classifyLeaseEnd(epoch int64, err error, log *slog.Logger, sr *store.Run, gerr error) {
	switch {
	case gerr != nil:
		h.metrics.leaseExpired.Inc()
		log.Warn("host: run stopped: its lease ended", "epoch", epoch, "err", err, "run_err", gerr)
	case sr.Lease.Owner == h.cfg.HostID && sr.Lease.Epoch != epoch:
		h.metrics.leaseExpired.Inc()
		log.Warn("host: lease expired while the run stalled; this host claimed the run again and resumes it from its last commit",
			"epoch", epoch, "new_epoch", sr.Lease.Epoch, "err", err)
	case sr.Lease.Epoch != epoch:
		// Claimed by another host since (it may have released the lease
		// again, finished or handed back).
		h.metrics.leaseLost.Inc()
		log.Warn("host: lease lost; another owner drives the run now", "owner", sr.Lease.Owner,
			"epoch", epoch, "owner_epoch", sr.Lease.Epoch, "err", err)
	default:
		h.metrics.leaseExpired.Inc()
		log.Warn("host: lease expired (or was not renewed in time); the run is left for the next claim, here or on another host",
			"epoch", epoch, "err", err)
	}
}

// leaseTracker remembers, for each run driven here, when its lease
// expires as the store last said: at its claim or creation
// (run.leaseExpires), then at each successful renewal. The lease loop
// writes it, the guard loop reads it; keeping it apart from the run's own
// lock means a run stuck in a commit cannot delay the guard. Expiries are
// on the store's clock; clock maps them onto this host's.
type leaseTracker struct {
	clock   *storeClock
	mu      sync.Mutex
	expires map[*run]time.Time
	// stopping are the runs the guard is stopping (not stopped twice).
	stopping map[*run]bool
}

func newLeaseTracker(clock *storeClock) *leaseTracker {
	return &leaseTracker{clock: clock, expires: make(map[*run]time.Time), stopping: make(map[*run]bool)}
}

// renewed records that a renewal of r extended its lease to expires.
func (t *leaseTracker) renewed(r *run, expires time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if expires.After(t.expires[r]) {
		t.expires[r] = expires
	}
}

// overdue syncs the tracker with runs (forgetting runs that left, adding
// new ones with the expiry of their claim) and returns the runs whose lease
// expires at or before deadline (on this host's clock) and that are not
// being stopped yet, marking them stopping, with their expiry (on the
// store's).
func (t *leaseTracker) overdue(runs []*run, deadline time.Time) map[*run]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	present := make(map[*run]bool, len(runs))
	var out map[*run]time.Time
	for _, r := range runs {
		present[r] = true
		expires, ok := t.expires[r]
		if !ok {
			expires = r.leaseExpires
			t.expires[r] = expires
		}
		if !t.clock.toLocal(expires).After(deadline) && !t.stopping[r] {
			t.stopping[r] = true
			if out == nil {
				out = make(map[*run]time.Time)
			}
			out[r] = expires
		}
	}
	for r := range t.expires {
		if !present[r] {
			delete(t.expires, r)
			delete(t.stopping, r)
		}
	}
	return out
}

// errLeaseUnrenewed is why the guard stops a run.
var errLeaseUnrenewed = errors.New("host: lease not renewed in time")

// leaseGuardLoop stops, until ctx ends, every run whose lease this host
// could not renew for 3/4 of LeaseDuration, so that it has stopped working
// before the lease can expire and another host take the run over (the
// remaining quarter covers the error of mapping the store's clock onto
// this host's, the guard's period and the time the stop takes). The store would refuse the run's commits after the expiry
// anyway; the guard also stops its executors (tool calls) and live
// appends. It runs apart from the lease loop, whose renewals may hang on
// an unreachable store. A stopped run is left to expire and be recovered
// from its last commit, here or elsewhere.
//
// Expiries are the store's, on its clock (the database server's for
// PostgreSQL), mapped onto this host's monotonic clock through the last
// reading of the store's (storeClock): a host whose clock is off neither
// stops its runs at once nor too late.
func (h *Host) leaseGuardLoop(ctx context.Context, leases *leaseTracker) {
	period := max(h.cfg.LeaseDuration/20, time.Millisecond)
	margin := h.cfg.LeaseDuration / 4
	t := time.NewTicker(period)
	defer t.Stop()
	var stops sync.WaitGroup
	defer stops.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for r, expires := range leases.overdue(h.runsSnapshot(), h.now().Add(margin)) {
			h.metrics.failed(opLeaseRenew)
			h.log.Error("host: lease not renewed in time; stopping the run before the lease can expire",
				"run_id", r.id, "response_id", r.responseID(), "lease_expires", expires, "lease", h.cfg.LeaseDuration)
			// fence waits for the run's lock, which a commit in flight
			// holds: one goroutine per run keeps the others on time.
			if r.fencing.CompareAndSwap(false, true) {
				stops.Go(func() { h.fence(r, errLeaseUnrenewed) })
			}
		}
	}
}
