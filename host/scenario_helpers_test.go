package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/verify"
)

// hostings are the ways every recovery scenario hosts a demo: there is one
// (RegisterWorkflow); a workflow-backed agent is not hosted as an agent.
var hostings = []struct{ name, prefix string }{{"Native", ""}}

// forEachHosting runs fn as a parallel subtest per hosting with the model
// name for the demo.
func forEachHosting(t *testing.T, demo string, fn func(t *testing.T, model string)) {
	t.Helper()
	for _, hs := range hostings {
		t.Run(hs.name, func(t *testing.T) {
			t.Parallel()
			fn(t, hs.prefix+demo)
		})
	}
}

// faultMode says what an armed fault does.
type faultMode int

const (
	modeFail  faultMode = iota // the point returns an error
	modeCrash                  // the process "dies" there: no write reaches the store any more
)

// faultRule arms a fault point.
type faultRule struct {
	point host.FaultPoint
	mode  faultMode
	times int                    // how many arrivals fire; 0 means 1
	match func(*host.Fault) bool // nil matches every arrival at point
}

var errInjected = errors.New("injected by the test")

// lockedBuffer is a log sink shared by the goroutines of several hosts.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// scenario runs one recovery scenario: a SQLite file that successive host
// incarnations (each a fresh store handle and a fresh Host) work on, the
// faults armed for them, the crashes they went through and the journal of
// the demo executors.
type scenario struct {
	t             *testing.T
	dir, path     string
	journal       string
	cfg           host.Config
	logs          *lockedBuffer
	crashFired    chan struct{}
	trackedMu     sync.Mutex
	tracked       map[string]string // response ID -> run ID
	rulesMu       sync.Mutex
	rules         []*faultRule
	fired         map[host.FaultPoint]int
	regs          []*prometheus.Registry
	marks         []verify.CrashMark
	incarnation   int
	upMu          sync.Mutex
	upCond        *sync.Cond
	up            bool
	cur           *incarnation
	crashedWrites atomic.Int64 // writes refused after crashes
	// register, when set, registers every incarnation's models instead
	// of the journaling demos.
	register func(*testing.T, *host.Host)
}

// incarnation is one "process": a store handle and the host over it.
type incarnation struct {
	cs   *crashStore
	raw  store.Store
	h    *host.Host
	gen  int
	down bool
}

// newScenario opens the file and starts the first incarnation. cfg's zero
// fields get test defaults (hour-long leases: no restart may wait for the
// dead incarnation's lease to expire).
func newScenario(t *testing.T, cfg host.Config) *scenario {
	t.Helper()
	return newScenarioWith(t, cfg, nil)
}

// newScenarioWith is newScenario with register (if not nil) registering
// every incarnation's models.
func newScenarioWith(t *testing.T, cfg host.Config, register func(*testing.T, *host.Host)) *scenario {
	t.Helper()
	dir := t.TempDir()
	sc := &scenario{t: t, dir: dir, path: filepath.Join(dir, "superstep.db"), journal: filepath.Join(dir, "journal"),
		cfg: cfg, logs: &lockedBuffer{}, crashFired: make(chan struct{}, 16), tracked: map[string]string{},
		fired: map[host.FaultPoint]int{}, register: register}
	sc.upCond = sync.NewCond(&sc.upMu)
	if sc.cfg.LeaseDuration == 0 {
		sc.cfg.LeaseDuration = time.Hour
	}
	if sc.cfg.CommitRetries == 0 {
		sc.cfg.CommitRetries = 2
	}
	if sc.cfg.CommitBackoff == 0 {
		sc.cfg.CommitBackoff = time.Millisecond
	}
	sc.start()
	t.Cleanup(sc.close)
	return sc
}

// arm adds a fault rule (for this and later incarnations).
func (sc *scenario) arm(r *faultRule) {
	sc.rulesMu.Lock()
	defer sc.rulesMu.Unlock()
	if r.times == 0 {
		r.times = 1
	}
	sc.rules = append(sc.rules, r)
}

// firedAt returns how many faults fired at p.
func (sc *scenario) firedAt(p host.FaultPoint) int {
	sc.rulesMu.Lock()
	defer sc.rulesMu.Unlock()
	return sc.fired[p]
}

// faultFunc is the FaultFunc of the incarnation over cs.
func (sc *scenario) faultFunc(cs *crashStore) func(context.Context, *host.Fault) error {
	return func(_ context.Context, f *host.Fault) error {
		sc.rulesMu.Lock()
		defer sc.rulesMu.Unlock()
		if cs.crashed.Load() {
			return errCrashed // a dead process reaches no point
		}
		for _, r := range sc.rules {
			if r.point != f.Point || r.times == 0 || (r.match != nil && !r.match(f)) {
				continue
			}
			r.times--
			sc.fired[f.Point]++
			if r.mode == modeCrash {
				cs.crashed.Store(true)
				sc.crashFired <- struct{}{}
			}
			return errInjected
		}
		return nil
	}
}

// start opens a fresh store handle on the file and starts a fresh host.
func (sc *scenario) start() {
	t := sc.t
	t.Helper()
	raw := openStore(t, sc.path)
	cs := &crashStore{Store: raw}
	sc.incarnation++
	cfg := sc.cfg
	cfg.HostID = fmt.Sprintf("h%d", sc.incarnation)
	cfg.Logger = slog.New(slog.NewTextHandler(sc.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).
		With("host", cfg.HostID)
	reg := prometheus.NewRegistry()
	cfg.Metrics = reg
	cfg.Test.FaultFunc = sc.faultFunc(cs)
	var h *host.Host
	if sc.register != nil {
		h = newHost(t, cs, &cfg, sc.register)
	} else {
		h = journalHost(t, cs, cfg, sc.journal)
	}
	sc.regs = append(sc.regs, reg)
	sc.upMu.Lock()
	sc.cur = &incarnation{cs: cs, raw: raw, h: h, gen: sc.incarnation}
	sc.up = true
	sc.upCond.Broadcast()
	sc.upMu.Unlock()
}

// host returns the running incarnation's host.
func (sc *scenario) host() *host.Host {
	sc.upMu.Lock()
	defer sc.upMu.Unlock()
	return sc.cur.h
}

// store returns the running incarnation's store handle.
func (sc *scenario) store() store.Store {
	sc.upMu.Lock()
	defer sc.upMu.Unlock()
	return sc.cur.raw
}

// current waits until an incarnation newer than `after` runs and returns
// its host and generation.
func (sc *scenario) current(ctx context.Context, after int) (*host.Host, int, error) {
	sc.upMu.Lock()
	defer sc.upMu.Unlock()
	for !sc.up || sc.cur.gen <= after {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		sc.upCond.Wait()
	}
	return sc.cur.h, sc.cur.gen, nil
}

// stop ends the running incarnation. With crash, its writes stop at once
// and its runs are interrupted wherever they are (a killed process);
// otherwise it shuts down gracefully. Then its store handle is closed.
func (sc *scenario) stop(crash bool) {
	t := sc.t
	t.Helper()
	sc.upMu.Lock()
	inc := sc.cur
	sc.up = false
	sc.upMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if crash {
		inc.cs.crashed.Store(true)
		cancel() // no grace: every run stops where it is
	}
	err := inc.h.Shutdown(ctx)
	cancel()
	if err != nil && !crash {
		t.Errorf("Shutdown: %v", err)
	}
	shutdownOnce.Store(inc.h, true)
	if err := inc.raw.Close(); err != nil {
		t.Errorf("close store: %v", err)
	}
	sc.crashedWrites.Add(inc.cs.refused.Load())
}

// restart stops the running incarnation (crashing it, or gracefully) and
// starts the next over a fresh handle. A crash is recorded for verify with
// the journal length and the runs' committed steps at that moment.
func (sc *scenario) restart(crash bool) {
	sc.t.Helper()
	sc.stop(crash)
	if crash {
		sc.mark()
	}
	sc.start()
}

// crashAtFault waits for an armed crash fault to fire, then restarts.
func (sc *scenario) crashAtFault() {
	sc.t.Helper()
	sc.waitCrash()
	sc.restart(true)
}

// waitCrash waits for an armed crash fault to fire.
func (sc *scenario) waitCrash() {
	sc.t.Helper()
	select {
	case <-sc.crashFired:
	case <-time.After(testTimeout):
		sc.t.Fatal("armed crash fault did not fire")
	}
}

// mark records a crash: read with a fresh handle, after the dead
// incarnation's goroutines stopped.
func (sc *scenario) mark() {
	t := sc.t
	t.Helper()
	s := openStore(t, sc.path)
	defer s.Close()
	m := verify.CrashMark{JournalLen: len(sc.journalEntries()), Committed: map[string]int64{}}
	sc.trackedMu.Lock()
	defer sc.trackedMu.Unlock()
	for resp, runID := range sc.tracked {
		run, err := s.RunGet(testCtx(t), runID)
		if err != nil {
			t.Fatalf("mark: run %s: %v", runID, err)
		}
		if run.HeadResponseID == resp {
			m.Committed[resp] = run.LastStep
		}
	}
	sc.marks = append(sc.marks, m)
}

// close shuts the last incarnation down and checks the store.
func (sc *scenario) close() {
	sc.upMu.Lock()
	inc := sc.cur
	sc.upMu.Unlock()
	if inc == nil {
		return
	}
	shutdown(sc.t, inc.h)
	if err := store.Check(context.Background(), inc.raw); err != nil {
		sc.t.Errorf("store.Check: %v", err)
	}
	_ = inc.raw.Close()
	if sc.t.Failed() {
		sc.t.Logf("host logs:\n%s", sc.logs.String())
	}
}

// track records a response for the crash marks.
func (sc *scenario) track(r *store.Response) {
	sc.trackedMu.Lock()
	defer sc.trackedMu.Unlock()
	sc.tracked[r.ID] = r.RunID
}

// create creates a background response on the running host and tracks it.
func (sc *scenario) create(model, text string, md map[string]string) *store.Response {
	r := create(sc.t, sc.host(), model, text, md)
	sc.track(r)
	return r
}

// journalEntries reads the executor journal.
func (sc *scenario) journalEntries() []verify.JournalEntry {
	sc.t.Helper()
	es, err := verify.ReadJournal(sc.journal)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		sc.t.Fatal(err)
	}
	return es
}

// metric sums a metric (with the given op label, if any) over every
// incarnation.
func (sc *scenario) metric(name, op string) float64 {
	sc.t.Helper()
	var sum float64
	for _, reg := range sc.regs {
		mfs, err := reg.Gather()
		if err != nil {
			sc.t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				if op != "" && !hasLabel(m.GetLabel(), "op", op) {
					continue
				}
				if c := m.GetCounter(); c != nil {
					sum += c.GetValue()
				}
			}
		}
	}
	return sum
}

// check runs verify over the given responses, their clients, the journal
// and the crashes, and fails the test with every violation.
func (sc *scenario) check(refs map[string]verify.Outcome, clients ...*client) {
	t := sc.t
	t.Helper()
	in := &verify.Input{Journal: &verify.Journal{Entries: sc.journalEntries(), Crashes: len(sc.marks), Marks: sc.marks}}
	for id, ref := range refs {
		rec, log, err := verify.Load(testCtx(t), sc.store(), id)
		if err != nil {
			t.Fatal(err)
		}
		ri := verify.ResponseInput{ID: id, Log: log, Record: rec, Reference: &ref}
		for _, c := range clients {
			if c.id == id {
				ri.Clients = append(ri.Clients, c.view)
			}
		}
		in.Responses = append(in.Responses, ri)
	}
	if err := verify.Check(in).Err(); err != nil {
		t.Fatalf("verify: %v", err)
	}
}

// waitDone waits for a response to be terminal on the running host.
func (sc *scenario) waitDone(id string) *store.Response {
	sc.t.Helper()
	return wait(sc.t, sc.host(), id)
}

// client follows one response across connections and incarnations, as an
// SDK client resuming with starting_after does.
type client struct {
	id   string
	view verify.ClientView
	last int64
	// cut, when not nil, is asked after each event whether the client
	// drops its connection there (it may reconnect later).
	cut func(e *store.Event) bool
}

// newClient returns a client of response id that starts from the beginning.
func newClient(name, id string) *client {
	return &client{id: id, last: -1, view: verify.ClientView{Name: name}}
}

var errCut = errors.New("client cut the connection")

// connect reads from h from the client's position until the terminal event
// (true), an error or a cut.
func (c *client) connect(ctx context.Context, h *host.Host) (bool, error) {
	if len(c.view.Events) > 0 || c.view.ResumedAt != nil || c.last >= 0 {
		c.view.ResumedAt = append(c.view.ResumedAt, c.last)
	}
	for ev, err := range h.Events(ctx, c.id, "", c.last) {
		if err != nil {
			return false, err
		}
		c.view.Events = append(c.view.Events, verify.ReceivedEvent{Seq: ev.Seq, Type: ev.Type, Data: ev.Payload})
		c.last = ev.Seq
		if terminal(ev.Type) {
			return true, nil
		}
		if c.cut != nil && c.cut(&ev) {
			return false, errCut
		}
	}
	return false, errors.New("stream ended without a terminal event")
}

// follow reconnects c until it saw the terminal event: at once to the
// running incarnation after a cut or a failed publication, to the next
// incarnation when the running one died under it.
func (sc *scenario) follow(ctx context.Context, c *client) error {
	after := -1
	for {
		h, gen, err := sc.current(ctx, after)
		if err != nil {
			return err
		}
		done, err := c.connect(ctx, h)
		switch {
		case done:
			return nil
		case errors.Is(err, errCut) || errors.Is(err, host.ErrInjected):
			after = -1
		default:
			after = gen
		}
	}
}

// followAsync follows c on a goroutine; the returned function waits for
// it and fails the test on error.
func (sc *scenario) followAsync(c *client) func() {
	ctx := testCtx(sc.t)
	done := make(chan error, 1)
	go func() { done <- sc.follow(ctx, c) }()
	// The condition variable does not see ctx: wake waiters when it ends.
	stop := context.AfterFunc(ctx, func() {
		sc.upMu.Lock()
		sc.upCond.Broadcast()
		sc.upMu.Unlock()
	})
	return func() {
		sc.t.Helper()
		err := <-done
		stop()
		if err != nil {
			sc.t.Fatalf("client %s: %v", c.view.Name, err)
		}
	}
}

// clientOutputs returns the output texts a client was shown.
func clientOutputs(t *testing.T, c *client) []string {
	t.Helper()
	evs := make([]event, 0, len(c.view.Events))
	for _, re := range c.view.Events {
		evs = append(evs, decodeEvent(t, re.Data))
	}
	return outputs(evs)
}

// requireLogged fails unless the logs contain every substring.
func (sc *scenario) requireLogged(subs ...string) {
	sc.t.Helper()
	logs := sc.logs.String()
	for _, s := range subs {
		if !strings.Contains(logs, s) {
			sc.t.Fatalf("logs lack %q:\n%s", s, logs)
		}
	}
}

// decodeEvent decodes an event payload.
func decodeEvent(t *testing.T, data []byte) event {
	t.Helper()
	var e event
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatalf("decode event: %v", err)
	}
	return e
}

// hasLabel reports whether labels hold name=value.
func hasLabel(labels []*dto.LabelPair, name, value string) bool {
	for _, l := range labels {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
