package storetest

import (
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

// testJournalBatch covers store.JournalBatcher: EventAppend with Journal
// entries stores the events and the entries together, under the events'
// fence, or neither.
func testJournalBatch(t *testing.T, h Harness) {
	t.Parallel()
	setup := func(t *testing.T) (*bundle, store.Journal) {
		b := h.setup(t)
		jb, ok := b.s.(store.JournalBatcher)
		if !ok || !jb.AppendsJournal() {
			t.Skipf("%T does not append journal entries with events", b.s)
		}
		return b, jb
	}
	// Both are stored; the entries after those appended before, at the
	// events' epoch.
	t.Run("Together", func(t *testing.T) {
		t.Parallel()
		b, j := setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		epoch := c.Run.Lease.Epoch
		first := journalInputs("plain", 1)
		requireNoError(t, j.JournalAppend(b.ctx, &store.JournalAppendParams{RunID: c.Run.ID, Epoch: epoch, Step: 1, Entries: first}), "JournalAppend")
		p := appendParams(c, 1, 2)
		p.Journal, p.JournalStep = journalInputs("batched", 2), 1
		requireNoError(t, b.s.EventAppend(b.ctx, p), "EventAppend with journal entries")
		if got := nextSeq(t, b, c.Response.ID); got != 3 {
			t.Fatalf("NextSeq %d after the append, want 3", got)
		}
		requireJournal(t, b, j, c.Run.ID, 1, epoch, append(first, p.Journal...), "journal")
	})

	// A refused append stores neither: a journal step that is not the
	// run's next (the events alone would fit), events that do not fit,
	// an expired lease.
	t.Run("NeitherWhenRefused", func(t *testing.T) {
		t.Parallel()
		b, j := setup(t)
		c := CreateResponse(b.ctx, t, b.s, &ResponseOpts{LeaseDuration: time.Minute})
		for _, tc := range []struct {
			what string
			p    func() *store.EventAppendParams
			want error
		}{
			{"a journal step after the next", func() *store.EventAppendParams {
				p := appendParams(c, 1, 2)
				p.Journal, p.JournalStep = journalInputs("x", 1), 2
				return p
			}, store.ErrConflict},
			{"events past the log's end", func() *store.EventAppendParams {
				p := appendParams(c, 5, 1)
				p.Journal, p.JournalStep = journalInputs("x", 1), 1
				return p
			}, store.ErrConflict},
			{"an expired lease", func() *store.EventAppendParams {
				p := appendParams(c, 1, 1)
				p.Journal, p.JournalStep, p.Now = journalInputs("x", 1), 1, time.Now().Add(2*time.Minute)
				return p
			}, store.ErrFenced},
		} {
			requireIs(t, b.s.EventAppend(b.ctx, tc.p()), tc.want, tc.what)
			if got := nextSeq(t, b, c.Response.ID); got != 1 {
				t.Fatalf("%s: NextSeq %d, want 1 (no event stored)", tc.what, got)
			}
			requireJournal(t, b, j, c.Run.ID, 1, c.Run.Lease.Epoch, nil, tc.what)
		}
	})
}
