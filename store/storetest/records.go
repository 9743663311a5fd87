package storetest

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

// recordLog writes a log of five records to a new response: the create
// (seq 0, step 0), a commit of 3 events (1-3, step 1), two live appends
// (4-5 and 6, step -1), a commit without events (step 2, no record) and a
// commit of 4 events (7-10, step 3). Payloads differ in size so that byte
// bounds fall inside and at the edges of records; one is nil and one
// empty. It returns the create result and the events a reader must see.
func recordLog(ctx context.Context, t *testing.T, s store.Store) (*store.ResponseCreateResult, []store.Event) {
	t.Helper()
	c := CreateResponse(ctx, t, s, nil)
	want := []store.Event{{ResponseID: c.Response.ID, Seq: 0, Type: "response.created", Payload: payload("response.created", 0), Step: 0}}
	add := func(step int64, n int) []store.EventInput {
		var in []store.EventInput
		for range n {
			seq := int64(len(want))
			ev := store.EventInput{Seq: seq, Type: fmt.Sprintf("type.%d", seq), Payload: bytes.Repeat([]byte{byte('a' + seq)}, int(seq*7%23))}
			switch seq {
			case 5:
				ev.Payload = nil
			case 8:
				ev.Payload = []byte{}
			}
			in = append(in, ev)
			want = append(want, store.Event{ResponseID: c.Response.ID, Seq: seq, Type: ev.Type, Payload: ev.Payload, Step: step})
		}
		return in
	}
	commit := func(step int64, n int) {
		p := NextCommit(ctx, t, s, c.Run.ID, &CommitOpts{NoEvents: true})
		p.Events = add(step, n)
		_, err := s.Commit(ctx, p)
		requireNoError(t, err, fmt.Sprintf("Commit step %d", step))
	}
	appendN := func(n int) {
		p := &store.EventAppendParams{RunID: c.Run.ID, Epoch: c.Run.Lease.Epoch, ResponseID: c.Response.ID, Events: add(-1, n)}
		requireNoError(t, s.EventAppend(ctx, p), "EventAppend")
	}
	commit(1, 3)
	appendN(2)
	appendN(1)
	commit(2, 0)
	commit(3, 4)
	return c, want
}

// requireEventsEqual fails unless got equals want event by event.
func requireEventsEqual(t testing.TB, got, want []store.Event, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events %v, want %d", what, len(got), seqs(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ResponseID != w.ResponseID || g.Seq != w.Seq || g.Type != w.Type || g.Step != w.Step || !bytes.Equal(g.Payload, w.Payload) {
			t.Fatalf("%s: event %d = {%s %d %q step %d %q}, want {%s %d %q step %d %q}", what, i,
				g.ResponseID, g.Seq, g.Type, g.Step, g.Payload, w.ResponseID, w.Seq, w.Type, w.Step, w.Payload)
		}
	}
}

func seqs(evs []store.Event) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Seq
	}
	return out
}

// records returns the response's records, skipping the test for a store
// that does not list them.
func records(ctx context.Context, t *testing.T, s store.Store, responseID string) []store.EventRecord {
	t.Helper()
	l, ok := s.(store.EventRecordLister)
	if !ok {
		t.Skip("store does not implement store.EventRecordLister")
	}
	recs, err := l.EventRecords(ctx, responseID)
	requireNoError(t, err, "EventRecords")
	return recs
}

func testEventRecords(t *testing.T, h Harness) {
	t.Parallel()

	t.Run("OneRecordPerWrite", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c, _ := recordLog(b.ctx, t, b.s)
		got := records(b.ctx, t, b.s, c.Response.ID)
		want := []store.EventRecord{{FirstSeq: 0, LastSeq: 0, Step: 0}, {FirstSeq: 1, LastSeq: 3, Step: 1},
			{FirstSeq: 4, LastSeq: 5, Step: -1}, {FirstSeq: 6, LastSeq: 6, Step: -1}, {FirstSeq: 7, LastSeq: 10, Step: 3}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("records %v, want %v (one per write with events, contiguous from 0)", got, want)
		}
	})

	t.Run("RejectedWritesAddNoRecord", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		requireIs(t, b.s.EventAppend(b.ctx, appendParams(c, 2, 3)), store.ErrConflict, "EventAppend leaving a gap")
		requireIs(t, b.s.EventAppend(b.ctx, appendParams(c, 0, 3)), store.ErrConflict, "EventAppend overlapping the log")
		p := NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Seq: 1})
		p.Events[1].Seq = 3
		_, err := b.s.Commit(b.ctx, p)
		requireIs(t, err, store.ErrConflict, "Commit whose events skip a seq")
		p = NextCommit(b.ctx, t, b.s, c.Run.ID, nil)
		p.Epoch--
		_, err = b.s.Commit(b.ctx, p)
		requireIs(t, err, store.ErrFenced, "Commit at a stale epoch")
		if got := records(b.ctx, t, b.s, c.Response.ID); len(got) != 1 || got[0] != (store.EventRecord{}) {
			t.Fatalf("records after rejected writes: %v, want only the create's [0, 0]", got)
		}
	})

	t.Run("EverySubRange", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c, want := recordLog(b.ctx, t, b.s)
		n := int64(len(want))
		for first := int64(0); first < n; first++ {
			for last := first; last < n; last++ {
				evs, err := b.s.EventList(b.ctx, &store.EventListParams{ResponseID: c.Response.ID, After: first - 1, Limit: int(last - first + 1)})
				requireNoError(t, err, "EventList")
				requireEventsEqual(t, evs, want[first:last+1], fmt.Sprintf("EventList of seqs %d..%d", first, last))
			}
		}
		for _, after := range []int64{n - 1, n, n + 100, 1<<32 + 5} {
			evs, err := b.s.EventList(b.ctx, &store.EventListParams{ResponseID: c.Response.ID, After: after})
			requireNoError(t, err, fmt.Sprintf("EventList after %d", after))
			if len(evs) != 0 {
				t.Fatalf("EventList after %d (log ends at %d): %v", after, n-1, seqs(evs))
			}
		}
	})

	t.Run("MaxBytesAcrossRecords", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c, want := recordLog(b.ctx, t, b.s)
		for first := range int64(len(want)) {
			total := 0
			for _, ev := range want[first:] {
				total += len(ev.Payload)
			}
			for maxBytes := 1; maxBytes <= total+1; maxBytes++ {
				for _, limit := range []int{0, 3} {
					expect := pageOf(want[first:], limit, maxBytes)
					evs, err := b.s.EventList(b.ctx, &store.EventListParams{ResponseID: c.Response.ID, After: first - 1, Limit: limit, MaxBytes: maxBytes})
					requireNoError(t, err, "EventList")
					requireEventsEqual(t, evs, expect, fmt.Sprintf("EventList from %d, limit %d, MaxBytes %d", first, limit, maxBytes))
				}
			}
		}
	})

	t.Run("DeleteRemovesWholeRanges", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c, _ := recordLog(b.ctx, t, b.s)
		other, otherWant := recordLog(b.ctx, t, b.s)
		requireNoError(t, b.s.ResponseDelete(b.ctx, c.Response.ID), "ResponseDelete")
		requireGoneAndReusable(b.ctx, t, b.s, c.Response.ID)
		requireEventsEqual(t, ListAll(b.ctx, t, b.s, other.Response.ID), otherWant, "the other response's log")
		if got := records(b.ctx, t, b.s, other.Response.ID); len(got) != 5 {
			t.Fatalf("the other response's records: %v, want its 5", got)
		}
	})

	t.Run("DeleteNewestRemovesWholeRanges", func(t *testing.T) {
		// The response created last is deleted: a backend that numbers
		// responses may give its number to the next one, which must not
		// inherit any record.
		t.Parallel()
		b := h.setup(t)
		c, _ := recordLog(b.ctx, t, b.s)
		requireNoError(t, b.s.ResponseDelete(b.ctx, c.Response.ID), "ResponseDelete")
		requireGoneAndReusable(b.ctx, t, b.s, c.Response.ID)
		next := CreateResponse(b.ctx, t, b.s, nil)
		if got := records(b.ctx, t, b.s, next.Response.ID); len(got) != 1 || got[0] != (store.EventRecord{}) {
			t.Fatalf("records of the next response: %v, want only its create's [0, 0]", got)
		}
	})

	t.Run("PruneRemovesWholeRanges", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		pr, ok := b.s.(store.ResponsePruner)
		if !ok {
			t.Skip("store does not implement store.ResponsePruner")
		}
		live, liveWant := recordLog(b.ctx, t, b.s)
		c, _ := recordLog(b.ctx, t, b.s)
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		n, err := pr.ResponsePrune(b.ctx, &store.ResponsePruneParams{Before: time.Now().Add(time.Hour)})
		if err != nil || n != 1 {
			t.Fatalf("ResponsePrune: %d, %v; want 1", n, err)
		}
		requireGoneAndReusable(b.ctx, t, b.s, c.Response.ID)
		requireEventsEqual(t, ListAll(b.ctx, t, b.s, live.Response.ID), liveWant, "the live response's log")
	})
}

// pageOf is the page EventList must return from evs (which start right
// after After) with limit and maxBytes.
func pageOf(evs []store.Event, limit, maxBytes int) []store.Event {
	if limit <= 0 {
		limit = store.EventListLimitDefault
	}
	size := 0
	for i, ev := range evs {
		size += len(ev.Payload)
		if i+1 >= limit || size >= maxBytes {
			return evs[:i+1]
		}
	}
	return evs
}

// requireGoneAndReusable requires that a deleted response's log is gone
// and that a response created again under its ID starts an empty log: no
// record of the deleted one is left to show in it.
func requireGoneAndReusable(ctx context.Context, t *testing.T, s store.Store, id string) {
	t.Helper()
	_, err := s.EventList(ctx, &store.EventListParams{ResponseID: id, After: -1})
	requireIs(t, err, store.ErrNotFound, "EventList of the deleted response")
	if l, ok := s.(store.EventRecordLister); ok {
		_, err := l.EventRecords(ctx, id)
		requireIs(t, err, store.ErrNotFound, "EventRecords of the deleted response")
	}
	again := CreateResponse(ctx, t, s, &ResponseOpts{ID: id})
	evs := ListAll(ctx, t, s, again.Response.ID)
	if len(evs) != 1 || evs[0].Seq != 0 || evs[0].Step != 0 {
		t.Fatalf("log of a response created again as %s: %v, want only its seq 0", id, seqs(evs))
	}
	if got := records(ctx, t, s, id); len(got) != 1 || got[0] != (store.EventRecord{}) {
		t.Fatalf("records of a response created again as %s: %v, want only [0, 0]", id, got)
	}
}
