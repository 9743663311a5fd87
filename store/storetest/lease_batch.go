package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

// testLeaseBatch covers store.LeaseBatchRenewer, for stores that have it.
func testLeaseBatch(t *testing.T, h Harness) {
	t.Parallel()

	// One call renews every lease still held and gives each lost one the
	// error LeaseRenew would: ErrFenced for a lease claimed since,
	// ErrNotFound for a deleted run; the renewed expiries are stored.
	t.Run("RenewsHeldReportsLost", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		br, ok := b.s.(store.LeaseBatchRenewer)
		if !ok {
			t.Logf("%T does not implement store.LeaseBatchRenewer: nothing to check", b.s)
			return
		}
		t0 := testNow()
		held1 := CreateResponse(b.ctx, t, b.s, &ResponseOpts{LeaseDuration: time.Hour, Now: t0})
		lost := CreateResponse(b.ctx, t, b.s, &ResponseOpts{LeaseDuration: time.Minute, Now: t0})
		held2 := CreateResponse(b.ctx, t, b.s, &ResponseOpts{LeaseDuration: time.Hour, Now: t0})
		gone := CreateResponse(b.ctx, t, b.s, &ResponseOpts{LeaseDuration: time.Hour, Now: t0})
		now := t0.Add(2 * time.Minute)
		claimed, err := b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: "host-b", Duration: time.Hour, Now: now})
		requireNoError(t, err, "LeaseClaim")
		if len(claimed) != 1 || claimed[0].ID != lost.Run.ID {
			t.Fatalf("claimed %d runs, want only %s", len(claimed), lost.Run.ID)
		}
		requireNoError(t, b.s.ResponseDelete(b.ctx, gone.Response.ID), "ResponseDelete")

		refs := []store.LeaseRef{{RunID: held1.Run.ID, Epoch: held1.Run.Lease.Epoch}, {RunID: lost.Run.ID, Epoch: lost.Run.Lease.Epoch},
			{RunID: held2.Run.ID, Epoch: held2.Run.Lease.Epoch}, {RunID: gone.Run.ID, Epoch: gone.Run.Lease.Epoch}}
		res, err := br.LeaseRenewBatch(b.ctx, &store.LeaseRenewBatchParams{Owner: LeaseOwnerDefault, Duration: 10 * time.Minute,
			Runs: refs, Now: now})
		requireNoError(t, err, "LeaseRenewBatch")
		if len(res) != len(refs) {
			t.Fatalf("%d results for %d runs", len(res), len(refs))
		}
		want := now.Add(10 * time.Minute)
		for _, i := range []int{0, 2} {
			if res[i].Err != nil || !res[i].ExpiresAt.Equal(want) {
				t.Fatalf("held run %s: %v %v, want expiry %v", refs[i].RunID, res[i].ExpiresAt, res[i].Err, want)
			}
			r, err := b.s.RunGet(b.ctx, refs[i].RunID)
			requireNoError(t, err, "RunGet")
			if !r.Lease.ExpiresAt.Equal(want) {
				t.Fatalf("stored lease of %s expires %v, want %v", refs[i].RunID, r.Lease.ExpiresAt, want)
			}
		}
		if !errors.Is(res[1].Err, store.ErrFenced) {
			t.Fatalf("lease claimed since: %v, want ErrFenced", res[1].Err)
		}
		if !errors.Is(res[3].Err, store.ErrNotFound) {
			t.Fatalf("deleted run: %v, want ErrNotFound", res[3].Err)
		}
		// The lease claimed since is untouched.
		r, err := b.s.RunGet(b.ctx, lost.Run.ID)
		requireNoError(t, err, "RunGet")
		if r.Lease.Owner != "host-b" || !r.Lease.ExpiresAt.Equal(now.Add(time.Hour)) {
			t.Fatalf("the other owner's lease changed: %+v", r.Lease)
		}
	})
}
