package storetest

import (
	"testing"

	"github.com/superstep/superstep/store"
)

func testRun(t *testing.T, h Harness) {
	t.Parallel()

	t.Run("GetUnknown", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		_, err := b.s.RunGet(b.ctx, "run_missing")
		requireIs(t, err, store.ErrNotFound, "RunGet")
	})

	t.Run("ListPages", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		ids := []string{"run_c", "run_a", "run_e", "run_b", "run_d"}
		for _, id := range ids {
			CreateResponse(b.ctx, t, b.s, &ResponseOpts{RunID: id})
		}
		var got []string
		after := ""
		for {
			runs, err := b.s.RunList(b.ctx, &store.RunListParams{After: after, Limit: 2})
			requireNoError(t, err, "RunList")
			for _, r := range runs {
				got = append(got, r.ID)
				after = r.ID
			}
			if len(runs) < 2 {
				break
			}
		}
		want := []string{"run_a", "run_b", "run_c", "run_d", "run_e"}
		if len(got) != len(want) {
			t.Fatalf("RunList pages = %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("RunList pages = %v, want %v", got, want)
			}
		}
	})

	t.Run("ListActiveOnly", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		for _, id := range []string{"run_a", "run_b", "run_c", "run_d"} {
			CreateResponse(b.ctx, t, b.s, &ResponseOpts{RunID: id})
		}
		for _, id := range []string{"run_b", "run_c"} {
			Commit(b.ctx, t, b.s, id, &CommitOpts{Status: store.StatusCompleted})
		}
		var got []string
		after := ""
		for {
			runs, err := b.s.RunList(b.ctx, &store.RunListParams{After: after, Limit: 1, ActiveOnly: true})
			requireNoError(t, err, "RunList(ActiveOnly)")
			for _, r := range runs {
				if !r.Active {
					t.Fatalf("RunList(ActiveOnly) listed %s, which is not active", r.ID)
				}
				got = append(got, r.ID)
				after = r.ID
			}
			if len(runs) < 1 {
				break
			}
		}
		if len(got) != 2 || got[0] != "run_a" || got[1] != "run_d" {
			t.Fatalf("RunList(ActiveOnly) pages = %v, want [run_a run_d]", got)
		}
	})
}

func testCheckpoint(t *testing.T, h Harness) {
	t.Parallel()

	t.Run("GetAndListHistory", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		var commits []*store.CommitParams
		for range 3 {
			commits = append(commits, Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Checkpoint: []store.Part{
				{Name: "b", Data: []byte("same")}, {Name: "a", Data: []byte(NewID("x"))}, {Name: "empty", Data: nil}}}))
		}
		cps, err := b.s.CheckpointList(b.ctx, c.Run.ID)
		requireNoError(t, err, "CheckpointList")
		if len(cps) != 4 {
			t.Fatalf("CheckpointList = %+v", cps)
		}
		for i, cp := range cps {
			if cp.Step != int64(i) || cp.ParentStep != int64(i-1) || cp.RunID != c.Run.ID || cp.CreatedAt.IsZero() {
				t.Fatalf("checkpoint %d = %+v", i, cp)
			}
			if i > 0 && cp.Size != int64(4+len(commits[i-1].Checkpoint[1].Data)) {
				t.Fatalf("checkpoint %d size %d", i, cp.Size)
			}
		}
		for i, p := range commits {
			cp, err := b.s.CheckpointGet(b.ctx, c.Run.ID, int64(i+1))
			requireNoError(t, err, "CheckpointGet")
			if cp.ParentStep != int64(i) {
				t.Fatalf("checkpoint %d parent %d", i+1, cp.ParentStep)
			}
			requireParts(t, cp.Parts, p.Checkpoint)
		}
		_, err = b.s.CheckpointGet(b.ctx, c.Run.ID, 9)
		requireIs(t, err, store.ErrNotFound, "CheckpointGet of a missing step")
		_, err = b.s.CheckpointList(b.ctx, "run_missing")
		requireIs(t, err, store.ErrNotFound, "CheckpointList of an unknown run")
		_, err = b.s.CheckpointGetLast(b.ctx, "run_missing")
		requireIs(t, err, store.ErrNotFound, "CheckpointGetLast of an unknown run")
	})
}

func testReopen(t *testing.T, h Harness) {
	t.Parallel()

	t.Run("KeepsEverything", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		Commit(b.ctx, t, b.s, c.Run.ID, nil)
		requireNoError(t, b.s.EventAppend(b.ctx, appendParams(c, 3, 2)), "EventAppend")
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Checkpoint: Parts(3, 100000, 3)})
		before := ReadRunState(b.ctx, t, b.s, c.Run.ID)
		h.reopen(t, b)
		requireSameState(t, withoutLeases(ReadRunState(b.ctx, t, b.s, c.Run.ID)).(*RunState), withoutLeases(before).(*RunState), "reopened store")
		reclaim(t, b)
		Commit(b.ctx, t, b.s, c.Run.ID, nil)
	})

	t.Run("ClosedStoreFails", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		requireNoError(t, b.s.Close(), "Close")
		_, err := b.s.ResponseGet(b.ctx, c.Response.ID)
		requireIs(t, err, store.ErrClosed, "ResponseGet after Close")
		_, err = b.s.Commit(b.ctx, &store.CommitParams{RunID: c.Run.ID, Status: store.StatusInProgress})
		requireIs(t, err, store.ErrClosed, "Commit after Close")
		requireNoError(t, b.s.Close(), "second Close")
	})
}

func testCheck(t *testing.T, h Harness) {
	t.Parallel()

	t.Run("PassesOnBusyStore", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		requireNoError(t, store.Check(b.ctx, b.s), "Check of an empty store")
		for i := range 3 {
			c := CreateResponse(b.ctx, t, b.s, &ResponseOpts{NoCheckpoint: i == 0})
			for step := 1; step <= i+1; step++ {
				Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: statusAt(step, i+1)})
			}
		}
		requireNoError(t, store.Check(b.ctx, b.s), "Check")
	})
}
