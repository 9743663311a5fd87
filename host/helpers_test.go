package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
)

// testTimeout bounds every wait of a test.
const testTimeout = 30 * time.Second

// testCtx returns a context that ends with the test or after testTimeout.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// openStore opens (or reopens) the SQLite store at path.
func openStore(t *testing.T, path string) store.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	return s
}

// testBundle is what most tests work with.
type testBundle struct {
	path  string
	store store.Store
	host  *host.Host
}

// setupOpts tune setup.
type setupOpts struct {
	cfg   *host.Config
	wrap  func(store.Store) store.Store
	noReg bool
}

// setup opens a fresh SQLite store and a started host with the demos
// registered. At cleanup it shuts
// the host down, runs store.Check and closes the store.
func setup(t *testing.T, o *setupOpts) *testBundle {
	t.Helper()
	if o == nil {
		o = &setupOpts{}
	}
	path := filepath.Join(t.TempDir(), "host.db")
	raw := openStore(t, path)
	s := raw
	if o.wrap != nil {
		s = o.wrap(raw)
	}
	reg := registerDemos
	if o.noReg {
		reg = nil
	}
	h := newHost(t, s, o.cfg, reg)
	b := &testBundle{path: path, store: raw, host: h}
	t.Cleanup(func() {
		shutdown(t, b.host)
		if err := store.Check(context.Background(), b.store); err != nil {
			t.Errorf("store.Check: %v", err)
		}
		if err := b.store.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return b
}

// newHost returns a started host over s with models registered by register.
func newHost(t *testing.T, s store.Store, cfg *host.Config, register func(*testing.T, *host.Host)) *host.Host {
	t.Helper()
	var sink io.Writer = io.Discard
	if os.Getenv("HOST_TEST_LOG") != "" { // debugging aid
		sink = os.Stderr
	}
	c := host.Config{Logger: slog.New(slog.NewTextHandler(sink, nil)), CommitBackoff: time.Millisecond}
	if cfg != nil {
		c = *cfg
		if c.Logger == nil {
			c.Logger = slog.New(slog.NewTextHandler(sink, nil))
		}
	}
	h, err := host.New(s, &c)
	if err != nil {
		t.Fatalf("host.New: %v", err)
	}
	h.InitTestSignals()
	if register != nil {
		register(t, h)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return h
}

// registerDemos registers the demos natively and as agents.
func registerDemos(t *testing.T, h *host.Host) {
	t.Helper()
	if err := examples.Register(h); err != nil {
		t.Fatalf("examples.Register: %v", err)
	}
}

var shutdownOnce sync.Map

// shutdown shuts h down once.
func shutdown(t *testing.T, h *host.Host) {
	if _, done := shutdownOnce.LoadOrStore(h, true); done {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// create starts a response for model with text input and metadata.
func create(t *testing.T, h *host.Host, model, text string, md map[string]string) *store.Response {
	t.Helper()
	r, err := h.Create(testCtx(t), &host.CreateParams{Model: model, Store: true, Background: true, Stream: true,
		Metadata: md, Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: text}}})
	if err != nil {
		t.Fatalf("Create %s: %v", model, err)
	}
	return r
}

// event is the decoded payload of a stream event.
type event struct {
	Type           string        `json:"type"`
	SequenceNumber int64         `json:"sequence_number"`
	Response       *wireResponse `json:"response"`
	Item           *wireItem     `json:"item"`
	OutputIndex    int           `json:"output_index"`
	Delta          string        `json:"delta"`
	Text           string        `json:"text"`
	Arguments      string        `json:"arguments"`
}

type wireResponse struct {
	ID     string     `json:"id"`
	Status string     `json:"status"`
	Output []wireItem `json:"output"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Usage json.RawMessage `json:"usage"`
}

type wireItem struct {
	ID      string  `json:"id"`
	Type    string  `json:"type"`
	Status  string  `json:"status"`
	CallID  string  `json:"call_id"`
	Name    string  `json:"name"`
	Args    string  `json:"arguments"`
	Output  *string `json:"output"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// collect reads the response's events after `after` until the terminal one.
func collect(t *testing.T, h *host.Host, id string, after int64) []event {
	t.Helper()
	evs, err := collectErr(testCtx(t), h, id, after)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// collectErr is collect for goroutines other than the test's.
func collectErr(ctx context.Context, h *host.Host, id string, after int64) ([]event, error) {
	var out []event
	for ev, err := range h.Events(ctx, id, "", after) {
		if err != nil {
			return out, fmt.Errorf("events of %s: %w", id, err)
		}
		var e event
		if err := json.Unmarshal(ev.Payload, &e); err != nil {
			return out, fmt.Errorf("decode event %d: %w", ev.Seq, err)
		}
		if e.Type != ev.Type || e.SequenceNumber != ev.Seq {
			return out, fmt.Errorf("event %d: payload says %s/%d, log says %s/%d", ev.Seq, e.Type, e.SequenceNumber, ev.Type, ev.Seq)
		}
		out = append(out, e)
	}
	return out, nil
}

// checkLog asserts the lifecycle invariants of a complete event log: seq
// contiguous from 0, one response.created first, one terminal event last.
func checkLog(t *testing.T, evs []event) {
	t.Helper()
	if len(evs) < 2 {
		t.Fatalf("log has %d events", len(evs))
	}
	for i, e := range evs {
		if e.SequenceNumber != int64(i) {
			t.Fatalf("event %d has sequence_number %d", i, e.SequenceNumber)
		}
		created := e.Type == "response.created"
		if created != (i == 0) {
			t.Fatalf("response.created at %d", i)
		}
		if terminal(e.Type) != (i == len(evs)-1) {
			t.Fatalf("terminal event %s at %d of %d", e.Type, i, len(evs))
		}
	}
}

func terminal(typ string) bool {
	switch typ {
	case "response.completed", "response.failed", "response.incomplete", "response.cancelled":
		return true
	}
	return false
}

// outputs returns the texts of the message items completed in evs and the
// function calls as name(arguments).
func outputs(evs []event) []string {
	var out []string
	for _, e := range evs {
		if e.Type != "response.output_item.done" || e.Item == nil {
			continue
		}
		switch e.Item.Type {
		case "message":
			out = append(out, e.Item.Content[0].Text)
		case "function_call", "mcp_call":
			out = append(out, e.Item.Name+"("+e.Item.Args+")")
		}
	}
	return out
}

// types returns the event types of evs.
func types(evs []event) string {
	ts := make([]string, len(evs))
	for i, e := range evs {
		ts[i] = strings.TrimPrefix(e.Type, "response.")
	}
	return strings.Join(ts, " ")
}

// snapshot decodes a response's snapshot.
func snapshot(t *testing.T, r *store.Response) wireResponse {
	t.Helper()
	var w wireResponse
	if err := json.Unmarshal(r.Snapshot, &w); err != nil {
		t.Fatalf("decode snapshot: %v", err)
	}
	return w
}

// wait waits for the response to be terminal.
func wait(t *testing.T, h *host.Host, id string) *store.Response {
	t.Helper()
	r, err := h.Wait(testCtx(t), id, "")
	if err != nil {
		t.Fatalf("Wait %s: %v", id, err)
	}
	return r
}

// requireIs fails unless errors.Is(err, target).
func requireIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}
