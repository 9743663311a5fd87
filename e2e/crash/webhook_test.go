package crash

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/superstep/superstep/internal/testkit/pgtest"
	"github.com/superstep/superstep/internal/testkit/proctest"
	"github.com/superstep/superstep/internal/testkit/verifytest"
	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/webhook"
)

// TestCrash_Webhooks_SQLite SIGKILLs a server with webhooks on, at seeded
// moments of three kinds: at random under load, while the receiver holds
// a delivery (during delivery), and as soon as a streamed response's
// terminal event arrives (right after its terminal commit). A third of the
// way in, the receiver answers 500 for a few kills. Every kill checks
// that no response that has not finished was announced; the end checks
// that every finished response was accepted at least once, with one
// webhook-id across all its attempts, of the type its end calls for, all
// signatures valid, and `superstep check`.
func TestCrash_Webhooks_SQLite(t *testing.T) {
	t.Parallel()
	db := filepath.Join(proctest.WorkDir(t, *flagKeep, "superstep-webhooks"), "superstep.db")
	runWebhookCrash(t, &hookBackend{dbArg: db,
		open: func(ctx context.Context) (store.Store, error) { return sqlite.Open(ctx, db, nil) },
		read: func(ctx context.Context) (store.Store, error) { return sqlite.OpenReadOnly(ctx, db, nil) },
	}, hookKills())
}

// TestCrash_Webhooks_Postgres is TestCrash_Webhooks_SQLite on PostgreSQL,
// with fewer kills (a third): a killed host's runs and claimed deliveries
// wait for their leases to expire before the next host takes them.
func TestCrash_Webhooks_Postgres(t *testing.T) {
	t.Parallel()
	db := pgtest.Database(t, "superstep_webhooks")
	open := func(ctx context.Context) (store.Store, error) { return postgres.Open(ctx, db, nil) }
	runWebhookCrash(t, &hookBackend{dbArg: db, open: open, read: open, extraArgs: postgresServeArgs}, hookKills()/3)
}

// hookBackend is a database the webhook crash test runs on.
type hookBackend struct {
	dbArg string
	// open opens it while no server runs; read while one may.
	open, read func(ctx context.Context) (store.Store, error)
	extraArgs  []string
}

// hookRequest is one request the receiver got.
type hookRequest struct {
	webhookID string
	ev        protocol.WebhookEvent
	status    int
}

// hookReceiver is the test's webhook endpoint: it verifies every request
// and records it, answers 500 while down, and holds some requests for a
// while (a seeded share, and the next one after holdNext), so kills land
// during deliveries.
type hookReceiver struct {
	t        *testing.T
	verifier *webhook.Verifier
	sdk      openai.Client // OpenAI's Go SDK, which verifies them too
	srv      *httptest.Server
	held     chan struct{} // a held request arrived

	mu struct {
		sync.Mutex
		rng      *rand.Rand
		down     bool
		holdNext bool
		reqs     map[string][]hookRequest // by response id
	}
}

func newHookReceiver(t *testing.T, secret string, seed uint64) *hookReceiver {
	v, err := webhook.NewVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	r := &hookReceiver{t: t, verifier: v, held: make(chan struct{}, 1),
		sdk: openai.NewClient(option.WithAPIKey("unused"), option.WithWebhookSecret(secret))}
	r.mu.rng = rand.New(rand.NewPCG(seed, 0x400c))
	r.mu.reqs = map[string][]hookRequest{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return // the sender died mid-request
	}
	if err := r.verifier.Verify(req.Header, body); err != nil {
		r.t.Errorf("receiver: signature of %s: %v", body, err)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if err := r.sdk.Webhooks.VerifySignature(body, req.Header); err != nil {
		r.t.Errorf("receiver: openai-go refuses the signature of %s: %v", body, err)
	}
	var ev protocol.WebhookEvent
	if err := json.Unmarshal(body, &ev); err != nil || ev.Object != "event" || ev.ID != req.Header.Get(webhook.HeaderID) || ev.Data.ID == "" {
		r.t.Errorf("receiver: body %s (%v) is not an event whose id is webhook-id %q", body, err, req.Header.Get(webhook.HeaderID))
	}
	r.mu.Lock()
	status, hold := http.StatusNoContent, time.Duration(0)
	switch {
	case r.mu.down:
		status = http.StatusInternalServerError
	case r.mu.holdNext:
		r.mu.holdNext, hold = false, time.Duration(400+r.mu.rng.IntN(500))*time.Millisecond
	case r.mu.rng.IntN(5) == 0:
		hold = time.Duration(50+r.mu.rng.IntN(250)) * time.Millisecond
	}
	r.mu.reqs[ev.Data.ID] = append(r.mu.reqs[ev.Data.ID], hookRequest{webhookID: req.Header.Get(webhook.HeaderID), ev: ev, status: status})
	r.mu.Unlock()
	if hold > 0 {
		select {
		case r.held <- struct{}{}:
		default:
		}
		select {
		case <-time.After(hold):
		case <-req.Context().Done():
		}
	}
	w.WriteHeader(status)
}

func (r *hookReceiver) setDown(down bool) {
	r.mu.Lock()
	r.mu.down = down
	r.mu.Unlock()
}

func (r *hookReceiver) holdNext() {
	r.mu.Lock()
	r.mu.holdNext = true
	r.mu.Unlock()
	select { // forget an earlier held request
	case <-r.held:
	default:
	}
}

// requests returns a copy of what the receiver got, by response id.
func (r *hookReceiver) requests() map[string][]hookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]hookRequest, len(r.mu.reqs))
	for id, rs := range r.mu.reqs {
		out[id] = append([]hookRequest(nil), rs...)
	}
	return out
}

// hookChaos is the state of one webhook crash test.
type hookChaos struct {
	t      *testing.T
	b      *hookBackend
	cl     *cluster
	rcv    *hookReceiver
	rng    *rand.Rand
	seed   uint64
	kills  int
	modes  [3]int
	cancel []string // responses to cancel at the next round
}

// Kill modes.
const (
	killAtRandom = iota
	killDuringDelivery
	killAfterTerminal
)

// hookKills is how many kills the test makes: 30 with the default -kills.
func hookKills() int { return max(30, *flagKills*3/5) }

func runWebhookCrash(t *testing.T, b *hookBackend, kills int) {
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d, %d kills (replay: go test ./e2e/crash -run '^%s$' -seed %d -kills %d)", seed, kills, t.Name(), seed, *flagKills)
	dir := proctest.WorkDir(t, *flagKeep, "superstep-webhooks")
	secret := webhook.NewSecret()
	secretFile := filepath.Join(dir, "webhook-secret")
	if err := os.WriteFile(secretFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	rcv := newHookReceiver(t, secret, seed)
	args := append(append([]string(nil), b.extraArgs...), "--webhook-url", rcv.srv.URL, "--webhook-secret-file", secretFile,
		"--webhook-timeout", "2s")
	ch := &hookChaos{t: t, b: b, cl: newCluster(binary, b.dbArg, dir, args...), rcv: rcv, rng: rand.New(rand.NewPCG(seed, 0x400b)), seed: seed}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second+time.Duration(kills)*time.Second)
	defer cancel()
	t.Cleanup(ch.cl.killAtCleanup)
	if err := ch.cl.start(ctx); err != nil {
		t.Fatal(err)
	}
	for ch.kills < kills && ctx.Err() == nil {
		// A few kills a third of the way in find the receiver down.
		ch.rcv.setDown(ch.kills >= kills/3 && ch.kills < kills/3+max(1, kills/10))
		ch.round(ctx)
		ch.killOnce(ctx)
		ch.checkUnfinishedSilent(ctx)
		if err := ch.cl.start(ctx); err != nil {
			t.Fatalf("restart after kill %d: %v", ch.kills, err)
		}
	}
	ch.rcv.setDown(false)
	t.Logf("kills by mode (random, during delivery, after terminal): %v", ch.modes)
	ch.drain(ctx)
	if err := ch.cl.stop(30 * time.Second); err != nil {
		t.Error(err)
	}
	ch.verify(ctx)
	verifytest.CheckCommand(ctx, t, binary, b.dbArg)
}

// client returns an openai-go client of the running server.
func (ch *hookChaos) client(ctx context.Context) (*responsesClient, error) {
	base, err := ch.cl.current(ctx)
	if err != nil {
		return nil, err
	}
	c := newClient(ch.cl, base)
	return &responsesClient{c.Responses}, nil
}

type responsesClient struct{ responses.ResponseService }

// hookConfigs are the workloads: each ends its own way (completed,
// completed waiting for an answer, cancelled).
var hookConfigs = []config{
	{name: "echo", model: "demo.echo"},
	{name: "silent-3", model: "demo.silent", meta: map[string]string{"steps": "3"}},
	{name: "approval", model: "demo.approval"},
	{name: "cancel-silent-200", model: "demo.silent", meta: map[string]string{"steps": "200"}, cancel: true},
}

// round cancels the responses the last round marked, then creates one
// response of each workload (a create a kill cuts is simply lost, or
// found in the database at the end).
func (ch *hookChaos) round(ctx context.Context) {
	c, err := ch.client(ctx)
	if err != nil {
		return
	}
	for _, id := range ch.cancel {
		_, _ = c.Cancel(ctx, id) // a kill may have cut it: then the run completes
	}
	ch.cancel = ch.cancel[:0]
	for _, cfg := range hookConfigs {
		resp, err := c.New(ctx, cfg.params(2))
		if err == nil && cfg.cancel {
			ch.cancel = append(ch.cancel, resp.ID)
		}
	}
}

// killOnce kills the server in a seeded mode and counts it.
func (ch *hookChaos) killOnce(ctx context.Context) {
	mode := ch.rng.IntN(3)
	switch mode {
	case killAtRandom:
		sleep(ctx, time.Duration(ch.rng.IntN(300))*time.Millisecond)
	case killDuringDelivery:
		ch.rcv.holdNext()
		ch.waitHeld(ctx)
	case killAfterTerminal:
		ch.streamToTerminal(ctx)
	}
	if err := ch.cl.kill(); err != nil {
		ch.t.Fatal(err)
	}
	ch.kills++
	ch.modes[mode]++
}

// waitHeld creates responses until the receiver holds a delivery (or 3 s
// passed, or the receiver is down and holds none).
func (ch *hookChaos) waitHeld(ctx context.Context) {
	c, err := ch.client(ctx)
	if err != nil {
		return
	}
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		_, _ = c.New(ctx, hookConfigs[0].params(0))
		select {
		case <-ch.rcv.held:
			sleep(ctx, time.Duration(ch.rng.IntN(200))*time.Millisecond)
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// streamToTerminal streams a create and returns as soon as its terminal
// event arrived: its commit is durable, its webhook just enqueued.
func (ch *hookChaos) streamToTerminal(ctx context.Context) {
	c, err := ch.client(ctx)
	if err != nil {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st := c.NewStreaming(sctx, hookConfigs[1].params(0))
	defer st.Close()
	for st.Next() {
		switch st.Current().Type {
		case "response.completed", "response.failed", "response.incomplete":
			return
		}
	}
}

// checkUnfinishedSilent checks, while no server runs, that the receiver
// got nothing for any response that has not finished.
func (ch *hookChaos) checkUnfinishedSilent(ctx context.Context) {
	got := ch.rcv.requests()
	s, err := ch.b.open(ctx)
	if err != nil {
		ch.t.Fatalf("open the database after kill %d: %v", ch.kills, err)
	}
	defer s.Close()
	err = verifytest.ForEachResponse(ctx, s, func(_ *store.Run, r *store.Response) error {
		if !r.Finished() && len(got[r.ID]) > 0 {
			ch.t.Errorf("kill %d (seed %d): response %s is %s, not finished, but its webhook arrived: %+v", ch.kills, ch.seed, r.ID, r.Status, got[r.ID])
		}
		return nil
	})
	if err != nil {
		ch.t.Fatal(err)
	}
}

// drain waits until every response finished and no delivery is pending.
func (ch *hookChaos) drain(ctx context.Context) {
	deadline := time.Now().Add(45 * time.Second)
	for {
		open, pending, err := ch.outstanding(ctx)
		if err == nil && open == 0 && pending == 0 {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			ch.t.Fatalf("seed %d: after 45 s, %d responses not finished, %d deliveries pending (%v)", ch.seed, open, pending, err)
		}
		sleep(ctx, 200*time.Millisecond) // polling the database: the test has no signal of the server's progress
	}
}

// outstanding counts the responses not finished and the deliveries
// pending, reading the database the server runs on.
func (ch *hookChaos) outstanding(ctx context.Context) (open int, pending int64, err error) {
	s, err := ch.b.read(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer s.Close()
	err = verifytest.ForEachResponse(ctx, s, func(_ *store.Run, r *store.Response) error {
		if !r.Finished() {
			open++
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	c, err := s.(store.WebhookOutbox).WebhookCount(ctx)
	if err != nil {
		return 0, 0, err
	}
	return open, c.Pending, nil
}

// verify checks every response in the database against what the
// receiver got.
func (ch *hookChaos) verify(ctx context.Context) {
	t := ch.t
	got := ch.rcv.requests()
	s, err := ch.b.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seen := map[string]bool{}
	var finished, redelivered, recovered int
	types := map[string]int{}
	err = verifytest.ForEachResponse(ctx, s, func(_ *store.Run, r *store.Response) error {
		seen[r.ID] = true
		reqs := got[r.ID]
		if !r.Finished() {
			if len(reqs) > 0 {
				t.Errorf("response %s did not finish (%s) but its webhook arrived", r.ID, r.Status)
			}
			return nil
		}
		finished++
		want, err := expectedType(r)
		if err != nil {
			return err
		}
		accepted := false
		for i, q := range reqs {
			accepted = accepted || q.status/100 == 2
			if q.webhookID != reqs[0].webhookID || q.ev != reqs[0].ev {
				t.Errorf("response %s: attempt %d is %s %+v, attempt 1 was %s %+v: one event must keep its webhook-id and body",
					r.ID, i+1, q.webhookID, q.ev, reqs[0].webhookID, reqs[0].ev)
			}
			if q.ev.Type != want {
				t.Errorf("response %s (%s): event %s, want %s", r.ID, r.Status, q.ev.Type, want)
			}
		}
		if !accepted {
			t.Errorf("seed %d: response %s finished %s but its webhook was never accepted (%d requests)", ch.seed, r.ID, r.Status, len(reqs))
			return nil
		}
		types[want]++
		if len(reqs) > 1 {
			redelivered++
			if reqs[0].status == http.StatusInternalServerError {
				recovered++
			}
		}
		ds, err := s.(store.WebhookOutbox).WebhookList(ctx, &store.WebhookListParams{ResponseID: r.ID})
		if err != nil {
			return err
		}
		if len(ds) != 1 || ds[0].Status != store.WebhookDelivered || ds[0].EventID != reqs[0].webhookID {
			t.Errorf("response %s: outbox %+v, want one delivered delivery of event %s", r.ID, ds, reqs[0].webhookID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id := range got {
		if !seen[id] {
			t.Errorf("the receiver got an event about %s, which is not in the database", id)
		}
	}
	t.Logf("%d finished responses, events by type %v; %d delivered more than once, %d of them after 500s", finished, types, redelivered, recovered)
	if recovered == 0 {
		t.Errorf("seed %d: no event was refused with 500 and then delivered: the receiver's outage was not exercised", ch.seed)
	}
	for _, typ := range []string{protocol.WebhookCompleted, protocol.WebhookRequiresAction, protocol.WebhookCancelled} {
		if types[typ] == 0 {
			t.Errorf("seed %d: no %s event", ch.seed, typ)
		}
	}
}

// expectedType is the event type a finished response's snapshot calls
// for.
func expectedType(r *store.Response) (string, error) {
	var snap protocol.Response
	if err := json.Unmarshal(r.Snapshot, &snap); err != nil {
		return "", fmt.Errorf("response %s: snapshot: %w", r.ID, err)
	}
	typ, ok := protocol.WebhookEventType(&snap)
	if !ok {
		return "", fmt.Errorf("response %s: finished with status %s", r.ID, snap.Status)
	}
	return typ, nil
}
