package host_test

import (
	"testing"
	"time"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
)

func TestHost_Cancel(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := testCtx(t)
	r := create(t, b.host, examples.Silent, "x", map[string]string{"steps": "1000", "step_delay_ms": "2"})
	b.host.WaitCommitted(t)
	b.host.WaitCommitted(t)
	got, err := b.host.Cancel(ctx, r.ID, "")
	if err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	if got.Status != store.StatusCancelled || snapshot(t, got).Status != "cancelled" {
		t.Fatalf("cancel reply %s / %s", got.Status, snapshot(t, got).Status)
	}
	final := wait(t, b.host, r.ID)
	if final.Status != store.StatusCancelled || !final.CancelRequested {
		t.Fatalf("final %s cancel requested %v", final.Status, final.CancelRequested)
	}
	evs := collect(t, b.host, r.ID, -1)
	checkLog(t, evs)
	if last := evs[len(evs)-1]; last.Type != "response.cancelled" || last.Response.Status != "cancelled" {
		t.Fatalf("last event %s status %s", last.Type, last.Response.Status)
	}
	// Idempotent: a second cancel returns the same final response, and
	// nothing more is logged.
	again, err := b.host.Cancel(ctx, r.ID, "")
	if err != nil || again.Status != store.StatusCancelled || again.NextSeq != final.NextSeq {
		t.Fatalf("second cancel: %v %v", again, err)
	}
	// A finished response keeps its status.
	done := create(t, b.host, examples.Echo, "e", nil)
	wait(t, b.host, done.ID)
	got, err = b.host.Cancel(ctx, done.ID, "")
	if err != nil || got.Status != store.StatusCompleted {
		t.Fatalf("cancel of a completed response: %v %v", got, err)
	}
}

func TestHost_Cancel_Durable(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := testCtx(t)
	r := create(t, b.host, examples.Silent, "x", map[string]string{"steps": "1000", "step_delay_ms": "2"})
	b.host.WaitCommitted(t)
	if _, err := b.host.Cancel(ctx, r.ID, ""); err != nil {
		t.Fatal(err)
	}
	wait(t, b.host, r.ID)
	shutdown(t, b.host)
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, b.path)
	b.store = s // checked and closed at cleanup
	got, err := s.ResponseGet(ctx, r.ID)
	if err != nil || got.Status != store.StatusCancelled {
		t.Fatalf("after reopen: %v %v", got, err)
	}
	b.store = s
}

func TestHost_Delete(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := testCtx(t)
	done := create(t, b.host, examples.Echo, "e", nil)
	wait(t, b.host, done.ID)
	running := create(t, b.host, examples.Silent, "x", map[string]string{"steps": "1000", "step_delay_ms": "2"})
	b.host.WaitCommitted(t)
	for _, id := range []string{done.ID, running.ID} {
		if err := b.host.Delete(ctx, id, ""); err != nil {
			t.Fatalf("Delete %s: %v", id, err)
		}
		_, err := b.host.Get(ctx, id, "")
		requireIs(t, err, store.ErrNotFound)
		requireIs(t, b.host.Delete(ctx, id, ""), store.ErrNotFound)
	}
}

// A run nobody drives (its commits failed and it was handed back for
// recovery) is cancelled at once: Cancel claims it and commits the
// cancelled event itself.
func TestHost_Cancel_NoDriver(t *testing.T) {
	t.Parallel()
	fs := &failingStore{}
	fs.fail.Store(1 << 20)
	b := setup(t, &setupOpts{wrap: func(s store.Store) store.Store { fs.Store = s; return fs },
		cfg: &host.Config{CommitRetries: -1, LeaseDuration: time.Hour}})
	r := create(t, b.host, examples.Echo, "x", nil)
	b.host.WaitRunExited(t) // its commit and its failure commit both failed
	fs.fail.Store(0)        // the store works again
	got, err := b.host.Cancel(testCtx(t), r.ID, "")
	if err != nil || got.Status != store.StatusCancelled {
		t.Fatalf("cancel: %v %v", got, err)
	}
	final := wait(t, b.host, r.ID)
	evs := collect(t, b.host, r.ID, -1)
	checkLog(t, evs)
	if final.Status != store.StatusCancelled || types(evs) != "created cancelled" {
		t.Fatalf("final %s events %s", final.Status, types(evs))
	}
}
