package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

func testRetention(t *testing.T, h Harness) {
	t.Parallel()

	t.Run("PruneKeepsLastAndNeeded", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		parts := func(step int) []store.Part {
			return append(Parts(2, 4096, 9), store.Part{Name: "var", Data: []byte{byte(step)}})
		}
		for step := 1; step <= 4; step++ {
			Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Checkpoint: parts(step), Status: statusAt(step, 4)})
		}
		CreateResponse(b.ctx, t, b.s, &ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID})
		for step := 5; step <= 10; step++ {
			Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Checkpoint: parts(step)})
		}
		n, err := b.s.CheckpointPrune(b.ctx, &store.CheckpointPruneParams{RunID: c.Run.ID, KeepLast: 3})
		requireNoError(t, err, "CheckpointPrune")
		cps, err := b.s.CheckpointList(b.ctx, c.Run.ID)
		requireNoError(t, err, "CheckpointList")
		var steps []int64
		for _, cp := range cps {
			steps = append(steps, cp.Step)
		}
		// Kept: step 4 (the first response's CommitStep) and 8, 9, 10.
		if n != 7 || len(steps) != 4 || steps[0] != 4 || steps[1] != 8 || steps[3] != 10 {
			t.Fatalf("pruned %d, left steps %v; want 7 pruned, [4 8 9 10] left", n, steps)
		}
		for _, step := range steps {
			cp, err := b.s.CheckpointGet(b.ctx, c.Run.ID, step)
			requireNoError(t, err, "CheckpointGet after prune")
			requireParts(t, cp.Parts, parts(int(step)))
		}
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Checkpoint: parts(11)})
		n, err = b.s.CheckpointPrune(b.ctx, &store.CheckpointPruneParams{RunID: c.Run.ID, KeepLast: 0})
		requireNoError(t, err, "CheckpointPrune(KeepLast 0)")
		cps, err = b.s.CheckpointList(b.ctx, c.Run.ID)
		requireNoError(t, err, "CheckpointList")
		if n != 3 || len(cps) != 2 || cps[0].Step != 4 || cps[1].Step != 11 {
			t.Fatalf("KeepLast 0 pruned %d and left %+v; want the last and step 4", n, cps)
		}
	})

	// A commit with PruneKeep prunes as CheckpointPrune would, in its own
	// transaction: the new checkpoint counts among those kept, and the
	// blobs of pruned checkpoints go while shared ones stay readable.
	t.Run("CommitPrunes", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		parts := func(step int) []store.Part {
			return append(Parts(2, 4096, 9), store.Part{Name: "var", Data: []byte{byte(step)}})
		}
		for step := 1; step <= 5; step++ {
			Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Checkpoint: parts(step)})
		}
		p := NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Checkpoint: parts(6), Status: store.StatusCompleted})
		p.PruneKeep = 2
		res, err := b.s.Commit(b.ctx, p)
		requireNoError(t, err, "Commit with PruneKeep")
		cps, err := b.s.CheckpointList(b.ctx, c.Run.ID)
		requireNoError(t, err, "CheckpointList")
		if res.Pruned != 5 || len(cps) != 2 || cps[0].Step != 5 || cps[1].Step != 6 {
			t.Fatalf("Commit with PruneKeep 2 pruned %d and left %+v; want 5 pruned, steps 5 and 6 left", res.Pruned, cps)
		}
		for _, step := range []int64{5, 6} {
			cp, err := b.s.CheckpointGet(b.ctx, c.Run.ID, step)
			requireNoError(t, err, "CheckpointGet after a pruning commit")
			requireParts(t, cp.Parts, parts(int(step)))
		}
		requireNoError(t, store.Check(b.ctx, b.s), "store.Check after a pruning commit")
	})

	t.Run("PruneUnknownRun", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		_, err := b.s.CheckpointPrune(b.ctx, &store.CheckpointPruneParams{RunID: "run_missing", KeepLast: 1})
		requireIs(t, err, store.ErrNotFound, "CheckpointPrune of an unknown run")
	})
}

// statusAt is in_progress before the last step, completed at it.
func statusAt(step, last int) store.Status {
	if step == last {
		return store.StatusCompleted
	}
	return store.StatusInProgress
}

// testResponsePrune is the conformance section of store.ResponsePruner
// (skipped by a backend that does not implement it, which none of the
// repository's do: both run it).
func testResponsePrune(t *testing.T, h Harness) {
	t.Parallel()
	b := h.setup(t)
	pr, ok := b.s.(store.ResponsePruner)
	if !ok {
		t.Skip("store does not implement store.ResponsePruner")
	}
	old := time.Now().Add(-2 * time.Hour)
	// finish commits a terminal status on the run's head at now.
	finish := func(runID string, st store.Status, now time.Time) {
		Commit(b.ctx, t, b.s, runID, &CommitOpts{Status: st, Now: now})
	}
	cont := func(c *store.ResponseCreateResult) *store.ResponseCreateResult {
		return CreateResponse(b.ctx, t, b.s, &ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID})
	}
	// A: old completed, continued by an old completed head: both go (a
	// completed head could be continued, but retention ends that too),
	// and the run with them.
	a1 := CreateResponse(b.ctx, t, b.s, nil)
	finish(a1.Run.ID, store.StatusCompleted, old)
	a2 := cont(a1)
	finish(a1.Run.ID, store.StatusCompleted, old)
	// B: an old failed head alone: it goes with its run.
	b1 := CreateResponse(b.ctx, t, b.s, nil)
	finish(b1.Run.ID, store.StatusFailed, old)
	// C: an old completed response whose run is active again: kept.
	c1 := CreateResponse(b.ctx, t, b.s, nil)
	finish(c1.Run.ID, store.StatusCompleted, old)
	c2 := cont(c1)
	Commit(b.ctx, t, b.s, c1.Run.ID, &CommitOpts{})
	// D: a recent cancelled head: kept.
	d1 := CreateResponse(b.ctx, t, b.s, nil)
	finish(d1.Run.ID, store.StatusCancelled, time.Now())
	// E: old completed then old incomplete head: both go, run too.
	e1 := CreateResponse(b.ctx, t, b.s, nil)
	finish(e1.Run.ID, store.StatusCompleted, old)
	e2 := cont(e1)
	finish(e1.Run.ID, store.StatusIncomplete, old)

	// Two pruners at once, one response per call: each response is
	// deleted once.
	before := time.Now().Add(-time.Hour)
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	errs := make(chan error, 2)
	for range 2 {
		wg.Go(func() {
			for {
				n, err := pr.ResponsePrune(b.ctx, &store.ResponsePruneParams{Before: before, Limit: 1})
				if err != nil {
					errs <- err
					return
				}
				if n == 0 {
					return
				}
				mu.Lock()
				total += n
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		requireNoError(t, err, "ResponsePrune")
	}
	if total != 5 {
		t.Fatalf("pruned %d responses; want 5 (a1, a2, b1, e1, e2)", total)
	}
	for _, id := range []string{a1.Response.ID, a2.Response.ID, b1.Response.ID, e1.Response.ID, e2.Response.ID} {
		_, err := b.s.ResponseGet(b.ctx, id)
		requireIs(t, err, store.ErrNotFound, "ResponseGet of a pruned response")
		evs, err := b.s.EventList(b.ctx, &store.EventListParams{ResponseID: id, After: -1})
		if err == nil && len(evs) > 0 {
			t.Fatalf("pruned response %s kept %d events", id, len(evs))
		}
	}
	for _, id := range []string{c1.Response.ID, c2.Response.ID, d1.Response.ID} {
		_, err := b.s.ResponseGet(b.ctx, id)
		requireNoError(t, err, "ResponseGet of a kept response")
	}
	for _, runID := range []string{a1.Run.ID, b1.Run.ID, e1.Run.ID} {
		_, err := b.s.RunGet(b.ctx, runID)
		requireIs(t, err, store.ErrNotFound, "RunGet of a run whose responses were all pruned")
		_, err = b.s.CheckpointList(b.ctx, runID)
		requireIs(t, err, store.ErrNotFound, "CheckpointList of a pruned run")
	}
	requireNoError(t, store.Check(b.ctx, b.s), "store.Check after pruning")
	n, err := pr.ResponsePrune(b.ctx, &store.ResponsePruneParams{Before: time.Now().Add(time.Hour)})
	requireNoError(t, err, "ResponsePrune of recent")
	if n != 1 { // d1 now; the active run c stays
		t.Fatalf("pruning everything finished deleted %d; want 1 (d1)", n)
	}
}
