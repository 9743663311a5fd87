package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

// appendParams returns the EventAppend of n events continuing resp's log.
func appendParams(c *store.ResponseCreateResult, from int64, n int) *store.EventAppendParams {
	p := &store.EventAppendParams{RunID: c.Run.ID, Epoch: c.Run.Lease.Epoch, ResponseID: c.Response.ID}
	for i := range int64(n) {
		p.Events = append(p.Events, store.EventInput{Seq: from + i, Type: "response.output_text.delta", Payload: payload("live", from+i)})
	}
	return p
}

// nextSeq is the NextSeq of response id as the store holds it.
func nextSeq(t *testing.T, b *bundle, id string) int64 {
	t.Helper()
	r, err := b.s.ResponseGet(b.ctx, id)
	requireNoError(t, err, "ResponseGet")
	return r.NextSeq
}

func testEventAppend(t *testing.T, h Harness) {
	t.Parallel()

	t.Run("ThenCommitContinues", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		requireNoError(t, b.s.EventAppend(b.ctx, appendParams(c, 1, 3)), "EventAppend")
		Commit(b.ctx, t, b.s, c.Run.ID, nil) // seq 4, 5
		evs := ListAll(b.ctx, t, b.s, c.Response.ID)
		if len(evs) != 6 || evs[1].Step != -1 || evs[3].Step != -1 || evs[4].Step != 1 {
			t.Fatalf("events = %+v", evs)
		}
		resp, err := b.s.ResponseGet(b.ctx, c.Response.ID)
		requireNoError(t, err, "ResponseGet")
		if resp.NextSeq != 6 {
			t.Fatalf("NextSeq = %d, want 6", resp.NextSeq)
		}
	})

	t.Run("RejectsStaleEpoch", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		p := appendParams(c, 1, 1)
		p.Epoch--
		err := b.s.EventAppend(b.ctx, p)
		requireIs(t, err, store.ErrFenced, "EventAppend at an old epoch")
	})

	t.Run("RejectsSeqGap", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		for _, from := range []int64{0, 2} {
			requireIs(t, b.s.EventAppend(b.ctx, appendParams(c, from, 2)), store.ErrConflict, fmt.Sprintf("EventAppend from seq %d, log at 1", from))
		}
		if evs := ListAll(b.ctx, t, b.s, c.Response.ID); len(evs) != 1 {
			t.Fatalf("log has %d events after rejected appends, want 1", len(evs))
		}
	})

	t.Run("RejectsInactiveRun", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		requireIs(t, b.s.EventAppend(b.ctx, appendParams(c, 3, 1)), store.ErrConflict, "EventAppend after the response completed")
	})

	t.Run("RejectsExpiredLeaseAndOldHead", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		p := appendParams(c, 1, 2)
		p.Now = time.Now().Add(LeaseDurationDefault + time.Minute) // past the lease
		requireIs(t, b.s.EventAppend(b.ctx, p), store.ErrFenced, "EventAppend after the lease expired")
		if got := nextSeq(t, b, c.Response.ID); got != 1 {
			t.Fatalf("NextSeq %d after a fenced append, want 1", got)
		}
		// The run goes on to a next response: appends to the old one are
		// refused, even though the old one is not final by itself.
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		next := CreateResponse(b.ctx, t, b.s, &ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID})
		old := appendParams(c, 3, 1)
		old.Epoch = next.Run.Lease.Epoch
		requireIs(t, b.s.EventAppend(b.ctx, old), store.ErrConflict, "EventAppend to a response that is no longer the run's head")
		requireNoError(t, b.s.EventAppend(b.ctx, appendParams(next, 1, 2)), "EventAppend to the new head")
		if got := nextSeq(t, b, c.Response.ID); got != 3 {
			t.Fatalf("old head's NextSeq %d, want 3", got)
		}
	})

	t.Run("RejectsUnknownRun", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		p := appendParams(c, 1, 1)
		p.RunID = "run_missing"
		requireIs(t, b.s.EventAppend(b.ctx, p), store.ErrNotFound, "EventAppend to an unknown run")
	})

	t.Run("ContiguousUnderConcurrentAppends", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		const appenders, each = 6, 15
		var wg sync.WaitGroup
		for a := range appenders {
			wg.Go(func() {
				for i := 0; i < each; {
					resp, err := b.s.ResponseGet(b.ctx, c.Response.ID)
					if err != nil {
						t.Errorf("ResponseGet: %v", err)
						return
					}
					p := appendParams(c, resp.NextSeq, 1)
					p.Events[0].Payload = fmt.Appendf(nil, "a%d-%d", a, i)
					switch err := b.s.EventAppend(b.ctx, p); {
					case err == nil:
						i++
					case !errors.Is(err, store.ErrConflict):
						t.Errorf("EventAppend: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		evs := ListAll(b.ctx, t, b.s, c.Response.ID)
		seen := map[string]bool{}
		for i, ev := range evs {
			if ev.Seq != int64(i) {
				t.Fatalf("event %d has seq %d", i, ev.Seq)
			}
			if i > 0 && seen[string(ev.Payload)] {
				t.Fatalf("payload %q appended twice", ev.Payload)
			}
			seen[string(ev.Payload)] = true
		}
		if len(evs) != 1+appenders*each {
			t.Fatalf("log holds %d events, want %d", len(evs), 1+appenders*each)
		}
	})

	t.Run("ConcurrentRunsAllSucceed", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		const runs, steps = 16, 5
		cs := make([]*store.ResponseCreateResult, runs)
		for i := range cs {
			cs[i] = CreateResponse(b.ctx, t, b.s, nil)
		}
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Go(func() {
				for step := int64(1); step <= steps; step++ {
					if err := b.s.EventAppend(b.ctx, appendParams(c, 2*step-1, 1)); err != nil {
						t.Errorf("EventAppend: %v", err)
						return
					}
					p := &store.CommitParams{RunID: c.Run.ID, Epoch: c.Run.Lease.Epoch, Step: step, ResponseID: c.Response.ID,
						Status: store.StatusInProgress, Events: []store.EventInput{{Seq: 2 * step, Type: "t", Payload: []byte("{}")}}}
					if _, err := b.s.Commit(b.ctx, p); err != nil {
						t.Errorf("Commit: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		for _, c := range cs {
			if evs := ListAll(b.ctx, t, b.s, c.Response.ID); len(evs) != 1+2*steps {
				t.Fatalf("run %s: %d events, want %d", c.Run.ID, len(evs), 1+2*steps)
			}
		}
	})
}

func testEventList(t *testing.T, h Harness) {
	t.Parallel()

	t.Run("AfterAndPaged", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		for range 5 {
			Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Events: 4})
		}
		all, err := b.s.EventList(b.ctx, &store.EventListParams{ResponseID: c.Response.ID, After: -1})
		requireNoError(t, err, "EventList")
		if len(all) != 21 {
			t.Fatalf("EventList(-1) = %d events, want 21", len(all))
		}
		page, err := b.s.EventList(b.ctx, &store.EventListParams{ResponseID: c.Response.ID, After: 9, Limit: 5})
		requireNoError(t, err, "EventList")
		if len(page) != 5 || page[0].Seq != 10 || page[4].Seq != 14 || page[0].ResponseID != c.Response.ID {
			t.Fatalf("EventList(after 9, limit 5) = %+v", page)
		}
		end, err := b.s.EventList(b.ctx, &store.EventListParams{ResponseID: c.Response.ID, After: 20})
		requireNoError(t, err, "EventList")
		if len(end) != 0 {
			t.Fatalf("EventList(after the last) = %+v, want none", end)
		}
	})

	t.Run("MaxBytesBoundsPages", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		sizes := []int{100, 5000, 1, 300, 300, 300, 9000, 20, 20, 20, 0, 4000, 999, 1, 1000}
		p := NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Events: len(sizes)})
		for i, n := range sizes {
			p.Events[i].Payload = bytes.Repeat([]byte{'a' + byte(i)}, n)
		}
		_, err := b.s.Commit(b.ctx, p)
		requireNoError(t, err, "Commit")
		all := ListAll(b.ctx, t, b.s, c.Response.ID)
		for _, bound := range []struct{ maxBytes, limit int }{{1000, 0}, {1, 0}, {1000, 2}, {100000, 0}} {
			var got []store.Event
			for after := int64(-1); ; {
				page, err := b.s.EventList(b.ctx, &store.EventListParams{ResponseID: c.Response.ID, After: after,
					Limit: bound.limit, MaxBytes: bound.maxBytes})
				requireNoError(t, err, "EventList")
				if len(page) == 0 {
					break
				}
				// The page is the longest prefix whose payloads before its
				// last event stay below the bound (the crossing event is
				// included), within Limit.
				rest := all[len(got):]
				want, size := 0, 0
				for want < len(rest) && (bound.limit <= 0 || want < bound.limit) && (want == 0 || size < bound.maxBytes) {
					size += len(rest[want].Payload)
					want++
				}
				if len(page) != want {
					t.Fatalf("MaxBytes %d Limit %d after %d: page of %d events, want %d", bound.maxBytes, bound.limit, after, len(page), want)
				}
				got = append(got, page...)
				after = page[len(page)-1].Seq
			}
			if len(got) != len(all) {
				t.Fatalf("MaxBytes %d Limit %d: paging read %d events, want %d", bound.maxBytes, bound.limit, len(got), len(all))
			}
			for i := range got {
				if got[i].Seq != int64(i) || !bytes.Equal(got[i].Payload, all[i].Payload) {
					t.Fatalf("MaxBytes %d Limit %d: event %d is seq %d", bound.maxBytes, bound.limit, i, got[i].Seq)
				}
			}
		}
	})

	t.Run("UnknownResponse", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		_, err := b.s.EventList(b.ctx, &store.EventListParams{ResponseID: "resp_missing", After: -1})
		requireIs(t, err, store.ErrNotFound, "EventList of an unknown response")
	})
}

func testEventWait(t *testing.T, h Harness) {
	t.Parallel()

	t.Run("ReturnsAtOnceWhenBehind", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		defer cancel()
		requireNoError(t, b.s.EventWait(ctx, c.Response.ID, -1), "EventWait(after -1) with one event")
	})

	t.Run("WakesOnCommit", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		waitFor(t, b, c.Response.ID, 0, func() { Commit(b.ctx, t, b.s, c.Run.ID, nil) })
	})

	t.Run("WakesOnAppend", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		waitFor(t, b, c.Response.ID, 0, func() {
			requireNoError(t, b.s.EventAppend(b.ctx, appendParams(c, 1, 1)), "EventAppend")
		})
	})

	t.Run("WakesOnDelete", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		waitFor(t, b, c.Response.ID, 0, func() {
			requireNoError(t, b.s.ResponseDelete(b.ctx, c.Response.ID), "ResponseDelete")
		})
	})

	t.Run("EndsWithContext", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		ctx, cancel := context.WithTimeout(b.ctx, 50*time.Millisecond)
		defer cancel()
		requireIs(t, b.s.EventWait(ctx, c.Response.ID, 0), context.DeadlineExceeded, "EventWait with nothing new")
	})

	t.Run("UnknownResponse", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		requireIs(t, b.s.EventWait(b.ctx, "resp_missing", 0), store.ErrNotFound, "EventWait on an unknown response")
	})
}

// waitFor starts EventWait(id, after) and requires that it keeps waiting
// until act runs (EventWait may return nil spuriously: then it is called
// again) and that it returns nil, with the log grown or the response gone,
// after act.
func waitFor(t *testing.T, b *bundle, id string, after int64, act func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		for {
			err := b.s.EventWait(ctx, id, after)
			if errors.Is(err, store.ErrNotFound) {
				// A spurious wake-up can bring the next wait after a delete.
				done <- nil
				return
			}
			if err != nil {
				done <- err
				return
			}
			evs, lerr := b.s.EventList(ctx, &store.EventListParams{ResponseID: id, After: after})
			if errors.Is(lerr, store.ErrNotFound) || len(evs) > 0 {
				done <- nil
				return
			}
		}
	}()
	select {
	case err := <-done:
		t.Fatalf("EventWait returned %v before anything happened", err)
	case <-time.After(20 * time.Millisecond):
	}
	act()
	requireNoError(t, <-done, "EventWait")
}
