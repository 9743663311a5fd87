package storetest

import (
	"context"
	"errors"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/fault"
	"github.com/superstep/superstep/store"
)

func testFault(t *testing.T, h Harness) {
	t.Parallel()

	t.Run("AllOrNothingAtEveryPoint", func(t *testing.T) {
		t.Parallel()
		if !fault.Enabled {
			t.Log("fault points are compiled out; build with -tags faults for the injected-failure loop " +
				"(the cancellation and group-commit cases below still check all-or-nothing)")
			return
		}
		b := h.setup(t)
		fired := map[string]bool{}
		for _, op := range faultOps(t, b) {
			faultLoop(t, h, b, op, fired)
		}
		var missing []string
		for _, name := range h.FaultPoints {
			if !fired[name] {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 || len(fired) == 0 {
			t.Fatalf("fault points never fired: %v (fired: %v)", missing, keys(fired))
		}
		t.Logf("fault points fired: %v", keys(fired))
	})

	t.Run("AllOrNothingUnderCancel", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		for i := range 30 {
			before := ReadRunState(b.ctx, t, b.s, c.Run.ID)
			p := NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Events: 3, Checkpoint: Parts(3, 2000, byte(i))})
			ctx, cancel := context.WithTimeout(b.ctx, time.Duration(i%10)*100*time.Microsecond)
			_, err := b.s.Commit(ctx, p)
			cancel()
			after := ReadRunState(b.ctx, t, b.s, c.Run.ID)
			if err != nil {
				requireSameState(t, after, before, "commit that returned "+err.Error())
				continue
			}
			if after.Run.LastStep != p.Step || len(after.Events[c.Response.ID]) != int(p.Events[2].Seq+1) {
				t.Fatalf("commit returned nil but is not visible: %s", after)
			}
		}
	})

	t.Run("GroupCommitFailsAlone", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		const runs = 12
		cs := make([]*store.ResponseCreateResult, runs)
		for i := range cs {
			cs[i] = CreateResponse(b.ctx, t, b.s, nil)
		}
		for round := range 3 {
			var wg sync.WaitGroup
			for i, c := range cs {
				wg.Go(func() {
					p := NextCommit(b.ctx, t, b.s, c.Run.ID, nil)
					bad := (i+round)%3 == 0
					if bad {
						p.Events[1].Seq += 5 // conflicts after the first event is valid
					}
					_, err := b.s.Commit(b.ctx, p)
					if bad != errors.Is(err, store.ErrConflict) || (!bad && err != nil) {
						t.Errorf("run %d round %d (bad %v): %v", i, round, bad, err)
					}
				})
			}
			wg.Wait()
		}
		for i, c := range cs {
			run, err := b.s.RunGet(b.ctx, c.Run.ID)
			requireNoError(t, err, "RunGet")
			good := int64(0)
			for round := range 3 {
				if (i+round)%3 != 0 {
					good++
				}
			}
			if run.LastStep != good {
				t.Fatalf("run %d at step %d, want %d", i, run.LastStep, good)
			}
		}
	})
}

// faultOp is one write of the injected-failure loop: read returns what the
// write may change, do performs it.
type faultOp struct {
	name string
	read func(b *bundle) any
	do   func(ctx context.Context, b *bundle) error
}

// faultOps returns the writes the loop exercises, over fixtures made here.
func faultOps(t *testing.T, b *bundle) []faultOp {
	c := CreateResponse(b.ctx, t, b.s, nil)
	Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Checkpoint: Parts(3, 1000, 1)})
	done := CreateResponse(b.ctx, t, b.s, nil)
	Commit(b.ctx, t, b.s, done.Run.ID, &CommitOpts{Status: store.StatusCompleted})
	state := func(runID string) func(b *bundle) any {
		return func(b *bundle) any { return ReadRunState(b.ctx, t, b.s, runID) }
	}
	rel := CreateResponse(b.ctx, t, b.s, nil)
	hook := CreateResponse(b.ctx, t, b.s, nil)
	newRun := ResponseParams(&ResponseOpts{Checkpoint: Parts(2, 500, 4)})
	cont := ResponseParams(&ResponseOpts{RunID: done.Run.ID, PreviousResponseID: done.Response.ID})
	var ops []faultOp
	if _, ok := b.s.(store.CreateCommitter); ok {
		c, p := createCommitParams(2, store.StatusCompleted)
		p.Release, p.PruneKeep = true, 1
		ops = append(ops, faultOp{"CreateCommit", state(c.RunID), func(ctx context.Context, b *bundle) error {
			_, _, err := b.s.(store.CreateCommitter).CreateCommit(ctx, c, p) // b.s: reopened every other time
			return err
		}})
	}
	if _, ok := b.s.(store.CreateJournaler); ok {
		cj := ResponseParams(&ResponseOpts{Checkpoint: Parts(2, 500, 5)})
		ops = append(ops, faultOp{"CreateJournalAppend", state(cj.RunID), func(ctx context.Context, b *bundle) error {
			_, err := b.s.(store.CreateJournaler).CreateJournalAppend(ctx, cj, &store.JournalAppendParams{RunID: cj.RunID, Step: 1,
				Entries: journalInputs("fault", 2)})
			return err
		}})
	}
	return append(ops, []faultOp{
		{"Commit", state(c.Run.ID), func(ctx context.Context, b *bundle) error {
			p := NextCommit(ctx, t, b.s, c.Run.ID, &CommitOpts{Events: 3, Checkpoint: append(Parts(2, 1000, 1), Parts(1, 1000, 7)...)})
			_, err := b.s.Commit(ctx, p)
			return err
		}},
		{"CommitRelease", state(rel.Run.ID), func(ctx context.Context, b *bundle) error {
			p := NextCommit(ctx, t, b.s, rel.Run.ID, &CommitOpts{Status: store.StatusCompleted})
			p.Release, p.PruneKeep = true, 1
			_, err := b.s.Commit(ctx, p)
			return err
		}},
		{"CommitWebhooks", withWebhooks(t, hook), func(ctx context.Context, b *bundle) error {
			p := NextCommit(ctx, t, b.s, hook.Run.ID, &CommitOpts{Status: store.StatusCompleted})
			p.Webhooks = webhooks("response.completed", 2)
			_, err := b.s.Commit(ctx, p)
			return err
		}},
		{"EventAppend", state(c.Run.ID), func(ctx context.Context, b *bundle) error {
			resp, err := b.s.ResponseGet(b.ctx, c.Response.ID)
			requireNoError(t, err, "ResponseGet")
			p := appendParams(c, resp.NextSeq, 2)
			p.Epoch = currentLease(t, b, c.Run.ID).Epoch
			return b.s.EventAppend(ctx, p)
		}},
		{"ResponseCreate", state(newRun.RunID), func(ctx context.Context, b *bundle) error {
			_, err := b.s.ResponseCreate(ctx, newRun)
			return err
		}},
		{"ResponseCreateContinuation", state(done.Run.ID), func(ctx context.Context, b *bundle) error {
			_, err := b.s.ResponseCreate(ctx, cont)
			return err
		}},
		{"CheckpointPrune", state(c.Run.ID), func(ctx context.Context, b *bundle) error {
			_, err := b.s.CheckpointPrune(ctx, &store.CheckpointPruneParams{RunID: c.Run.ID, KeepLast: 1})
			return err
		}},
		{"ResponseDelete", state(done.Run.ID), func(ctx context.Context, b *bundle) error {
			return b.s.ResponseDelete(ctx, done.Response.ID)
		}},
		{"ResponseDeleteLast", state(done.Run.ID), func(ctx context.Context, b *bundle) error {
			return b.s.ResponseDelete(ctx, cont.Response.ID)
		}},
		{"LeaseRelease", state(c.Run.ID), func(ctx context.Context, b *bundle) error {
			l := currentLease(t, b, c.Run.ID)
			return b.s.LeaseRelease(ctx, &store.LeaseParams{RunID: c.Run.ID, Owner: l.Owner, Epoch: l.Epoch})
		}},
	}...)
}

// faultLoop runs op with a failure injected at point i for i = 0, 1, 2, …
// until it succeeds with nothing injected (pebble's errorfs loop). After
// each failure it requires that nothing changed, rereading from a reopened
// store every other time.
func faultLoop(t *testing.T, h Harness, b *bundle, op faultOp, fired map[string]bool) {
	t.Helper()
	for i := 0; ; i++ {
		if i > 200 {
			t.Fatalf("%s: still failing after %d injected failures", op.name, i)
		}
		before := op.read(b)
		in := fault.NewInjector(i)
		err := op.do(fault.WithInjector(b.ctx, in), b)
		if in.Failed() == "" {
			requireNoError(t, err, op.name+" with nothing injected")
			if reflect.DeepEqual(op.read(b), before) {
				t.Fatalf("%s succeeded but changed nothing", op.name)
			}
			return
		}
		fired[in.Failed()] = true
		requireIs(t, err, fault.ErrInjected, op.name+" failing at "+in.Failed())
		after := op.read(b)
		if i%2 == 1 {
			h.reopen(t, b)
			after, before = withoutLeases(op.read(b)), withoutLeases(before)
		}
		if !reflect.DeepEqual(after, before) {
			t.Fatalf("%s failed at point %q but left changes:\n got  %v\n want %v", op.name, in.Failed(), after, before)
		}
		if i%2 == 1 {
			reclaim(t, b)
		}
	}
}

// currentLease reads the run's lease.
func currentLease(t *testing.T, b *bundle, runID string) store.Lease {
	t.Helper()
	run, err := b.s.RunGet(b.ctx, runID)
	requireNoError(t, err, "RunGet")
	return run.Lease
}

func keys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
