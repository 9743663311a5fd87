package storetest

import (
	"testing"

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
