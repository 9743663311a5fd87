package host

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/superstep/superstep/store"
)

// CheckpointPruneEvery is how many commits apart a run's checkpoint
// history is pruned (at steps that are multiples of it), besides the
// commit that finishes a response: a run keeps at most
// KeepCheckpoints+CheckpointPruneEvery checkpoints (plus one per response
// it resumes from) while it runs, and KeepCheckpoints once it stopped.
const CheckpointPruneEvery = 16

// Bounds of the period of the retention loop (Config.Retention/10).
const (
	retentionPeriodMin = time.Second
	retentionPeriodMax = time.Hour
	// retentionBatch is how many responses one store call deletes; the
	// loop calls again while a batch comes back full.
	retentionBatch = store.ResponsePruneLimitDefault
	// storageTimeout bounds one store call of pruning or retention.
	storageTimeout = 30 * time.Second
)

// storageState queues runs whose checkpoint history is due for periodic
// pruning, for the prune loop: pruning is a store write that must not
// delay the next superstep of a running run.
type storageState struct {
	mu      sync.Mutex
	pending map[string]struct{} // run IDs; a run queued twice is pruned once
	wake    chan struct{}       // capacity 1: "pending is not empty"
}

// afterCommit prunes the run's checkpoint history when the commit of step
// made it due. The commit that finishes a response prunes at once, on the
// run's goroutine: the commit is durable and published (readers were woken
// by it), and the run's lease is released only after the prune, so a
// finished run's history is already bounded when another host or tool
// sees the run idle. Every CheckpointPruneEvery steps the run is queued
// for the prune loop instead, which never blocks the next superstep.
func (h *Host) afterCommit(runID string, step int64, finished bool) {
	if h.cfg.KeepCheckpoints < 0 {
		return
	}
	if finished {
		// A run has at most step+1 checkpoints (steps 0..step): a short one
		// has nothing to prune, and skipping it spares a store write.
		if step+1 > int64(h.cfg.KeepCheckpoints) {
			h.pruneRun(h.runCtx, runID)
		}
		return
	}
	if step%CheckpointPruneEvery != 0 {
		return
	}
	st := &h.storage
	st.mu.Lock()
	if st.pending == nil {
		st.pending = make(map[string]struct{})
	}
	st.pending[runID] = struct{}{}
	wake := st.wake // nil until the loops start; pending waits for them
	st.mu.Unlock()
	select {
	case wake <- struct{}{}:
	default: // already signalled (or no loop yet)
	}
}

// startStorageLoops starts the checkpoint prune loop and, when
// Config.Retention is set and the store can prune responses, the retention
// loop; both end with the host's other loops (Shutdown).
func (h *Host) startStorageLoops() {
	if h.cfg.KeepCheckpoints >= 0 {
		h.storage.mu.Lock()
		h.storage.wake = make(chan struct{}, 1)
		h.storage.wake <- struct{}{} // runs queued before the start
		h.storage.mu.Unlock()
		h.loopWG.Add(1)
		go func() {
			defer h.loopWG.Done()
			h.pruneLoop(h.loopCtx)
		}()
	}
	if h.cfg.Retention <= 0 {
		return
	}
	pr, ok := h.store.(store.ResponsePruner)
	if !ok {
		h.log.Warn("host: the store cannot delete old responses (no store.ResponsePruner); Config.Retention ignored")
		return
	}
	h.loopWG.Add(1)
	go func() {
		defer h.loopWG.Done()
		h.retentionLoop(h.loopCtx, pr)
	}()
}

// wakeChan returns the prune loop's wake channel.
func (st *storageState) wakeChan() chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.wake
}

// pruneLoop prunes the queued runs' checkpoint histories down to
// Config.KeepCheckpoints until ctx ends. Failures are logged and counted
// (superstep_host_failures_total{op="prune"}): the run goes on, with a
// longer history until its next prune.
func (h *Host) pruneLoop(ctx context.Context) {
	st := &h.storage
	for {
		select {
		case <-ctx.Done():
			return
		case <-st.wakeChan():
		}
		st.mu.Lock()
		runs := st.pending
		st.pending = nil
		st.mu.Unlock()
		for runID := range runs {
			if ctx.Err() != nil {
				return
			}
			h.pruneRun(ctx, runID)
		}
	}
}

// pruneRun prunes one run's checkpoint history. The store keeps the
// newest checkpoint (the one recovery and continuation read, through
// CheckpointGetLast) and every response's CommitStep whatever KeepLast is.
func (h *Host) pruneRun(ctx context.Context, runID string) {
	ctx, cancel := context.WithTimeout(ctx, storageTimeout)
	defer cancel()
	n, err := h.store.CheckpointPrune(ctx, &store.CheckpointPruneParams{RunID: runID, KeepLast: h.cfg.KeepCheckpoints})
	switch {
	case err == nil:
		h.metrics.checkpointsPruned.Add(float64(n))
	case errors.Is(err, store.ErrNotFound), ctx.Err() != nil && errors.Is(err, ctx.Err()):
		// The run was deleted meanwhile, or the host is stopping.
	default:
		h.metrics.failed(opPrune)
		h.log.Warn("host: pruning the run's checkpoints failed", "run_id", runID, "err", err)
	}
}

// retentionPeriod is the period of the retention loop: Retention/10 within
// [retentionPeriodMin, retentionPeriodMax].
func (h *Host) retentionPeriod() time.Duration {
	return min(max(h.cfg.Retention/10, retentionPeriodMin), retentionPeriodMax)
}

// jitter returns d scaled by a random factor in [0.75, 1.25), so that
// hosts started together do not prune in lockstep.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.75 + rand.Float64()/2))
}

// retentionLoop deletes expired responses at once, then every
// retentionPeriod (with jitter) until ctx ends, one batch at a time.
func (h *Host) retentionLoop(ctx context.Context, pr store.ResponsePruner) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.expireResponses(ctx, pr)
		t.Reset(jitter(h.retentionPeriod()))
	}
}

// expireResponses deletes, in batches, the responses completed more than
// Config.Retention ago (the store decides which may go: see
// store.ResponsePruner), until a batch comes back short or fails.
func (h *Host) expireResponses(ctx context.Context, pr store.ResponsePruner) {
	before := time.Now().Add(-h.cfg.Retention)
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, storageTimeout)
		n, err := pr.ResponsePrune(cctx, &store.ResponsePruneParams{Before: before, Limit: retentionBatch})
		cancel()
		h.metrics.responsesPruned.Add(float64(n))
		if err != nil {
			if ctx.Err() == nil {
				h.metrics.failed(opRetention)
				h.log.Warn("host: deleting expired responses failed", "err", err)
			}
			return
		}
		if n < retentionBatch {
			return
		}
	}
}
