package noticehub

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/superstep/superstep/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A subscriber that falls behind misses notices, never blocks Publish, and
// is told to re-check (NoticeResync) before the next notice it gets.
func TestHub_OverflowResync(t *testing.T) {
	var h Hub
	ch := h.Subscribe(t.Context(), 2)
	for _, id := range []string{"a", "b", "dropped"} {
		h.Publish(store.Notice{Kind: store.NoticeCancel, RunID: id})
	}
	if a, b := <-ch, <-ch; a.RunID != "a" || b.RunID != "b" {
		t.Fatalf("first notices %+v %+v", a, b)
	}
	h.Publish(store.Notice{Kind: store.NoticeRunReady, RunID: "c"})
	if n := <-ch; n.Kind != store.NoticeResync {
		t.Fatalf("after an overflow got %+v, want a resync", n)
	}
	if n := <-ch; n.RunID != "c" {
		t.Fatalf("after the resync got %+v", n)
	}
}

// A subscription ends (its channel closes) with its context or the hub.
func TestHub_Close(t *testing.T) {
	var h Hub
	ctx, cancel := context.WithCancel(t.Context())
	byCtx := h.Subscribe(ctx, 4)
	byHub := h.Subscribe(t.Context(), 4)
	cancel()
	if _, ok := <-byCtx; ok {
		t.Fatal("channel open after its context ended")
	}
	h.Close()
	if _, ok := <-byHub; ok {
		t.Fatal("channel open after Close")
	}
	if _, ok := <-h.Subscribe(t.Context(), 1); ok {
		t.Fatal("subscription after Close is open")
	}
	h.Publish(store.Notice{Kind: store.NoticeResync}) // no subscribers, no panic
}
