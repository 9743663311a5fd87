package storetest

import (
	"testing"

	"github.com/superstep/superstep/store"
)

// createJournaler returns b's store as a CreateJournaler, skipping the
// test for a backend that has none (the interface is optional).
func createJournaler(t *testing.T, b *bundle) store.CreateJournaler {
	t.Helper()
	cj, ok := b.s.(store.CreateJournaler)
	if !ok {
		t.Skipf("%T does not implement store.CreateJournaler", b.s)
	}
	return cj
}

func testCreateJournal(t *testing.T, h Harness) {
	t.Parallel()

	// CreateJournalAppend writes what ResponseCreate then JournalAppend
	// write, and returns what ResponseCreate returns: the entries are made
	// under the create's claim whatever p.Epoch says, and the run's first
	// commit then prunes them as any.
	t.Run("WritesAsCreateThenAppend", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		cj := createJournaler(t, b)
		j := journalOf(t, b)
		c := ResponseParams(nil)
		entries := journalInputs("model", 2)
		cr, err := cj.CreateJournalAppend(b.ctx, c, &store.JournalAppendParams{RunID: c.RunID, Epoch: 42, Step: 1, Entries: entries})
		requireNoError(t, err, "CreateJournalAppend")
		c2 := ResponseParams(nil)
		cr2, err := b.s.ResponseCreate(b.ctx, c2)
		requireNoError(t, err, "ResponseCreate")
		requireNoError(t, j.JournalAppend(b.ctx, &store.JournalAppendParams{RunID: c2.RunID, Epoch: cr2.Run.Lease.Epoch,
			Step: 1, Entries: entries}), "JournalAppend")

		requireAlike(t, anonymousResponse(cr.Response), anonymousResponse(cr2.Response), "the create's Response")
		requireAlike(t, anonymousRun(cr.Run), anonymousRun(cr2.Run), "the create's Run")
		if cr.Run.Lease.Epoch != store.NewRunEpoch || cr.Run.Lease.Owner != LeaseOwnerDefault {
			t.Fatalf("the create's claim %+v, want epoch %d by %s", cr.Run.Lease, store.NewRunEpoch, LeaseOwnerDefault)
		}
		requireAlike(t, anonymous(ReadRunState(b.ctx, t, b.s, c.RunID)), anonymous(ReadRunState(b.ctx, t, b.s, c2.RunID)), "the stored run")
		requireJournal(t, b, j, c.RunID, 1, store.NewRunEpoch, entries, "the journal")

		p := &store.CommitParams{RunID: c.RunID, ResponseID: c.Response.ID, Epoch: cr.Run.Lease.Epoch, Step: 1,
			Status: store.StatusCompleted, Snapshot: snapshot(c.Response.ID, store.StatusCompleted, 1), JournalPrune: true,
			Events: []store.EventInput{{Seq: 1, Type: "response.completed", Payload: payload("response.completed", 1)}}}
		_, err = b.s.Commit(b.ctx, p)
		requireNoError(t, err, "the first commit")
		requireJournal(t, b, j, c.RunID, 1, store.NewRunEpoch, nil, "the journal after the commit")
	})

	// Nothing is written when either half cannot be: a create that is no
	// new claimed run, entries of another run, entries of a step the new
	// run cannot journal (the create is undone), a create of a response
	// that exists (its run gets no entries).
	t.Run("AllOrNothing", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		cj := createJournaler(t, b)
		j := journalOf(t, b)
		entries := journalInputs("x", 1)

		c := ResponseParams(&ResponseOpts{NoLease: true})
		_, err := cj.CreateJournalAppend(b.ctx, c, &store.JournalAppendParams{RunID: c.RunID, Step: 1, Entries: entries})
		requireIs(t, err, store.ErrConflict, "an unclaimed create")
		requireNothingWritten(t, b, c, "an unclaimed create")

		c = ResponseParams(nil)
		_, err = cj.CreateJournalAppend(b.ctx, c, &store.JournalAppendParams{RunID: "run_other", Step: 1, Entries: entries})
		requireIs(t, err, store.ErrConflict, "entries of another run")
		requireNothingWritten(t, b, c, "entries of another run")

		c = ResponseParams(nil)
		_, err = cj.CreateJournalAppend(b.ctx, c, &store.JournalAppendParams{RunID: c.RunID, Step: 2, Entries: entries})
		requireIs(t, err, store.ErrConflict, "entries of step 2")
		requireNothingWritten(t, b, c, "entries of step 2")

		first := CreateResponse(b.ctx, t, b.s, nil)
		again := ResponseParams(&ResponseOpts{ID: first.Response.ID})
		_, err = cj.CreateJournalAppend(b.ctx, again, &store.JournalAppendParams{RunID: again.RunID, Step: 1, Entries: entries})
		if err == nil {
			t.Fatal("a create of an existing response was written")
		}
		requireJournal(t, b, j, again.RunID, 1, store.NewRunEpoch, nil, "the refused create's run")
		requireJournal(t, b, j, first.Run.ID, 1, first.Run.Lease.Epoch, nil, "the existing run")
	})
}
