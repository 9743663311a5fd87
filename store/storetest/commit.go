package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

func testCommit(t *testing.T, h Harness) {
	t.Parallel()

	t.Run("WritesEverything", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		p := NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Events: 3})
		res, err := b.s.Commit(b.ctx, p)
		requireNoError(t, err, "Commit")
		if res.NextSeq != 4 {
			t.Fatalf("NextSeq = %d, want 4", res.NextSeq)
		}
		st := ReadRunState(b.ctx, t, b.s, c.Run.ID)
		if st.Run.LastStep != 1 || !st.Run.Active {
			t.Fatalf("run = %+v, want LastStep 1, active", st.Run)
		}
		resp := st.Responses[0]
		if resp.NextSeq != 4 || resp.CommitStep != 1 || !bytes.Equal(resp.Snapshot, p.Snapshot) || resp.Status != store.StatusInProgress {
			t.Fatalf("response = %+v", resp)
		}
		evs := st.Events[resp.ID]
		if len(evs) != 4 || evs[1].Step != 1 || evs[0].Step != 0 || !bytes.Equal(evs[3].Payload, p.Events[2].Payload) || evs[3].Type != p.Events[2].Type {
			t.Fatalf("events = %+v", evs)
		}
		if len(st.Checkpoints) != 2 || st.Checkpoints[1].Step != 1 || st.Checkpoints[1].ParentStep != 0 || st.Checkpoints[0].ParentStep != -1 {
			t.Fatalf("checkpoints = %+v", st.Checkpoints)
		}
		requireParts(t, st.Last.Parts, p.Checkpoint)
	})

	t.Run("Completes", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		p := NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		p.Error, p.Usage = []byte(`null`), []byte(`{"total_tokens":3}`)
		_, err := b.s.Commit(b.ctx, p)
		requireNoError(t, err, "Commit")
		st := ReadRunState(b.ctx, t, b.s, c.Run.ID)
		resp := st.Responses[0]
		if st.Run.Active || resp.Status != store.StatusCompleted || resp.CompletedAt == nil || !bytes.Equal(resp.Usage, p.Usage) || !bytes.Equal(resp.Error, p.Error) {
			t.Fatalf("after completing: %s, response %+v", st, resp)
		}
		_, err = b.s.Commit(b.ctx, NextCommit(b.ctx, t, b.s, c.Run.ID, nil))
		requireIs(t, err, store.ErrConflict, "Commit after the run completed")
	})

	// Release on the commit that finishes the response gives the lease up
	// as LeaseRelease would, in the same write: a queued next turn is
	// claimed by another host at once. Without Release (the control) the
	// finished run's lease still keeps others off until it expires.
	t.Run("TerminalCommitReleasesLease", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name             string
			status           store.Status
			cancel, release  bool
			pruneKeep, steps int
		}{
			{name: "Completed", status: store.StatusCompleted, release: true},
			{name: "CompletedPruning", status: store.StatusCompleted, release: true, pruneKeep: 1, steps: 2},
			{name: "Cancelled", status: store.StatusCancelled, cancel: true, release: true},
			{name: "NoRelease", status: store.StatusCompleted},
		} {
			t.Run(tc.name, func(t *testing.T) {
				b := h.setup(t)
				c := CreateResponse(b.ctx, t, b.s, &ResponseOpts{LeaseDuration: time.Hour})
				for range tc.steps {
					Commit(b.ctx, t, b.s, c.Run.ID, nil)
				}
				if tc.cancel {
					_, err := b.s.ResponseCancel(b.ctx, c.Response.ID)
					requireNoError(t, err, "ResponseCancel")
				}
				p := NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: tc.status, Events: 1})
				p.Release, p.PruneKeep = tc.release, tc.pruneKeep
				_, err := b.s.Commit(b.ctx, p)
				requireNoError(t, err, "terminal Commit")
				run, err := b.s.RunGet(b.ctx, c.Run.ID)
				requireNoError(t, err, "RunGet")
				if run.Active || run.Lease.Epoch != c.Run.Lease.Epoch || (run.Lease.Owner == "") != tc.release {
					t.Fatalf("run after the terminal commit (Release %v): %+v", tc.release, run)
				}
				resp, err := b.s.ResponseGet(b.ctx, c.Response.ID)
				requireNoError(t, err, "ResponseGet")
				if resp.Status != tc.status || !resp.Finished() || resp.NextSeq != p.Events[0].Seq+1 {
					t.Fatalf("response after the terminal commit: %+v", resp)
				}
				lp := &store.LeaseParams{RunID: c.Run.ID, Owner: LeaseOwnerDefault, Epoch: c.Run.Lease.Epoch, Duration: time.Hour}
				if tc.release {
					// The releasing holder is fenced, as after LeaseRelease.
					_, err := b.s.LeaseRenew(b.ctx, lp)
					requireIs(t, err, store.ErrFenced, "LeaseRenew after the releasing commit")
					requireIs(t, b.s.LeaseRelease(b.ctx, lp), store.ErrFenced, "LeaseRelease after the releasing commit")
				}
				// The next turn, queued (no lease owner): another host claims it
				// at once only if the lease was released.
				next := CreateResponse(b.ctx, t, b.s, &ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID, NoLease: true})
				claimed, err := b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: "host-b", Duration: time.Minute})
				requireNoError(t, err, "LeaseClaim")
				if !tc.release {
					if len(claimed) != 0 {
						t.Fatalf("claimed %+v while the finished run's lease was held", claimed)
					}
					return
				}
				if len(claimed) != 1 || claimed[0].ID != c.Run.ID || claimed[0].Lease.Owner != "host-b" ||
					claimed[0].Lease.Epoch != c.Run.Lease.Epoch+1 || claimed[0].HeadResponseID != next.Response.ID {
					t.Fatalf("claimed %+v after the releasing commit", claimed)
				}
				Commit(b.ctx, t, b.s, c.Run.ID, nil) // the new owner's epoch commits
			})
		}
	})

	// Release is for the commit that finishes a response: on any other it
	// is refused and nothing is written.
	t.Run("ReleaseRequiresTerminal", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		before := ReadRunState(b.ctx, t, b.s, c.Run.ID)
		p := NextCommit(b.ctx, t, b.s, c.Run.ID, nil)
		p.Release = true
		if _, err := b.s.Commit(b.ctx, p); err == nil {
			t.Fatal("a non-terminal commit with Release was accepted")
		}
		requireSameState(t, ReadRunState(b.ctx, t, b.s, c.Run.ID), before, "refused commit with Release")
		Commit(b.ctx, t, b.s, c.Run.ID, nil) // the lease is still held
	})

	// A fenced commit with Release changes nothing: not the new owner's
	// lease either.
	t.Run("ReleaseFenced", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		p := NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		p.Release = true
		requireNoError(t, b.s.LeaseRelease(b.ctx, &store.LeaseParams{RunID: c.Run.ID, Owner: LeaseOwnerDefault, Epoch: c.Run.Lease.Epoch}), "LeaseRelease")
		_, err := b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: "host-b", Duration: time.Hour})
		requireNoError(t, err, "LeaseClaim")
		before := ReadRunState(b.ctx, t, b.s, c.Run.ID)
		_, err = b.s.Commit(b.ctx, p)
		requireIs(t, err, store.ErrFenced, "releasing Commit at the old epoch")
		after := ReadRunState(b.ctx, t, b.s, c.Run.ID)
		requireSameState(t, after, before, "fenced commit with Release")
		if after.Run.Lease.Owner != "host-b" {
			t.Fatalf("lease after a fenced releasing commit: %+v", after.Run.Lease)
		}
	})

	t.Run("SilentStep", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{NoEvents: true})
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{NoEvents: true, Checkpoint: []store.Part{}})
		st := ReadRunState(b.ctx, t, b.s, c.Run.ID)
		if st.Run.LastStep != 2 || st.Responses[0].NextSeq != 1 || len(st.Events[c.Response.ID]) != 1 || len(st.Last.Parts) != 0 {
			t.Fatalf("after two silent steps: %s", st)
		}
	})

	t.Run("RejectsStaleEpoch", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		p := NextCommit(b.ctx, t, b.s, c.Run.ID, nil)
		requireNoError(t, b.s.LeaseRelease(b.ctx, &store.LeaseParams{RunID: c.Run.ID, Owner: LeaseOwnerDefault, Epoch: c.Run.Lease.Epoch}), "LeaseRelease")
		claimed, err := b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: "host-b", Duration: time.Hour})
		requireNoError(t, err, "LeaseClaim")
		if len(claimed) != 1 || claimed[0].Lease.Epoch != c.Run.Lease.Epoch+1 {
			t.Fatalf("claimed %+v", claimed)
		}
		before := ReadRunState(b.ctx, t, b.s, c.Run.ID)
		_, err = b.s.Commit(b.ctx, p)
		requireIs(t, err, store.ErrFenced, "Commit at the old epoch")
		var fe *store.FencedError
		if !errors.As(err, &fe) || fe.Epoch != p.Epoch || fe.CurrentEpoch != p.Epoch+1 {
			t.Fatalf("err = %#v, want a *store.FencedError with epochs %d/%d", err, p.Epoch, p.Epoch+1)
		}
		requireSameState(t, ReadRunState(b.ctx, t, b.s, c.Run.ID), before, "fenced commit")
		Commit(b.ctx, t, b.s, c.Run.ID, nil) // the new owner's epoch works
	})

	t.Run("RejectsExpiredLease", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		t0 := testNow()
		c := CreateResponse(b.ctx, t, b.s, &ResponseOpts{Now: t0, LeaseDuration: time.Minute})
		_, err := b.s.Commit(b.ctx, NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Now: t0.Add(2 * time.Minute)}))
		requireIs(t, err, store.ErrFenced, "Commit after the lease expired")
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Now: t0.Add(30 * time.Second)})
	})

	t.Run("RejectsReleasedLease", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		requireNoError(t, b.s.LeaseRelease(b.ctx, &store.LeaseParams{RunID: c.Run.ID, Owner: LeaseOwnerDefault, Epoch: c.Run.Lease.Epoch}), "LeaseRelease")
		_, err := b.s.Commit(b.ctx, NextCommit(b.ctx, t, b.s, c.Run.ID, nil))
		requireIs(t, err, store.ErrFenced, "Commit after LeaseRelease")
	})

	t.Run("RejectsDuplicateStep", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		p := Commit(b.ctx, t, b.s, c.Run.ID, nil)
		before := ReadRunState(b.ctx, t, b.s, c.Run.ID)
		_, err := b.s.Commit(b.ctx, p)
		requireIs(t, err, store.ErrConflict, "Commit of the same step twice")
		requireSameState(t, ReadRunState(b.ctx, t, b.s, c.Run.ID), before, "duplicate commit")
	})

	t.Run("RejectsOutOfOrderStep", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		Commit(b.ctx, t, b.s, c.Run.ID, nil)
		before := ReadRunState(b.ctx, t, b.s, c.Run.ID)
		for _, step := range []int64{0, 1, 3, 10} {
			p := NextCommit(b.ctx, t, b.s, c.Run.ID, nil)
			p.Step = step
			_, err := b.s.Commit(b.ctx, p)
			requireIs(t, err, store.ErrConflict, fmt.Sprintf("Commit of step %d after step 1", step))
		}
		requireSameState(t, ReadRunState(b.ctx, t, b.s, c.Run.ID), before, "out-of-order commits")
	})

	t.Run("RejectsSeqGap", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		before := ReadRunState(b.ctx, t, b.s, c.Run.ID)
		for _, seq := range []int64{2, 5} {
			_, err := b.s.Commit(b.ctx, NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Seq: seq}))
			requireIs(t, err, store.ErrConflict, fmt.Sprintf("Commit with first seq %d, log at 1", seq))
		}
		p := NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Events: 3})
		p.Events[2].Seq++ // a gap inside the batch
		_, err := b.s.Commit(b.ctx, p)
		requireIs(t, err, store.ErrConflict, "Commit with a gap between its events")
		p = NextCommit(b.ctx, t, b.s, c.Run.ID, nil)
		p.Events[0].Seq = 0 // rewriting response.created
		_, err = b.s.Commit(b.ctx, p)
		requireIs(t, err, store.ErrConflict, "Commit reusing seq 0")
		requireSameState(t, ReadRunState(b.ctx, t, b.s, c.Run.ID), before, "commits with bad seq")
	})

	t.Run("RejectsNotHead", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		other := CreateResponse(b.ctx, t, b.s, nil)
		_, err := b.s.Commit(b.ctx, NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{ResponseID: other.Response.ID}))
		requireIs(t, err, store.ErrConflict, "Commit naming another run's response")
	})

	t.Run("RejectsUnknownRun", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		p := NextCommit(b.ctx, t, b.s, c.Run.ID, nil)
		p.RunID = "run_missing"
		_, err := b.s.Commit(b.ctx, p)
		requireIs(t, err, store.ErrNotFound, "Commit to an unknown run")
	})

	t.Run("RacingWritersOneWinsPerStep", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		const writers, steps = 4, 12
		wins := make([][]int, steps+1) // step -> winning writers
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for step := int64(1); step <= steps; step++ {
					p := &store.CommitParams{RunID: c.Run.ID, Epoch: c.Run.Lease.Epoch, Step: step, ResponseID: c.Response.ID,
						Status: store.StatusInProgress, Snapshot: []byte(`{}`),
						Checkpoint: []store.Part{{Name: "writer", Data: fmt.Appendf(nil, "w%d-s%d", w, step)}},
						Events:     []store.EventInput{{Seq: step, Type: "t", Payload: fmt.Appendf(nil, "w%d", w)}}}
					_, err := b.s.Commit(b.ctx, p)
					switch {
					case err == nil:
						mu.Lock()
						wins[step] = append(wins[step], w)
						mu.Unlock()
					case !errors.Is(err, store.ErrConflict):
						t.Errorf("writer %d step %d: %v, want nil or ErrConflict", w, step, err)
					}
				}
			})
		}
		wg.Wait()
		evs := ListAll(b.ctx, t, b.s, c.Response.ID)
		for step := int64(1); step <= steps; step++ {
			if len(wins[step]) != 1 {
				t.Fatalf("step %d won by %v, want exactly one writer", step, wins[step])
			}
			cp, err := b.s.CheckpointGet(b.ctx, c.Run.ID, step)
			requireNoError(t, err, "CheckpointGet")
			w := wins[step][0]
			if want := fmt.Sprintf("w%d-s%d", w, step); string(cp.Parts[0].Data) != want || string(evs[step].Payload) != fmt.Sprintf("w%d", w) {
				t.Fatalf("step %d: checkpoint %q, event %q, want writer %d's", step, cp.Parts[0].Data, evs[step].Payload, w)
			}
		}
	})

	t.Run("LargeCheckpointWritesOnlyChangedParts", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, &ResponseOpts{NoCheckpoint: true})
		parts := append(Parts(10, 1<<20, 1), store.Part{Name: "small", Data: bytes.Repeat([]byte("a"), 1024)})
		p := NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Checkpoint: parts})
		res, err := b.s.Commit(b.ctx, p)
		requireNoError(t, err, "Commit of 10 MB")
		if want := int64(10<<20 + 1024); res.BytesWritten != want {
			t.Fatalf("first commit BytesWritten = %d, want %d", res.BytesWritten, want)
		}
		for i := range 3 {
			parts[10].Data = bytes.Repeat([]byte{'b' + byte(i)}, 1024)
			res, err := b.s.Commit(b.ctx, NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Checkpoint: parts}))
			requireNoError(t, err, "Commit with 1 KB changed")
			if res.BytesWritten > 1024 {
				t.Fatalf("commit %d with 1 KB changed of 10 MB wrote %d checkpoint bytes", i, res.BytesWritten)
			}
		}
		last, err := b.s.CheckpointGetLast(b.ctx, c.Run.ID)
		requireNoError(t, err, "CheckpointGetLast")
		requireParts(t, last.Parts, parts)
		first, err := b.s.CheckpointGet(b.ctx, c.Run.ID, 1)
		requireNoError(t, err, "CheckpointGet(1)")
		requireParts(t, first.Parts[:10], parts[:10])
		if !bytes.Equal(first.Parts[10].Data, bytes.Repeat([]byte("a"), 1024)) {
			t.Fatal("checkpoint 1's changed part was overwritten")
		}
	})

	t.Run("SinglePartOf10MB", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		parts := Parts(1, 10<<20, 7)
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Checkpoint: parts})
		last, err := b.s.CheckpointGetLast(b.ctx, c.Run.ID)
		requireNoError(t, err, "CheckpointGetLast")
		requireParts(t, last.Parts, parts)
	})
}

// requireParts fails the test unless got and want hold the same parts in
// the same order.
func requireParts(t testing.TB, got, want []store.Part) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d parts, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Name != want[i].Name || !bytes.Equal(got[i].Data, want[i].Data) {
			t.Fatalf("part %d: got %q (%d bytes), want %q (%d bytes)", i, got[i].Name, len(got[i].Data), want[i].Name, len(want[i].Data))
		}
	}
}
