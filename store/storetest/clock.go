package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

// testLeaseClock checks the clock leases are judged by, and that a fenced
// write says why.
func testLeaseClock(t *testing.T, h Harness) {
	t.Parallel()

	// A call that passes no Now is made at the store's clock: its own
	// (store.Clock: the database server's for PostgreSQL), or else the
	// host's. The lease expiries of a create, a claim and a renewal, and
	// a failed resume's back-off, are that clock plus the duration.
	t.Run("ExpiriesOnStoreClock", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		clock := func(ctx context.Context) time.Time {
			t.Helper()
			sc, ok := b.s.(store.Clock)
			if !ok {
				return time.Now()
			}
			now, err := sc.StoreNow(ctx)
			requireNoError(t, err, "StoreNow")
			return now
		}
		within := func(what string, got, before, after time.Time, d time.Duration) {
			t.Helper()
			if got.Before(before.Add(d)) || got.After(after.Add(d)) {
				t.Fatalf("%s: %v, want %v after the store's clock, between %v and %v", what, got, d, before.Add(d), after.Add(d))
			}
		}
		const lease = time.Minute
		before := clock(b.ctx)
		c := CreateResponse(b.ctx, t, b.s, &ResponseOpts{LeaseDuration: lease})
		within("lease expiry at create", c.Run.Lease.ExpiresAt, before, clock(b.ctx), lease)

		before = clock(b.ctx)
		exp, err := b.s.LeaseRenew(b.ctx, &store.LeaseParams{RunID: c.Run.ID, Owner: LeaseOwnerDefault, Epoch: c.Run.Lease.Epoch, Duration: lease})
		requireNoError(t, err, "LeaseRenew")
		within("lease expiry at renewal", exp, before, clock(b.ctx), lease)
		run, err := b.s.RunGet(b.ctx, c.Run.ID)
		requireNoError(t, err, "RunGet")
		if !run.Lease.ExpiresAt.Equal(exp) {
			t.Fatalf("stored expiry %v, renewal returned %v", run.Lease.ExpiresAt, exp)
		}

		before = clock(b.ctx)
		requireNoError(t, b.s.LeaseRelease(b.ctx, &store.LeaseParams{RunID: c.Run.ID, Owner: LeaseOwnerDefault, Epoch: c.Run.Lease.Epoch,
			Failure: &store.ResumeFailure{Reason: "not here", RetryAfter: lease}}), "LeaseRelease")
		after := clock(b.ctx)
		run, err = b.s.RunGet(b.ctx, c.Run.ID)
		requireNoError(t, err, "RunGet")
		within("resume back-off", run.Resume.NotBefore, before, after, lease)

		q := CreateResponse(b.ctx, t, b.s, &ResponseOpts{NoLease: true})
		before = clock(b.ctx)
		claimed, err := b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: "host-b", Duration: lease})
		requireNoError(t, err, "LeaseClaim")
		if len(claimed) != 1 || claimed[0].ID != q.Run.ID {
			t.Fatalf("claimed %d runs, want only the queued %s (the other backs off)", len(claimed), q.Run.ID)
		}
		within("lease expiry at claim", claimed[0].Lease.ExpiresAt, before, clock(b.ctx), lease)
		Commit(b.ctx, t, b.s, q.Run.ID, nil)
	})

	// A fenced write says what happened to the lease: it ran out with
	// nobody claiming the run since (same epoch: no "epoch 1, current
	// epoch 1"), or the run was claimed since, with both epochs.
	t.Run("FencedSaysWhy", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		t0 := testNow()
		c := CreateResponse(b.ctx, t, b.s, &ResponseOpts{LeaseDuration: time.Minute, Now: t0})
		_, err := b.s.Commit(b.ctx, NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Now: t0.Add(2 * time.Minute)}))
		var fe *store.FencedError
		if !errors.As(err, &fe) || fe.Epoch != 1 || fe.CurrentEpoch != 1 {
			t.Fatalf("commit after the lease expired: %v, want a FencedError at epoch 1, current epoch 1", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "lease expired") || strings.Contains(msg, "current epoch") {
			t.Fatalf("commit after the lease expired says %q", msg)
		}
		_, err = b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: "host-b", Duration: time.Minute, Now: t0.Add(2 * time.Minute)})
		requireNoError(t, err, "LeaseClaim")
		_, err = b.s.Commit(b.ctx, NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Epoch: 1, Now: t0.Add(2 * time.Minute)}))
		if !errors.As(err, &fe) || fe.Epoch != 1 || fe.CurrentEpoch != 2 {
			t.Fatalf("commit after another claim: %v, want a FencedError at epoch 1, current epoch 2", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "epoch 1, current epoch 2") || !strings.Contains(msg, "claimed since") {
			t.Fatalf("commit after another claim says %q", msg)
		}
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Now: t0.Add(2 * time.Minute)})
	})
}
