package host_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/workflow"
)

var hookURLs = []string{"http://hooks.test/a", "http://hooks.test/b"}

// deliveries waits until the response's deliveries are in the outbox (a
// response reads as terminal to Wait slightly before a cancelled commit)
// and returns them.
func deliveries(t *testing.T, s store.Store, responseID string, want int) []*store.WebhookDelivery {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		ds, err := s.(store.WebhookOutbox).WebhookList(testCtx(t), &store.WebhookListParams{ResponseID: responseID})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) >= want || time.Now().After(deadline) {
			return ds
		}
		time.Sleep(5 * time.Millisecond) // polling the store: a test has no signal of it
	}
}

// requireEvent checks that ds are one event of type typ about responseID,
// one delivery per configured URL, all sharing its id.
func requireEvent(t *testing.T, ds []*store.WebhookDelivery, responseID, typ string) {
	t.Helper()
	if len(ds) != len(hookURLs) {
		t.Fatalf("response %s: %d deliveries, want %d: %+v", responseID, len(ds), len(hookURLs), ds)
	}
	for i, d := range ds {
		if d.Type != typ || d.ResponseID != responseID || d.Endpoint != hookURLs[i] || d.EventID != ds[0].EventID ||
			d.Status != store.WebhookPending || len(d.EventID) < len("evt_")+8 || d.EventID[:4] != "evt_" {
			t.Fatalf("delivery %d = %+v, want a pending %s of %s to %s sharing event id %s", i, d, typ, responseID, hookURLs[i], ds[0].EventID)
		}
	}
}

// TestHost_Webhooks_EventPerTerminalStatus: with WebhookURLs, the commit
// that finishes a response writes its event to every URL, typed by how it
// ended: completed, completed waiting for function_call answers
// (requires_action), failed, cancelled; and the sender is told.
func TestHost_Webhooks_EventPerTerminalStatus(t *testing.T) {
	t.Parallel()
	var kicks atomic.Int64
	b := setup(t, &setupOpts{cfg: &host.Config{WebhookURLs: hookURLs, WebhookEnqueued: func() { kicks.Add(1) },
		CommitBackoff: time.Millisecond}})
	ctx := testCtx(t)
	bad := workflow.Func("bad", func(*workflow.Context, string) error { return errors.New("boom") })
	wf, err := workflow.NewBuilder("failing").SetStart(bad).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.host.RegisterWorkflow("failing", wf); err != nil {
		t.Fatal(err)
	}

	done := create(t, b.host, examples.Echo, "hi", nil)
	wait(t, b.host, done.ID)
	requireEvent(t, deliveries(t, b.store, done.ID, 2), done.ID, protocol.WebhookCompleted)

	asks := create(t, b.host, examples.Approval, "deploy", nil)
	if got := wait(t, b.host, asks.ID); got.Status != store.StatusCompleted {
		t.Fatalf("approval ended %s, want completed with a pending request", got.Status)
	}
	requireEvent(t, deliveries(t, b.store, asks.ID, 2), asks.ID, protocol.WebhookRequiresAction)

	failed := create(t, b.host, "failing", "x", nil)
	if got := wait(t, b.host, failed.ID); got.Status != store.StatusFailed {
		t.Fatalf("failing workflow ended %s, want failed", got.Status)
	}
	requireEvent(t, deliveries(t, b.store, failed.ID, 2), failed.ID, protocol.WebhookFailed)

	long := create(t, b.host, examples.Silent, "x", map[string]string{"steps": "1000", "step_delay_ms": "5"})
	if ds := deliveries(t, b.store, long.ID, 0); len(ds) != 0 {
		t.Fatalf("deliveries of a running response: %+v", ds)
	}
	if _, err := b.host.Cancel(ctx, long.ID, ""); err != nil {
		t.Fatal(err)
	}
	requireEvent(t, deliveries(t, b.store, long.ID, 2), long.ID, protocol.WebhookCancelled)
	// WebhookEnqueued is called after the commit returned: the deliveries
	// are readable from the store a moment before (CI once read 3 here).
	deadline := time.Now().Add(testTimeout)
	for kicks.Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := kicks.Load(); n != 4 {
		t.Fatalf("WebhookEnqueued called %d times, want 4 (one per finished response)", n)
	}
}

// TestHost_Webhooks_Off: without WebhookURLs no commit writes a delivery.
func TestHost_Webhooks_Off(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	r := create(t, b.host, examples.Echo, "hi", nil)
	wait(t, b.host, r.ID)
	c, err := b.store.(store.WebhookOutbox).WebhookCount(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if *c != (store.WebhookCounts{}) {
		t.Fatalf("deliveries with webhooks off: %+v", c)
	}
}

// TestHost_Webhooks_NeedOutbox: WebhookURLs over a store without an
// outbox is refused at New.
func TestHost_Webhooks_NeedOutbox(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{noReg: true})
	if _, err := host.New(noOutbox{b.store}, &host.Config{WebhookURLs: hookURLs}); err == nil {
		t.Fatal("New with WebhookURLs over a store without an outbox succeeded")
	}
	if _, err := host.New(b.store, &host.Config{WebhookURLs: []string{""}}); err == nil {
		t.Fatal("New with an empty webhook URL succeeded")
	}
}

// noOutbox hides a store's optional interfaces.
type noOutbox struct{ store.Store }

// BenchmarkHost_EchoResponseWebhook is BenchmarkHost_EchoResponse with one
// webhook URL: the terminal commit also writes the response's delivery.
func BenchmarkHost_EchoResponseWebhook(b *testing.B) {
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	h, err := host.New(s, &host.Config{Logger: slog.New(slog.DiscardHandler), WebhookURLs: hookURLs[:1]})
	if err != nil {
		b.Fatal(err)
	}
	if err := examples.Register(h); err != nil {
		b.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Shutdown(ctx)
		_ = s.Close()
	})
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r, err := h.Create(context.Background(), &host.CreateParams{Model: examples.Echo, Store: true,
			Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "bench"}}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.Wait(context.Background(), r.ID, ""); err != nil {
			b.Fatal(err)
		}
	}
}
