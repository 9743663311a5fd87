package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

func testLease(t *testing.T, h Harness) {
	t.Parallel()

	t.Run("ClaimTakesUnownedAndExpired", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		t0 := testNow()
		unowned := CreateResponse(b.ctx, t, b.s, &ResponseOpts{NoLease: true, Now: t0})
		expired := CreateResponse(b.ctx, t, b.s, &ResponseOpts{LeaseDuration: time.Minute, Now: t0})
		held := CreateResponse(b.ctx, t, b.s, &ResponseOpts{Now: t0})
		CreateResponse(b.ctx, t, b.s, &ResponseOpts{NoLease: true, Status: store.StatusCompleted, Now: t0})
		if unowned.Run.Lease.Owner != "" || unowned.Run.Lease.Epoch != 0 || expired.Run.Lease.Epoch != 1 {
			t.Fatalf("leases after create: %+v, %+v", unowned.Run.Lease, expired.Run.Lease)
		}
		now := t0.Add(2 * time.Minute)
		claimed, err := b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: "host-b", Duration: time.Minute, Now: now})
		requireNoError(t, err, "LeaseClaim")
		got := map[string]int64{}
		for _, r := range claimed {
			got[r.ID] = r.Lease.Epoch
			if r.Lease.Owner != "host-b" || !r.Lease.ExpiresAt.Equal(now.Add(time.Minute)) {
				t.Fatalf("claimed lease %+v", r.Lease)
			}
		}
		if len(got) != 2 || got[unowned.Run.ID] != 1 || got[expired.Run.ID] != 2 {
			t.Fatalf("claimed %v, want %s at epoch 1 and %s at epoch 2 (not %s, held, nor the completed run)", got, unowned.Run.ID, expired.Run.ID, held.Run.ID)
		}
		again, err := b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: "host-c", Duration: time.Minute, Now: now})
		requireNoError(t, err, "LeaseClaim")
		if len(again) != 0 {
			t.Fatalf("second claim took %d runs, want 0", len(again))
		}
	})

	t.Run("ClaimHonoursLimit", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		for range 5 {
			CreateResponse(b.ctx, t, b.s, &ResponseOpts{NoLease: true})
		}
		claimed, err := b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: "host-b", Duration: time.Minute, Limit: 2})
		requireNoError(t, err, "LeaseClaim")
		if len(claimed) != 2 {
			t.Fatalf("claimed %d runs with Limit 2", len(claimed))
		}
	})

	t.Run("RacingClaimersEachRunOnce", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		const runs, claimers = 20, 4
		for range runs {
			CreateResponse(b.ctx, t, b.s, &ResponseOpts{NoLease: true})
		}
		var mu sync.Mutex
		owners := map[string][]string{}
		var wg sync.WaitGroup
		for i := range claimers {
			wg.Go(func() {
				owner := NewID("host")
				for range 3 {
					claimed, err := b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: owner, Duration: time.Hour, Limit: 3 + i})
					if err != nil {
						t.Errorf("LeaseClaim: %v", err)
						return
					}
					mu.Lock()
					for _, r := range claimed {
						owners[r.ID] = append(owners[r.ID], owner)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		for id, o := range owners {
			if len(o) != 1 {
				t.Fatalf("run %s claimed by %v", id, o)
			}
		}
	})

	t.Run("RenewExtends", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		t0 := testNow()
		c := CreateResponse(b.ctx, t, b.s, &ResponseOpts{LeaseDuration: time.Minute, Now: t0})
		lp := &store.LeaseParams{RunID: c.Run.ID, Owner: LeaseOwnerDefault, Epoch: c.Run.Lease.Epoch, Duration: time.Minute, Now: t0.Add(50 * time.Second)}
		exp, err := b.s.LeaseRenew(b.ctx, lp)
		requireNoError(t, err, "LeaseRenew")
		if !exp.Equal(t0.Add(110 * time.Second)) {
			t.Fatalf("expiry %v, want %v", exp, t0.Add(110*time.Second))
		}
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Now: t0.Add(100 * time.Second)})
		run, err := b.s.RunGet(b.ctx, c.Run.ID)
		requireNoError(t, err, "RunGet")
		if !run.Lease.ExpiresAt.Equal(exp) || run.Lease.Epoch != c.Run.Lease.Epoch {
			t.Fatalf("lease %+v, want expiry %v", run.Lease, exp)
		}
	})

	t.Run("RenewRejectsLostLease", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		t0 := testNow()
		c := CreateResponse(b.ctx, t, b.s, &ResponseOpts{LeaseDuration: time.Minute, Now: t0})
		lp := &store.LeaseParams{RunID: c.Run.ID, Owner: LeaseOwnerDefault, Epoch: c.Run.Lease.Epoch, Duration: time.Minute, Now: t0.Add(2 * time.Minute)}
		_, err := b.s.LeaseRenew(b.ctx, lp)
		requireIs(t, err, store.ErrFenced, "LeaseRenew after expiry")
		_, err = b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: "host-b", Duration: time.Minute, Now: lp.Now})
		requireNoError(t, err, "LeaseClaim")
		lp.Now = t0.Add(90 * time.Second)
		_, err = b.s.LeaseRenew(b.ctx, lp)
		requireIs(t, err, store.ErrFenced, "LeaseRenew at an old epoch")
		lp.RunID = "run_missing"
		_, err = b.s.LeaseRenew(b.ctx, lp)
		requireIs(t, err, store.ErrNotFound, "LeaseRenew of an unknown run")
	})

	t.Run("ReleaseLetsAnotherClaim", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		lp := &store.LeaseParams{RunID: c.Run.ID, Owner: LeaseOwnerDefault, Epoch: c.Run.Lease.Epoch}
		requireNoError(t, b.s.LeaseRelease(b.ctx, lp), "LeaseRelease")
		requireIs(t, b.s.LeaseRelease(b.ctx, lp), store.ErrFenced, "second LeaseRelease")
		claimed, err := b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: "host-b", Duration: time.Minute})
		requireNoError(t, err, "LeaseClaim")
		if len(claimed) != 1 || claimed[0].Lease.Epoch != c.Run.Lease.Epoch+1 {
			t.Fatalf("claimed %+v after release", claimed)
		}
		Commit(b.ctx, t, b.s, c.Run.ID, nil)
	})

	// A release after a failed resume records it and keeps every host off
	// the run until NotBefore, announcing nothing; a commit forgets it.
	t.Run("ReleaseWithFailureBacksOff", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		t0 := testNow()
		var notices <-chan store.Notice
		if n, ok := b.s.(store.Notifier); ok {
			ctx, cancel := context.WithCancel(b.ctx)
			defer cancel()
			notices = n.Notices(ctx, 16)
		}
		c := CreateResponse(b.ctx, t, b.s, &ResponseOpts{Now: t0})
		lp := &store.LeaseParams{RunID: c.Run.ID, Owner: LeaseOwnerDefault, Epoch: c.Run.Lease.Epoch, Now: t0,
			Failure: &store.ResumeFailure{Reason: "model x is not registered", RetryAfter: time.Minute}}
		requireNoError(t, b.s.LeaseRelease(b.ctx, lp), "LeaseRelease with Failure")
		run, err := b.s.RunGet(b.ctx, c.Run.ID)
		requireNoError(t, err, "RunGet")
		if run.Resume.Failures != 1 || run.Resume.Error != "model x is not registered" ||
			!run.Resume.NotBefore.Equal(t0.Add(time.Minute)) || run.Lease.Owner != "" || !run.Active {
			t.Fatalf("after a failed resume: %+v", run)
		}
		claimed, err := b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: "host-b", Duration: time.Minute, Now: t0.Add(59 * time.Second)})
		requireNoError(t, err, "LeaseClaim")
		if len(claimed) != 0 {
			t.Fatalf("claimed %d runs before NotBefore", len(claimed))
		}
		claimed, err = b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: "host-b", Duration: time.Minute, Now: t0.Add(time.Minute)})
		requireNoError(t, err, "LeaseClaim")
		if len(claimed) != 1 || claimed[0].Resume.Failures != 1 {
			t.Fatalf("claimed %+v at NotBefore", claimed)
		}
		lp = &store.LeaseParams{RunID: c.Run.ID, Owner: "host-b", Epoch: claimed[0].Lease.Epoch, Now: t0.Add(time.Minute),
			Failure: &store.ResumeFailure{Reason: "still not", RetryAfter: 2 * time.Minute}}
		requireNoError(t, b.s.LeaseRelease(b.ctx, lp), "second LeaseRelease with Failure")
		run, err = b.s.RunGet(b.ctx, c.Run.ID)
		requireNoError(t, err, "RunGet")
		if run.Resume.Failures != 2 || run.Resume.Error != "still not" || !run.Resume.NotBefore.Equal(t0.Add(3*time.Minute)) {
			t.Fatalf("after a second failed resume: %+v", run.Resume)
		}
		now := t0.Add(3 * time.Minute)
		claimed, err = b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: "host-c", Duration: time.Hour, Now: now})
		requireNoError(t, err, "LeaseClaim")
		if len(claimed) != 1 {
			t.Fatalf("claimed %d runs at the second NotBefore", len(claimed))
		}
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Now: now})
		run, err = b.s.RunGet(b.ctx, c.Run.ID)
		requireNoError(t, err, "RunGet")
		if run.Resume != (store.ResumeState{}) {
			t.Fatalf("Resume after a commit: %+v", run.Resume)
		}
		if err := b.s.LeaseRelease(b.ctx, &store.LeaseParams{RunID: c.Run.ID, Owner: "host-c", Epoch: claimed[0].Lease.Epoch,
			Now: now, Failure: &store.ResumeFailure{Reason: "x"}}); err == nil {
			t.Fatal("LeaseRelease with a Failure without RetryAfter succeeded")
		}
		if notices == nil {
			return
		}
		// Notices come in order: any announcement of the failed releases
		// arrives before the one of a run queued after them.
		queued := CreateResponse(b.ctx, t, b.s, &ResponseOpts{NoLease: true})
		for n := range notices {
			if n.Kind == store.NoticeRunReady && n.RunID == c.Run.ID {
				t.Fatalf("a release after a failed resume announced the run: %+v", n)
			}
			if n.Kind == store.NoticeRunReady && n.RunID == queued.Run.ID {
				return
			}
		}
		t.Fatal("notices ended before the queued run's")
	})
}
