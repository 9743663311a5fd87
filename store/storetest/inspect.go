package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

// testRunInspector covers store.RunInspector (both backends implement it)
// and forks (ResponseCreateParams.ForkedFrom).
func testRunInspector(t *testing.T, h Harness) {
	t.Parallel()
	inspector := func(t *testing.T, s store.Store) store.RunInspector {
		ri, ok := s.(store.RunInspector)
		if !ok {
			t.Fatalf("%T does not implement store.RunInspector", s)
		}
		return ri
	}

	t.Run("QueryFiltersAndPages", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		ri := inspector(t, b.s)
		base := testNow().Add(-time.Hour)
		var alice []string // creation order
		for i := range 5 {
			o := &ResponseOpts{Owner: "alice", Now: base.Add(time.Duration(i) * time.Second), Model: "m-a"}
			if i == 3 {
				o.Model = "m-b"
			}
			if i == 4 {
				o.Status, o.NoLease = store.StatusCompleted, true
			}
			alice = append(alice, CreateResponse(b.ctx, t, b.s, o).Run.ID)
		}
		CreateResponse(b.ctx, t, b.s, &ResponseOpts{Owner: "bob", Now: base})
		query := func(p store.RunQueryParams) []string {
			t.Helper()
			runs, err := ri.RunQuery(b.ctx, &p)
			requireNoError(t, err, "RunQuery")
			var ids []string
			for _, r := range runs {
				ids = append(ids, r.ID)
				if !p.AnyOwner && r.Owner != p.Owner {
					t.Errorf("run %s of owner %q listed for %q", r.ID, r.Owner, p.Owner)
				}
			}
			return ids
		}
		if got := query(store.RunQueryParams{Owner: "alice"}); !slices.Equal(got, alice) {
			t.Errorf("asc: %v, want %v", got, alice)
		}
		desc := slices.Clone(alice)
		slices.Reverse(desc)
		var got []string
		for after := ""; ; {
			page := query(store.RunQueryParams{Owner: "alice", Desc: true, Limit: 2, After: after})
			got = append(got, page...)
			if len(page) < 2 {
				break
			}
			after = page[len(page)-1]
		}
		if !slices.Equal(got, desc) {
			t.Errorf("desc pages: %v, want %v", got, desc)
		}
		if got := query(store.RunQueryParams{Owner: "alice", Model: "m-b"}); !slices.Equal(got, alice[3:4]) {
			t.Errorf("model: %v", got)
		}
		if got := query(store.RunQueryParams{Owner: "alice", Status: store.StatusCompleted}); !slices.Equal(got, alice[4:]) {
			t.Errorf("status: %v", got)
		}
		active := true
		if got := query(store.RunQueryParams{Owner: "alice", Active: &active}); !slices.Equal(got, alice[:4]) {
			t.Errorf("active: %v", got)
		}
		if got := query(store.RunQueryParams{Owner: "alice", LeaseOwner: LeaseOwnerDefault}); !slices.Equal(got, alice[:4]) {
			t.Errorf("lease owner: %v", got)
		}
		if got := query(store.RunQueryParams{Owner: "alice", CreatedAfter: base.Add(1500 * time.Millisecond),
			CreatedBefore: base.Add(3500 * time.Millisecond)}); !slices.Equal(got, alice[2:4]) {
			t.Errorf("created between: %v", got)
		}
		if got := query(store.RunQueryParams{AnyOwner: true}); len(got) != 6 {
			t.Errorf("any owner: %v", got)
		}
		_, err := ri.RunQuery(b.ctx, &store.RunQueryParams{After: "run_missing"})
		requireIs(t, err, store.ErrNotFound, "RunQuery after an unknown run")

		info, err := ri.RunInfo(b.ctx, alice[4])
		requireNoError(t, err, "RunInfo")
		if info.Owner != "alice" || info.HeadStatus != store.StatusCompleted || info.Active || info.ForkedFrom != nil {
			t.Errorf("RunInfo: %+v", info)
		}
		_, err = ri.RunInfo(b.ctx, "run_missing")
		requireIs(t, err, store.ErrNotFound, "RunInfo")
	})

	t.Run("Fork", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		ri := inspector(t, b.s)
		orig := CreateResponse(b.ctx, t, b.s, &ResponseOpts{Owner: "alice"})
		for range 3 {
			Commit(b.ctx, t, b.s, orig.Run.ID, nil)
		}
		cp, err := b.s.CheckpointGet(b.ctx, orig.Run.ID, 2)
		requireNoError(t, err, "CheckpointGet")
		p := ResponseParams(&ResponseOpts{Owner: "alice", Checkpoint: cp.Parts})
		p.ForkedFrom = &store.ForkPoint{RunID: orig.Run.ID, Step: 2}
		fork, err := b.s.ResponseCreate(b.ctx, p)
		requireNoError(t, err, "ResponseCreate (fork)")
		if fork.Run.LastStep != 2 || fork.Response.CommitStep != 2 || fork.Response.StartStep != 2 {
			t.Fatalf("fork positioned at run step %d, response steps %d/%d; want 2", fork.Run.LastStep,
				fork.Response.CommitStep, fork.Response.StartStep)
		}
		got, err := b.s.CheckpointGetLast(b.ctx, fork.Run.ID)
		requireNoError(t, err, "CheckpointGetLast (fork)")
		if got.Step != 2 || got.ParentStep != -1 {
			t.Fatalf("fork's first checkpoint: step %d parent %d", got.Step, got.ParentStep)
		}
		requireParts(t, got.Parts, cp.Parts)
		Commit(b.ctx, t, b.s, fork.Run.ID, &CommitOpts{Step: 3})
		info, err := ri.RunInfo(b.ctx, fork.Run.ID)
		requireNoError(t, err, "RunInfo (fork)")
		if info.ForkedFrom == nil || *info.ForkedFrom != (store.ForkPoint{RunID: orig.Run.ID, Step: 2}) || info.LastStep != 3 {
			t.Fatalf("fork info: %+v", info)
		}
		runs, err := ri.RunQuery(b.ctx, &store.RunQueryParams{Owner: "alice"})
		requireNoError(t, err, "RunQuery")
		if len(runs) != 2 || runs[0].ForkedFrom != nil || runs[1].ForkedFrom == nil {
			t.Fatalf("listed lineage: %+v %+v", runs[0], runs[1])
		}
		// A fork never continues an existing run, and names its origin.
		p = ResponseParams(&ResponseOpts{RunID: fork.Run.ID})
		p.ForkedFrom = &store.ForkPoint{RunID: orig.Run.ID, Step: 1}
		_, err = b.s.ResponseCreate(b.ctx, p)
		requireIs(t, err, store.ErrConflict, "fork onto an existing run")
		p = ResponseParams(nil)
		p.ForkedFrom = &store.ForkPoint{RunID: "", Step: 1}
		if _, err := b.s.ResponseCreate(b.ctx, p); err == nil {
			t.Fatal("fork without an origin run accepted")
		}
	})

	t.Run("Claims", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		ri := inspector(t, b.s)
		res := CreateResponse(b.ctx, t, b.s, nil)
		Commit(b.ctx, t, b.s, res.Run.ID, nil)
		Commit(b.ctx, t, b.s, res.Run.ID, nil)
		err := b.s.LeaseRelease(b.ctx, &store.LeaseParams{RunID: res.Run.ID, Owner: LeaseOwnerDefault, Epoch: 1})
		requireNoError(t, err, "LeaseRelease")
		claimed, err := b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: "host-b", Duration: time.Hour})
		requireNoError(t, err, "LeaseClaim")
		if len(claimed) != 1 {
			t.Fatalf("claimed %d runs", len(claimed))
		}
		Commit(b.ctx, t, b.s, res.Run.ID, nil)
		claims, err := ri.RunClaims(b.ctx, res.Run.ID)
		requireNoError(t, err, "RunClaims")
		if len(claims) != 2 || claims[0].Epoch != 1 || claims[0].Owner != LeaseOwnerDefault || claims[0].LastStep != 0 ||
			claims[1].Epoch != 2 || claims[1].Owner != "host-b" || claims[1].LastStep != 2 || claims[1].ClaimedAt.IsZero() {
			t.Fatalf("claims: %+v", claims)
		}
		// A create without a lease owner claims nothing.
		queued := CreateResponse(b.ctx, t, b.s, &ResponseOpts{NoLease: true})
		if claims, err := ri.RunClaims(b.ctx, queued.Run.ID); err != nil || len(claims) != 0 {
			t.Fatalf("claims of a queued run: %+v %v", claims, err)
		}
		// The claims go with the run.
		requireNoError(t, b.s.ResponseDelete(b.ctx, res.Response.ID), "ResponseDelete")
		if claims, err := ri.RunClaims(b.ctx, res.Run.ID); err != nil || len(claims) != 0 {
			t.Fatalf("claims of a deleted run: %+v %v", claims, err)
		}
	})

}
