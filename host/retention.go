package host

import (
	"context"
	"math/rand/v2"
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
	// storageTimeout bounds one store call of retention.
	storageTimeout = 30 * time.Second
)

// pruneKeep is the store.CommitParams.PruneKeep of the commit of step:
// the commit itself prunes the run's history, in its own transaction, when
// it finishes a response or every CheckpointPruneEvery steps, unless the
// run cannot have more checkpoints (steps 0..step) than it keeps.
func (h *Host) pruneKeep(step int64, finishes bool) int {
	keep := h.cfg.KeepCheckpoints
	if keep < 0 || step+1 <= int64(keep) || (!finishes && step%CheckpointPruneEvery != 0) {
		return 0
	}
	return keep
}

// startRetention starts the retention loop when Config.Retention is set
// and the store can prune responses; it ends with the host's other loops
// (Shutdown).
func (h *Host) startRetention() {
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
