package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

// journalOf returns b's store as a store.Journal; every backend of this
// repository implements it.
func journalOf(t *testing.T, b *bundle) store.Journal {
	t.Helper()
	j, ok := b.s.(store.Journal)
	if !ok {
		t.Skipf("%T does not implement store.Journal", b.s)
	}
	return j
}

// journalInputs returns n entries whose keys and data name prefix.
func journalInputs(prefix string, n int) []store.JournalInput {
	out := make([]store.JournalInput, n)
	for i := range out {
		out[i] = store.JournalInput{Key: fmt.Sprintf("%s/%d", prefix, i), Hash: "h-" + prefix, Data: fmt.Appendf(nil, "data %s %d", prefix, i)}
	}
	return out
}

// requireJournal checks that the journal of (runID, step) holds want's
// keys and data, in order, appended under epoch.
func requireJournal(t *testing.T, b *bundle, j store.Journal, runID string, step, epoch int64, want []store.JournalInput, what string) {
	t.Helper()
	got, err := j.JournalList(b.ctx, runID, step)
	requireNoError(t, err, what+": JournalList")
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d: %+v", what, len(got), len(want), got)
	}
	for i, e := range got {
		w := want[i]
		if e.Key != w.Key || e.Hash != w.Hash || string(e.Data) != string(w.Data) || e.RunID != runID || e.Step != step || e.Epoch != epoch {
			t.Fatalf("%s: entry %d = %+v, want %+v at step %d epoch %d", what, i, e, w, step, epoch)
		}
		if i > 0 && e.Seq <= got[i-1].Seq {
			t.Fatalf("%s: entry %d has Seq %d after %d", what, i, e.Seq, got[i-1].Seq)
		}
	}
}

func testJournal(t *testing.T, h Harness) {
	t.Parallel()

	// Appends of one step come back in append order, across calls; other
	// runs' and steps' entries are apart.
	t.Run("Order", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		j := journalOf(t, b)
		c := CreateResponse(b.ctx, t, b.s, nil)
		other := CreateResponse(b.ctx, t, b.s, nil)
		epoch := c.Run.Lease.Epoch
		first, second := journalInputs("a", 3), journalInputs("b", 1)
		for _, es := range [][]store.JournalInput{first, second} {
			requireNoError(t, j.JournalAppend(b.ctx, &store.JournalAppendParams{RunID: c.Run.ID, Epoch: epoch, Step: 1, Entries: es}), "JournalAppend")
		}
		requireNoError(t, j.JournalAppend(b.ctx, &store.JournalAppendParams{RunID: other.Run.ID, Epoch: other.Run.Lease.Epoch,
			Step: 1, Entries: journalInputs("o", 2)}), "JournalAppend of another run")
		requireJournal(t, b, j, c.Run.ID, 1, epoch, append(first, second...), "run")
		requireJournal(t, b, j, other.Run.ID, 1, other.Run.Lease.Epoch, journalInputs("o", 2), "other run")
		requireJournal(t, b, j, c.Run.ID, 2, epoch, nil, "another step")
		requireJournal(t, b, j, "run_unknown", 1, epoch, nil, "unknown run")
	})

	// Fenced like EventAppend: a stale epoch, another owner's lease, an
	// expired lease; a step other than the next and an inactive run
	// conflict; an unknown run is not found. Nothing is stored by any.
	t.Run("Fenced", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		j := journalOf(t, b)
		c := CreateResponse(b.ctx, t, b.s, &ResponseOpts{LeaseDuration: time.Minute})
		old := c.Run.Lease.Epoch
		requireNoError(t, j.JournalAppend(b.ctx, &store.JournalAppendParams{RunID: c.Run.ID, Epoch: old, Step: 1,
			Entries: journalInputs("kept", 1)}), "JournalAppend under the lease")
		err := j.JournalAppend(b.ctx, &store.JournalAppendParams{RunID: c.Run.ID, Epoch: old, Step: 1,
			Entries: journalInputs("late", 1), Now: time.Now().Add(2 * time.Minute)})
		requireIs(t, err, store.ErrFenced, "append after the lease expired")
		err = j.JournalAppend(b.ctx, &store.JournalAppendParams{RunID: c.Run.ID, Epoch: old, Step: 2, Entries: journalInputs("x", 1)})
		requireIs(t, err, store.ErrConflict, "append for a step after the next")
		err = j.JournalAppend(b.ctx, &store.JournalAppendParams{RunID: "run_unknown", Epoch: 1, Step: 1, Entries: journalInputs("x", 1)})
		requireIs(t, err, store.ErrNotFound, "append to an unknown run")

		claimed, err := b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: "host-b", Duration: time.Minute, Now: time.Now().Add(2 * time.Minute)})
		requireNoError(t, err, "LeaseClaim by host-b")
		if len(claimed) != 1 || claimed[0].Lease.Epoch != old+1 {
			t.Fatalf("claimed %+v, want the run at epoch %d", claimed, old+1)
		}
		err = j.JournalAppend(b.ctx, &store.JournalAppendParams{RunID: c.Run.ID, Epoch: old, Step: 1, Entries: journalInputs("stale", 2)})
		requireIs(t, err, store.ErrFenced, "append at the stale epoch")
		// The new holder sees what the old one finished, and appends.
		requireJournal(t, b, j, c.Run.ID, 1, old, journalInputs("kept", 1), "after the stale appends")
		now := time.Now().Add(2*time.Minute + time.Second)
		requireNoError(t, j.JournalAppend(b.ctx, &store.JournalAppendParams{RunID: c.Run.ID, Epoch: old + 1, Step: 1,
			Entries: journalInputs("new", 1), Now: now}), "append by the new holder")
		got, err := j.JournalList(b.ctx, c.Run.ID, 1)
		requireNoError(t, err, "JournalList")
		if len(got) != 2 || got[0].Epoch != old || got[1].Epoch != old+1 || got[1].Key != "new/0" {
			t.Fatalf("journal %+v, want kept/0 at epoch %d then new/0 at %d", got, old, old+1)
		}

		// A finished run takes no journal.
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted, Epoch: old + 1, Now: now})
		err = j.JournalAppend(b.ctx, &store.JournalAppendParams{RunID: c.Run.ID, Epoch: old + 1, Step: 2,
			Entries: journalInputs("done", 1), Now: now})
		if !isFencedOrConflict(err) {
			t.Fatalf("append to a finished run: %v, want ErrConflict or ErrFenced", err)
		}
	})

	// The commit of step S with JournalPrune deletes the journal of steps
	// up to S in its own transaction; a commit without it, or a refused
	// one, deletes nothing.
	t.Run("PruneAtCommit", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		j := journalOf(t, b)
		c := CreateResponse(b.ctx, t, b.s, nil)
		epoch := c.Run.Lease.Epoch
		es := journalInputs("s1", 2)
		requireNoError(t, j.JournalAppend(b.ctx, &store.JournalAppendParams{RunID: c.Run.ID, Epoch: epoch, Step: 1, Entries: es}), "JournalAppend")

		stale := NextCommit(b.ctx, t, b.s, c.Run.ID, nil)
		stale.Epoch, stale.JournalPrune = epoch+1, true
		_, err := b.s.Commit(b.ctx, stale)
		requireIs(t, err, store.ErrFenced, "a commit at another epoch")
		requireJournal(t, b, j, c.Run.ID, 1, epoch, es, "after a refused commit")

		p := NextCommit(b.ctx, t, b.s, c.Run.ID, nil)
		p.JournalPrune = true
		_, err = b.s.Commit(b.ctx, p)
		requireNoError(t, err, "commit of step 1 with JournalPrune")
		requireJournal(t, b, j, c.Run.ID, 1, epoch, nil, "after the commit of step 1")

		// Step 2: a commit without JournalPrune keeps the journal (the
		// caller did not journal; nothing is written).
		es2 := journalInputs("s2", 1)
		requireNoError(t, j.JournalAppend(b.ctx, &store.JournalAppendParams{RunID: c.Run.ID, Epoch: epoch, Step: 2, Entries: es2}), "JournalAppend step 2")
		Commit(b.ctx, t, b.s, c.Run.ID, nil)
		requireJournal(t, b, j, c.Run.ID, 2, epoch, es2, "after a commit without JournalPrune")
		// The next commit with JournalPrune deletes what is left of
		// earlier steps too, and a terminal commit with checkpoint
		// pruning does both.
		requireNoError(t, j.JournalAppend(b.ctx, &store.JournalAppendParams{RunID: c.Run.ID, Epoch: epoch, Step: 3, Entries: journalInputs("s3", 1)}), "JournalAppend step 3")
		p = NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		p.JournalPrune, p.PruneKeep, p.Release = true, 1, true
		_, err = b.s.Commit(b.ctx, p)
		requireNoError(t, err, "terminal commit with JournalPrune")
		requireJournal(t, b, j, c.Run.ID, 2, epoch, nil, "step 2 after the commit of step 3")
		requireJournal(t, b, j, c.Run.ID, 3, epoch, nil, "step 3 after its commit")
	})

	// Deleting a run (its last response) deletes its journal.
	t.Run("DeleteRun", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		j := journalOf(t, b)
		c := CreateResponse(b.ctx, t, b.s, nil)
		keep := CreateResponse(b.ctx, t, b.s, nil)
		for _, r := range []*store.ResponseCreateResult{c, keep} {
			requireNoError(t, j.JournalAppend(b.ctx, &store.JournalAppendParams{RunID: r.Run.ID, Epoch: r.Run.Lease.Epoch, Step: 1,
				Entries: journalInputs("x", 2)}), "JournalAppend")
		}
		requireNoError(t, b.s.ResponseDelete(b.ctx, c.Response.ID), "ResponseDelete")
		requireJournal(t, b, j, c.Run.ID, 1, 0, nil, "deleted run")
		requireJournal(t, b, j, keep.Run.ID, 1, keep.Run.Lease.Epoch, journalInputs("x", 2), "other run")
		// A run created again under the same id starts with no journal.
		again := CreateResponse(b.ctx, t, b.s, &ResponseOpts{RunID: c.Run.ID})
		requireJournal(t, b, j, again.Run.ID, 1, 0, nil, "run created again")
	})

	// The journal survives a reopen (it is durable), as a recovering host
	// needs it to.
	t.Run("Reopen", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		es := journalInputs("d", 3)
		requireNoError(t, journalOf(t, b).JournalAppend(b.ctx, &store.JournalAppendParams{RunID: c.Run.ID, Epoch: c.Run.Lease.Epoch,
			Step: 1, Entries: es}), "JournalAppend")
		h.reopen(t, b)
		requireJournal(t, b, journalOf(t, b), c.Run.ID, 1, c.Run.Lease.Epoch, es, "after a reopen")
	})
}

func isFencedOrConflict(err error) bool {
	return err != nil && (errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrConflict))
}
