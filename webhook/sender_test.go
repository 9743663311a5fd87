package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/store/storetest"
	"github.com/superstep/superstep/webhook"
)

// receiver is a webhook endpoint that verifies every request and records
// it; fail decides an answer's status from the event id and its attempt
// number (1 for the first request of the event).
type receiver struct {
	t        *testing.T
	verifier *webhook.Verifier
	srv      *httptest.Server
	fail     func(eventID string, attempt int) int
	mu       sync.Mutex
	got      map[string][]protocol.WebhookEvent
	arrived  chan string
}

func newReceiver(t *testing.T, secret string, fail func(string, int) int) *receiver {
	t.Helper()
	v, err := webhook.NewVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{t: t, verifier: v, fail: fail, got: map[string][]protocol.WebhookEvent{}, arrived: make(chan string, 100)}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if err := r.verifier.Verify(req.Header, body); err != nil {
		r.t.Errorf("receiver: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var ev protocol.WebhookEvent
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID != req.Header.Get(webhook.HeaderID) || ev.Object != "event" {
		r.t.Errorf("receiver: body %s (err %v) does not match webhook-id %s", body, err, req.Header.Get(webhook.HeaderID))
	}
	r.mu.Lock()
	r.got[ev.ID] = append(r.got[ev.ID], ev)
	n := len(r.got[ev.ID])
	r.mu.Unlock()
	status := http.StatusNoContent
	if r.fail != nil {
		status = r.fail(ev.ID, n)
	}
	w.WriteHeader(status)
	r.arrived <- ev.ID
}

func (r *receiver) attempts(eventID string) []protocol.WebhookEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]protocol.WebhookEvent(nil), r.got[eventID]...)
}

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "superstep.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// finish creates a response and commits it finished with one delivery
// of its event to url; it returns the delivery's event id.
func finish(t *testing.T, s store.Store, url string) (eventID, responseID string) {
	t.Helper()
	ctx := t.Context()
	c := storetest.CreateResponse(ctx, t, s, nil)
	p := storetest.NextCommit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{Status: store.StatusCompleted})
	p.Webhooks = []store.WebhookInput{{EventID: storetest.NewID("evt"), Type: protocol.WebhookCompleted, Endpoint: url}}
	if _, err := s.Commit(ctx, p); err != nil {
		t.Fatal(err)
	}
	return p.Webhooks[0].EventID, c.Response.ID
}

func startSender(t *testing.T, s store.WebhookOutbox, secret string, o webhook.Options) (*webhook.Sender, *prometheus.Registry) {
	t.Helper()
	sec, err := webhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	o.Secret, o.Owner, o.Metrics = sec, "host-test", reg
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Backoff == 0 {
		o.Backoff, o.BackoffMax = 20*time.Millisecond, 50*time.Millisecond
	}
	snd, err := webhook.New(s, &o)
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snd.Close() })
	return snd, reg
}

// waitStatus polls the outbox until the response's delivery has status.
func waitStatus(t *testing.T, s store.WebhookOutbox, responseID string, status store.WebhookStatus) *store.WebhookDelivery {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ds, err := s.WebhookList(t.Context(), &store.WebhookListParams{ResponseID: responseID})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 1 && ds[0].Status == status {
			return ds[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery of %s: %+v, want one %s", responseID, ds, status)
		}
		time.Sleep(10 * time.Millisecond) // polling the store: the sender reports no signal
	}
}

// TestSender_DeliversAfterFailures: a receiver that answers 500 twice
// gets the event a third time, with the same webhook-id and body, each
// request signed; the delivery ends delivered after 3 attempts.
func TestSender_DeliversAfterFailures(t *testing.T) {
	t.Parallel()
	secret := webhook.NewSecret()
	rcv := newReceiver(t, secret, func(_ string, n int) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	s := openStore(t)
	eventID, responseID := finish(t, s, rcv.srv.URL)
	snd, reg := startSender(t, s, secret, webhook.Options{})
	snd.Kick()
	d := waitStatus(t, s, responseID, store.WebhookDelivered)
	if d.Attempts != 3 {
		t.Fatalf("delivery = %+v, want delivered at attempt 3", d)
	}
	got := rcv.attempts(eventID)
	if len(got) != 3 {
		t.Fatalf("receiver got %d requests, want 3", len(got))
	}
	for _, ev := range got {
		if ev != got[0] || ev.Type != protocol.WebhookCompleted || ev.Data.ID != responseID {
			t.Fatalf("requests differ or name the wrong response: %+v", got)
		}
	}
	if n := metric(t, reg, "superstep_webhook_deliveries_total"); n != 1 {
		t.Errorf("deliveries_total = %v, want 1", n)
	}
	if n := metric(t, reg, "superstep_webhook_attempt_failures_total"); n != 2 {
		t.Errorf("attempt_failures_total = %v, want 2", n)
	}
}

// TestSender_GivesUp: a receiver that never accepts gets the event until
// the retry period ends; then the delivery is failed, counted, and not
// attempted again.
func TestSender_GivesUp(t *testing.T) {
	t.Parallel()
	secret := webhook.NewSecret()
	rcv := newReceiver(t, secret, func(string, int) int { return http.StatusServiceUnavailable })
	s := openStore(t)
	eventID, responseID := finish(t, s, rcv.srv.URL)
	_, reg := startSender(t, s, secret, webhook.Options{RetryFor: 200 * time.Millisecond})
	d := waitStatus(t, s, responseID, store.WebhookFailed)
	if d.DoneAt == nil || d.LastError == "" {
		t.Fatalf("failed delivery = %+v", d)
	}
	n := len(rcv.attempts(eventID))
	if n < 2 || n != d.Attempts {
		t.Fatalf("receiver got %d requests, the delivery counts %d attempts", n, d.Attempts)
	}
	if v := metric(t, reg, "superstep_webhook_failed_total"); v != 1 {
		t.Errorf("failed_total = %v, want 1", v)
	}
	time.Sleep(200 * time.Millisecond) // nothing may arrive after the end: no signal of an absence
	if m := len(rcv.attempts(eventID)); m != n {
		t.Fatalf("a failed delivery was attempted again (%d requests, then %d)", n, m)
	}
}

// TestSender_TakesOverExpiredClaim: a delivery claimed by a sender that
// died (never reported) is delivered by another once the claim expires.
func TestSender_TakesOverExpiredClaim(t *testing.T) {
	t.Parallel()
	secret := webhook.NewSecret()
	rcv := newReceiver(t, secret, nil)
	s := openStore(t)
	eventID, responseID := finish(t, s, rcv.srv.URL)
	dead, err := s.WebhookClaim(t.Context(), &store.WebhookClaimParams{Owner: "host-dead", Lease: 300 * time.Millisecond})
	if err != nil || len(dead) != 1 {
		t.Fatalf("claim by the dead host: %v, %v", dead, err)
	}
	startSender(t, s, secret, webhook.Options{Poll: 20 * time.Millisecond})
	d := waitStatus(t, s, responseID, store.WebhookDelivered)
	if d.Attempts != 2 || d.ClaimOwner != "host-test" {
		t.Fatalf("delivery = %+v, want delivered by host-test at attempt 2", d)
	}
	if n := len(rcv.attempts(eventID)); n != 1 {
		t.Fatalf("receiver got %d requests, want 1", n)
	}
}

// TestSender_CloseStopsInFlight: Close returns while a receiver holds an
// attempt, which is cancelled; the delivery stays pending (claimed) for
// the next sender.
func TestSender_CloseStopsInFlight(t *testing.T) {
	t.Parallel()
	secret := webhook.NewSecret()
	block := make(chan struct{})
	entered := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(block)
	s := openStore(t)
	_, responseID := finish(t, s, srv.URL)
	snd, _ := startSender(t, s, secret, webhook.Options{})
	<-entered
	snd.Close()
	// The cancelled attempt reported nothing: the delivery is still the
	// claim of its one attempt, with no failure recorded and no backoff,
	// to be sent again once the claim expires.
	d := waitStatus(t, s, responseID, store.WebhookPending)
	if d.Attempts != 1 || d.LastError != "" || d.ClaimOwner != "host-test" {
		t.Fatalf("after Close: attempts %d, last error %q, claim owner %q; want 1, none, host-test", d.Attempts, d.LastError, d.ClaimOwner)
	}
}

// metric returns the value of the counter name in reg (0 when absent).
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// TestSender_CloseNeverStarted: a Sender never started closes at once, also
// a second time (the first Close marked it started, so that no Start may
// follow; waiting on a loop that never ran would block forever).
func TestSender_CloseNeverStarted(t *testing.T) {
	sec, err := webhook.ParseSecret(webhook.NewSecret())
	if err != nil {
		t.Fatal(err)
	}
	snd, err := webhook.New(openStore(t), &webhook.Options{Secret: sec, Owner: "host-test", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		snd.Close()
		snd.Close()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close of a Sender never started blocked")
	}
	if err := snd.Start(t.Context()); err == nil {
		t.Fatal("Start after Close succeeded")
	}
}
