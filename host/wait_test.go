package host_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/store"
)

// waitReadsStore counts the store reads made on contexts marked with
// waitKey (the waiter's), whatever else the host reads meanwhile.
type waitReadsStore struct {
	store.Store
	reads atomic.Int64
}

type waitKey struct{}

func (s *waitReadsStore) ResponseGet(ctx context.Context, id string) (*store.Response, error) {
	if ctx.Value(waitKey{}) != nil {
		s.reads.Add(1)
	}
	return s.Store.ResponseGet(ctx, id)
}

func (s *waitReadsStore) EventWait(ctx context.Context, id string, after int64) error {
	if ctx.Value(waitKey{}) != nil {
		s.reads.Add(1)
	}
	return s.Store.EventWait(ctx, id, after)
}

// Waiting for a response whose run is driven here costs a read or two in
// all, not reads after every superstep: the waiter waits for the run's
// goroutine, and reads the finished response from the store once.
func TestHost_WaitLocalRunReadsOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be testDB) {
		s := &waitReadsStore{Store: be.open(t)}
		defer s.Close()
		h := newHost(t, s, nil, registerDemos)
		defer shutdown(t, h)
		r := create(t, h, examples.Silent, "x", map[string]string{"steps": "40", "step_delay_ms": "2"})
		final, err := h.Wait(context.WithValue(testCtx(t), waitKey{}, true), r.ID, "")
		if err != nil || final.Status != store.StatusCompleted {
			t.Fatalf("Wait: %v %v", final, err)
		}
		if n := s.reads.Load(); n > 3 {
			t.Fatalf("Wait made %d store reads for a 40-superstep run driven here", n)
		}
	})
}

// WaitStarted, given the response Create returned, reads nothing from the
// store while the run is driven here, and returns what Wait returns.
func TestHost_WaitStartedReadsNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be testDB) {
		s := &waitReadsStore{Store: be.open(t)}
		defer s.Close()
		h := newHost(t, s, nil, registerDemos)
		defer shutdown(t, h)
		r := create(t, h, examples.Silent, "x", map[string]string{"steps": "20", "step_delay_ms": "2"})
		final, err := h.WaitStarted(context.WithValue(testCtx(t), waitKey{}, true), r)
		if err != nil || final.Status != store.StatusCompleted {
			t.Fatalf("WaitStarted: %v %v", final, err)
		}
		if n := s.reads.Load(); n != 0 {
			t.Fatalf("WaitStarted made %d store reads for a run driven here", n)
		}
		stored, err := h.Wait(testCtx(t), r.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if string(final.Snapshot) != string(stored.Snapshot) || final.NextSeq != stored.NextSeq || final.CommitStep != stored.CommitStep {
			t.Fatalf("WaitStarted returned %s (next seq %d, step %d), the store has %s (%d, %d)",
				final.Snapshot, final.NextSeq, final.CommitStep, stored.Snapshot, stored.NextSeq, stored.CommitStep)
		}
	})
}

// WaitStarted of a response that finished and whose run left the host
// reads it from the store.
func TestHost_WaitStartedAfterTheRunLeft(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be testDB) {
		s := &waitReadsStore{Store: be.open(t)}
		defer s.Close()
		h := newHost(t, s, nil, registerDemos)
		defer shutdown(t, h)
		r := create(t, h, examples.Silent, "x", map[string]string{"steps": "2"})
		if _, err := h.Wait(testCtx(t), r.ID, ""); err != nil {
			t.Fatal(err)
		}
		h.WaitRunExited(t) // forgotten by the host
		final, err := h.WaitStarted(context.WithValue(testCtx(t), waitKey{}, true), r)
		if err != nil || final.Status != store.StatusCompleted {
			t.Fatalf("WaitStarted: %v %v", final, err)
		}
		if n := s.reads.Load(); n == 0 {
			t.Fatal("WaitStarted of a run no longer here read nothing from the store")
		}
	})
}
