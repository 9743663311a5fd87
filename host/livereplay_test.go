package host_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/localmodel"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/workflow"
)

// chunkModel is the local model server (real HTTP, Chat Completions)
// with two twists: request number hold (from 1) is held after holdAfter
// content chunks until release (the model is mid-stream when the test
// crashes the host), and, with rechunk, a request whose body it received
// before gets its second and third content chunks as one (the same text,
// cut otherwise: a remade call need not stream as the first one did), and
// with reword, such a request gets its content chunks after the first in
// upper case (other text: a model need not answer as it did).
type chunkModel struct {
	url       string
	next      http.Handler
	hold      int
	holdAfter int
	rechunk   bool
	reword    bool
	held      chan struct{}
	release   chan struct{}

	mu     sync.Mutex
	n      int
	bodies map[[32]byte]int
	order  [][32]byte
}

func startChunkModel(t *testing.T, hold, holdAfter int, rechunk, reword bool) *chunkModel {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &chunkModel{url: "http://" + ln.Addr().String(), next: localmodel.NewHandler(&localmodel.Options{TokenDelay: -1}),
		hold: hold, holdAfter: holdAfter, rechunk: rechunk, reword: reword, held: make(chan struct{}), release: make(chan struct{}),
		bodies: map[[32]byte]int{}}
	srv := &http.Server{Handler: m, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		m.free()
		_ = srv.Close()
	})
	return m
}

// free releases the held request (once).
func (m *chunkModel) free() {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.release:
	default:
		close(m.release)
	}
}

func (m *chunkModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	sum := sha256.Sum256(body)
	m.mu.Lock()
	m.n++
	n := m.n
	repeat := m.bodies[sum] > 0
	if !repeat {
		m.order = append(m.order, sum)
	}
	m.bodies[sum]++
	m.mu.Unlock()
	f := &sseFilter{w: w}
	var pending map[string]any // a content chunk waiting for the next one
	merged, written, chunks := false, 0, 0
	f.event = func(ev []byte) []byte {
		chunk, text, ok := contentChunk(ev)
		if !ok {
			out := ev
			if pending != nil {
				out = append(encodeChunk(pending), ev...)
				pending = nil
			}
			return out
		}
		chunks++
		if m.reword && repeat && chunks >= 2 {
			setContent(chunk, strings.ToUpper(text))
		}
		if m.rechunk && repeat && !merged && chunks >= 2 {
			if pending == nil {
				pending = chunk
				return nil
			}
			setContent(pending, contentOf(pending)+text)
			chunk, pending, merged = pending, nil, true
		}
		out := encodeChunk(chunk)
		written++
		if n == m.hold && written == m.holdAfter {
			_, _ = w.Write(out)
			w.(http.Flusher).Flush()
			close(m.held)
			select {
			case <-m.release:
			case <-r.Context().Done():
			}
			return nil
		}
		return out
	}
	m.next.ServeHTTP(f, r)
	if len(f.buf) > 0 {
		_, _ = w.Write(f.buf)
	}
}

// sends returns how many times each distinct request was received, in the
// order first received.
func (m *chunkModel) sends() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]int, len(m.order))
	for i, b := range m.order {
		out[i] = m.bodies[b]
	}
	return out
}

// sseFilter passes a handler's SSE events through event, one at a time.
type sseFilter struct {
	w     http.ResponseWriter
	buf   []byte
	event func(ev []byte) []byte
}

func (f *sseFilter) Header() http.Header  { return f.w.Header() }
func (f *sseFilter) WriteHeader(code int) { f.w.WriteHeader(code) }
func (f *sseFilter) Flush()               { f.w.(http.Flusher).Flush() }

func (f *sseFilter) Write(p []byte) (int, error) {
	f.buf = append(f.buf, p...)
	for {
		i := bytes.Index(f.buf, []byte("\n\n"))
		if i < 0 {
			return len(p), nil
		}
		ev := append([]byte(nil), f.buf[:i+2]...)
		f.buf = f.buf[i+2:]
		if out := f.event(ev); len(out) > 0 {
			if _, err := f.w.Write(out); err != nil {
				return 0, err
			}
		}
	}
}

// contentChunk decodes a Chat Completions chunk event carrying content.
func contentChunk(ev []byte) (map[string]any, string, bool) {
	data, ok := bytes.CutPrefix(bytes.TrimSpace(ev), []byte("data: "))
	if !ok {
		return nil, "", false
	}
	var chunk map[string]any
	if json.Unmarshal(data, &chunk) != nil {
		return nil, "", false
	}
	text := contentOf(chunk)
	return chunk, text, text != ""
}

func contentOf(chunk map[string]any) string {
	choices, _ := chunk["choices"].([]any)
	if len(choices) == 0 {
		return ""
	}
	c, _ := choices[0].(map[string]any)
	d, _ := c["delta"].(map[string]any)
	s, _ := d["content"].(string)
	return s
}

func setContent(chunk map[string]any, s string) {
	chunk["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)["content"] = s
}

func encodeChunk(chunk map[string]any) []byte {
	b, _ := json.Marshal(chunk)
	return append(append([]byte("data: "), b...), '\n', '\n')
}

// replayRig runs host incarnations one after the other over one database
// (a SQLite file, or a PostgreSQL schema), each on a fresh store handle
// whose writes stop at once when the test crashes it.
type replayRig struct {
	t        *testing.T
	backend  string
	path     string // SQLite file
	schema   string // PostgreSQL schema
	register func(*testing.T, *host.Host)
	cs       *crashStore
	h        *host.Host
	closeRaw func()
	reg      *prometheus.Registry // the running incarnation's metrics
	gen      int
}

func newReplayRig(t *testing.T, backend string, register func(*testing.T, *host.Host)) *replayRig {
	g := &replayRig{t: t, backend: backend, register: register}
	if backend == "sqlite" {
		g.path = filepath.Join(t.TempDir(), "h.db")
	} else {
		g.schema = pgSchema(t)
	}
	return g
}

// start starts the next incarnation; fault, if not nil, is its FaultFunc,
// given the incarnation's crashStore.
func (g *replayRig) start(fault func(cs *crashStore) func(context.Context, *host.Fault) error) *host.Host {
	t := g.t
	t.Helper()
	var raw store.Store
	if g.path != "" {
		raw = openStore(t, g.path)
	} else {
		raw = openPG(t, g.schema)
	}
	g.closeRaw = sync.OnceFunc(func() { _ = raw.Close() })
	t.Cleanup(g.closeRaw)
	g.gen++
	g.cs = &crashStore{Store: raw}
	cfg := host.Config{HostID: "h" + string(rune('0'+g.gen)), LeaseDuration: time.Second, CommitRetries: 1, CommitBackoff: time.Millisecond}
	if fault != nil {
		cfg.Test.FaultFunc = fault(g.cs)
	}
	g.reg = prometheus.NewRegistry()
	cfg.Metrics = g.reg
	g.h = newHost(t, journalCrashStore{crashStore: g.cs, j: raw.(store.Journal)}, &cfg, g.register)
	t.Cleanup(func() { shutdown(t, g.h) })
	return g.h
}

// crash stops the running incarnation's writes (a SIGKILL), lets model
// (if any) go on, and waits for its run to stop.
func (g *replayRig) crash(free func()) {
	g.cs.crashed.Store(true)
	if free != nil {
		free()
	}
	g.h.WaitRunExited(g.t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = g.h.Shutdown(ctx)
	shutdownOnce.Store(g.h, true)
	g.closeRaw() // the file's lock goes with the process
}

// waitLog waits until the response's durable log holds at least n text
// deltas, and returns the seq of its last event (what a client following
// it has seen once it caught up).
func waitLog(t *testing.T, s store.Store, id string, n int) int64 {
	t.Helper()
	ctx := testCtx(t)
	for {
		evs, err := s.EventList(ctx, &store.EventListParams{ResponseID: id, After: -1})
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, ev := range evs {
			if ev.Type == "response.output_text.delta" {
				got++
			}
		}
		if got >= n {
			return evs[len(evs)-1].Seq
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the log never held %d deltas (%d)", n, got)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// clientView is what a client reading a stream shows: per output index,
// the item's type and its text so far (a message's text; a tool call's
// name, arguments and output).
type clientView map[int]viewItem

type viewItem struct{ typ, text string }

// apply applies one event to the view.
func (v clientView) apply(e event) {
	switch e.Type {
	case "response.in_progress":
		clear(v)
		if e.Response != nil {
			for i, it := range e.Response.Output {
				v[i] = itemView(&it)
			}
		}
	case "response.output_item.added", "response.output_item.done":
		v[e.OutputIndex] = itemView(e.Item)
		if e.Type == "response.output_item.added" && e.Item.Type == "message" {
			v[e.OutputIndex] = viewItem{typ: "message"}
		}
	case "response.output_text.delta":
		it := v[e.OutputIndex]
		it.text += e.Delta
		v[e.OutputIndex] = it
	}
}

func itemView(it *wireItem) viewItem {
	if it.Type == "message" {
		text := ""
		for _, c := range it.Content {
			text += c.Text
		}
		return viewItem{typ: it.Type, text: text}
	}
	text := it.Name + it.Args
	if it.Output != nil {
		text += *it.Output
	}
	return viewItem{typ: it.Type, text: text}
}

// takeBacks follows a client that saw the events before, then read evs
// (the events after them) and returns the resets it received and how many
// characters it was shown that they took back: what the view held at a
// reset and the reset's republication did not show again (by item, the
// text beyond the common prefix). The republication is what the store
// wrote with the reset (its record) as the host re-publishes items: per
// item its added event, a message's content part and at most one delta
// (its text so far), and a closed item's done events; it ends at the first
// event that is none of those.
func takeBacks(t *testing.T, s store.Store, id string, before, evs []event) (resets, chars int) {
	t.Helper()
	recs, err := s.(store.EventRecordLister).EventRecords(testCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	v := clientView{}
	for _, e := range before {
		v.apply(e)
	}
	for i := 0; i < len(evs); i++ {
		e := evs[i]
		if e.Type != "response.in_progress" || e.SequenceNumber <= 1 {
			v.apply(e)
			continue
		}
		resets++
		was := clientView{}
		for k, it := range v {
			was[k] = it
		}
		v.apply(e)
		last := e.SequenceNumber // the end of the reset's record
		for _, r := range recs {
			if r.FirstSeq <= e.SequenceNumber && e.SequenceNumber <= r.LastSeq {
				last = r.LastSeq
			}
		}
		delta := map[int]bool{}
	republication:
		for i++; i < len(evs) && evs[i].SequenceNumber <= last; i++ {
			switch r := evs[i]; r.Type {
			case "response.output_text.delta":
				if delta[r.OutputIndex] {
					break republication
				}
				delta[r.OutputIndex] = true
			case "response.output_item.added", "response.content_part.added", "response.output_text.done",
				"response.content_part.done", "response.output_item.done":
			default:
				break republication
			}
			v.apply(evs[i])
		}
		for k, it := range was {
			now, ok := v[k]
			kept := 0
			if ok && now.typ == it.typ {
				for kept < len(it.text) && kept < len(now.text) && it.text[kept] == now.text[kept] {
					kept++
				}
			}
			chars += len(it.text) - kept
		}
		i-- // the event that ended the republication is applied next
	}
	return resets, chars
}

// toolAgent registers "replay.tools": a ChatAgent on model m calling its
// tool twice, then answering with text (three model calls), in live mode;
// tools counts the tool's executions per call id.
func toolAgent(m *chunkModel, mu *sync.Mutex, tools map[string]int) func(*testing.T, *host.Host) {
	return func(t *testing.T, h *host.Host) {
		calc := agent.MustTool("calculate", "computes", func(ctx context.Context, in struct {
			A float64 `json:"a"`
		}) (string, error) {
			mu.Lock()
			tools[workflow.InvocationFrom(ctx).ID+"/"+agent.ToolCallID(ctx)]++
			mu.Unlock()
			return "forty-two, which is the answer to the ultimate question of life", nil
		})
		a, err := agent.NewChatAgent(&agent.Options{Name: "assistant", BaseURL: m.url, APIKey: "test", Model: "local",
			Tools: []*agent.Tool{calc}, Metadata: map[string]string{"tool_calls": "2"}, Retry: agent.RetryPolicy{Retries: -1}})
		if err != nil {
			t.Fatal(err)
		}
		assistant := agent.Executor("assistant", a)
		wf, err := workflow.NewBuilder("replay.tools").SetStart(assistant).Outputs(assistant).Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := h.RegisterWorkflow("replay.tools", wf, host.WithPublication(host.PublicationLive)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHost_LiveReplay_AgentCrash: an agent turn of three model calls (two
// tool calls, then a text answer) runs live; the host crashes while the
// third call is streaming (3 of its deltas durable and seen). The
// recovering host answers the two finished calls from the journal, which
// reproduces their live events, and makes the third again.
//
//   - Identical: the third call streams as before. Nothing the client saw
//     is appended again and no reset is appended: a client resuming with
//     starting_after from the last event it saw gets the rest of the text.
//   - Rechunked: the remade call cuts its second and third chunks as one.
//     The same text: the same as Identical (the log is matched by text,
//     not by frame).
//   - Reworded: the remade call streams other text after its first chunk.
//     A single reset takes back only the text the client saw past where
//     the two agree; the two tool call items and the message up to there
//     are published again right after it, and the new text streams on.
//
// Identical and Rechunked end with the output of a crash-free run. Before
// the recovered superstep was matched against the log, every case got a
// reset taking back every item of the superstep (the tool calls included),
// and the whole superstep streamed again after it; before it was matched
// by text, Rechunked got a reset too.
func TestHost_LiveReplay_AgentCrash(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		for _, tc := range []struct {
			name            string
			rechunk, reword bool
		}{{"Identical", false, false}, {"Rechunked", true, false}, {"Reworded", false, true}} {
			t.Run(backend+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				m := startChunkModel(t, 3, 3, tc.rechunk, tc.reword)
				var mu sync.Mutex
				tools := map[string]int{}
				g := newReplayRig(t, backend, toolAgent(m, &mu, tools))
				h1 := g.start(nil)
				r := create(t, h1, "replay.tools", `calculate {"a":1}`, nil)
				select {
				case <-m.held:
				case <-testCtx(t).Done():
					t.Fatal("the third model request was never held")
				}
				seen := waitLog(t, g.cs.Store, r.ID, 3)
				before := collectUpTo(t, g.cs.Store, r.ID, seen)
				g.crash(m.free)

				h2 := g.start(nil)
				final := wait(t, h2, r.ID)
				if final.Status != store.StatusCompleted {
					t.Fatalf("final status %s", final.Status)
				}
				all := collect(t, h2, r.ID, -1)
				checkLog(t, all)
				requireCoherent(t, all)
				after := collect(t, h2, r.ID, seen)
				resets, taken := takeBacks(t, g.cs.Store, r.ID, before, after)
				t.Logf("%s: resets after the crash %d, characters taken back %d", tc.name, resets, taken)

				// Counted by the recovering host: resets made, and the
				// events it did not append again (every one the client saw
				// before the crash, past the last commit, at least up to
				// the in-flight call's first chunk).
				if got := metricSum(t, g.reg, "superstep_live_replay_resets_total"); got != float64(resets) {
					t.Errorf("resets counted %v, in the log %d", got, resets)
				}
				if got := metricSum(t, g.reg, "superstep_live_replay_matched_total"); got < 5 {
					t.Errorf("%v live events matched, want at least the 5 of the two tool calls and their results and of the message's first chunk", got)
				}
				seenText := strings.Join(deltas(before), "")
				out := snapshot(t, final).Output
				text := out[len(out)-1].Content[0].Text
				if !tc.reword {
					if resets != 0 {
						t.Fatalf("%d resets after the crash: %s", resets, types(after))
					}
					// The client's text continues where it was.
					if got := seenText + strings.Join(deltas(after), ""); got != text {
						t.Fatalf("text seen %q then %q, final text %q", seenText, strings.Join(deltas(after), ""), text)
					}
				} else {
					// The remade call streams its first chunk as before:
					// what the client saw past where the texts agree is
					// taken back, no more.
					p := 0
					for p < min(len(seenText), len(text)) && seenText[p] == text[p] {
						p++
					}
					if p < len(deltas(before)[0]) || p == len(seenText) {
						t.Fatalf("seen %q, final %q: the reworded call does not differ after its first chunk", seenText, text)
					}
					want := len(seenText) - p
					if resets != 1 || taken != want {
						t.Fatalf("%d resets taking back %d characters, want 1 taking back the %d the call in flight streamed past its first chunk: %s",
							resets, taken, want, types(after))
					}
					// Right after the reset: the two tool call items again,
					// then the message opened anew.
					i := slices.IndexFunc(after, func(e event) bool { return e.Type == "response.in_progress" })
					var again []string
					for _, e := range after[i+1:] {
						if e.Type == "response.output_item.added" {
							again = append(again, e.Item.Type)
						}
					}
					var saw []string
					for _, e := range before {
						if e.Type == "response.output_item.added" {
							saw = append(saw, e.Item.Type)
						}
					}
					if len(saw) != 3 || saw[0] == "message" || saw[1] == "message" || len(again) < 3 || !slices.Equal(again[:3], saw) {
						t.Fatalf("items added before the crash %q, after the reset %q", saw, again)
					}
				}
				// The finished calls were not made again; the one in
				// flight was, once.
				if got := m.sends(); !slices.Equal(got, []int{1, 1, 2}) {
					t.Errorf("sends of each distinct model request %v, want [1 1 2]", got)
				}
				mu.Lock()
				for id, n := range tools {
					if n != 1 {
						t.Errorf("tool call %s ran %d times", id, n)
					}
				}
				mu.Unlock()
				ref := create(t, h2, "replay.tools", `calculate {"a":1}`, nil)
				if got, want := itemTexts(snapshot(t, final)), itemTexts(snapshot(t, wait(t, h2, ref.ID))); !tc.reword && !slices.Equal(got, want) {
					t.Errorf("output after the crash %q, a crash-free run's %q", got, want)
				}
			})
		}
	}
}

// collectUpTo decodes the response's durable events 0..last from s.
func collectUpTo(t *testing.T, s store.Store, id string, last int64) []event {
	t.Helper()
	evs, err := s.EventList(testCtx(t), &store.EventListParams{ResponseID: id, After: -1, Limit: int(last + 1)})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]event, len(evs))
	for i, ev := range evs {
		if err := json.Unmarshal(ev.Payload, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestHost_LiveReplay_FewerFrames: the re-run of a crashed live superstep
// streams fewer frames than the interrupted attempt had (its executor is
// not deterministic: "a " where it streamed "a ", "b ", "c"), then
// commits. The frames it did not reproduce are void: one reset precedes
// the commit's frames, publishing again the message as far as the re-run
// streamed it, so what follows it is a complete history, and only "b c"
// is taken back. (Before, the reset came first and took back all of it.)
func TestHost_LiveReplay_FewerFrames(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			var attempts atomic.Int32
			register := func(t *testing.T, h *host.Host) {
				w := workflow.Func("writer", func(c *workflow.Context, _ string) error {
					toks, text := []string{"a ", "b ", "c"}, "a b c"
					if attempts.Add(1) > 1 {
						toks, text = []string{"a "}, "a "
					}
					for _, tok := range toks {
						if err := c.EmitLive(tok); err != nil {
							return err
						}
					}
					return c.Yield(text)
				})
				wf, err := workflow.NewBuilder("fewer").SetStart(w).Outputs(w).Build()
				if err != nil {
					t.Fatal(err)
				}
				if err := h.RegisterWorkflow("fewer", wf, host.WithPublication(host.PublicationLive)); err != nil {
					t.Fatal(err)
				}
			}
			g := newReplayRig(t, backend, register)
			crashed := make(chan struct{})
			h1 := g.start(func(cs *crashStore) func(context.Context, *host.Fault) error {
				var once sync.Once
				return func(_ context.Context, f *host.Fault) error {
					if f.Point != host.FaultCommitBefore {
						return nil
					}
					once.Do(func() { cs.crashed.Store(true); close(crashed) })
					return errCrashed
				}
			})
			r := create(t, h1, "fewer", "go", nil)
			select {
			case <-crashed:
			case <-testCtx(t).Done():
				t.Fatal("no commit was attempted")
			}
			seen := waitLog(t, g.cs.Store, r.ID, 3)
			before := collectUpTo(t, g.cs.Store, r.ID, seen)
			g.crash(nil)

			h2 := g.start(nil)
			final := wait(t, h2, r.ID)
			if final.Status != store.StatusCompleted {
				t.Fatalf("final status %s", final.Status)
			}
			all := collect(t, h2, r.ID, -1)
			checkLog(t, all)
			requireCoherent(t, all)
			after := collect(t, h2, r.ID, seen)
			resets, taken := takeBacks(t, g.cs.Store, r.ID, before, after)
			t.Logf("resets after the crash %d, characters taken back %d", resets, taken)
			if resets != 1 || taken != len("b c") {
				t.Fatalf("%d resets taking back %d characters, want 1 taking back %d: %s", resets, taken, len("b c"), types(after))
			}
			if got := outputs(all); !slices.Equal(got, []string{"a "}) {
				t.Fatalf("outputs %q", got)
			}
			// The reset is written with the commit, before its frames.
			if after[0].Type != "response.in_progress" || !terminal(after[len(after)-1].Type) {
				t.Fatalf("events after the crash %s", types(after))
			}
		})
	}
}

// TestHost_LiveReplay_Concurrent: three executors stream at once in one
// live superstep, their tokens interleaved; two finish (their completions
// journaled) and the host crashes while the third streams. On recovery the
// two finished ones are re-applied from the journal and stream nothing;
// the third runs again alone, streaming its tokens in another interleaving
// than the log's (none of the others between them), then more. Nothing
// the client saw is taken back: no reset, not even in the commit, which
// closes all three items; only the new text is appended. Before the log
// was matched item by item, the third executor's second token met another
// executor's frame at its seq, and a reset took everything back.
func TestHost_LiveReplay_Concurrent(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			// The first run's order of tokens: executor index, token.
			order := []struct {
				w   int
				tok string
			}{{0, "one "}, {1, "two "}, {2, "three "}, {0, "uno"}, {1, "dos"}, {2, "tres "}}
			var (
				mu    sync.Mutex
				cond  = sync.NewCond(&mu)
				turn  int
				runs  [3]atomic.Int32
				held  = make(chan struct{})
				freed = make(chan struct{})
			)
			register := func(t *testing.T, h *host.Host) {
				split := workflow.Map("split", func(c *workflow.Context, in string) (string, error) { return in, nil })
				var workers []workflow.Executor
				for i := range 3 {
					workers = append(workers, workflow.Func(fmt.Sprintf("w%d", i), func(c *workflow.Context, _ string) error {
						first := runs[i].Add(1) == 1
						var text string
						for k, o := range order {
							if o.w != i {
								continue
							}
							if first { // wait for this token's turn
								mu.Lock()
								for turn != k {
									cond.Wait()
								}
								mu.Unlock()
							}
							if err := c.EmitLive(o.tok); err != nil {
								return err
							}
							text += o.tok
							if first {
								mu.Lock()
								turn++
								cond.Broadcast()
								mu.Unlock()
							}
						}
						if i == 2 {
							if first {
								close(held)
								<-freed
								return errors.New("crashed")
							}
							if err := c.EmitLive("más"); err != nil {
								return err
							}
							text += "más"
						}
						return c.Yield(text)
					}, workflow.WithCompletionJournal()))
				}
				wf, err := workflow.NewBuilder("concurrent").SetStart(split).AddFanOut(split, workers).Outputs(workers...).Build()
				if err != nil {
					t.Fatal(err)
				}
				if err := h.RegisterWorkflow("concurrent", wf, host.WithPublication(host.PublicationLive)); err != nil {
					t.Fatal(err)
				}
			}
			g := newReplayRig(t, backend, register)
			h1 := g.start(nil)
			r := create(t, h1, "concurrent", "go", nil)
			select {
			case <-held:
			case <-testCtx(t).Done():
				t.Fatal("the third executor never streamed its tokens")
			}
			// The two finished executors' completions are journaled.
			js := g.cs.Store.(store.Journal)
			for {
				es, err := js.JournalList(testCtx(t), r.RunID, 2)
				if err != nil {
					t.Fatal(err)
				}
				if len(es) >= 2 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			seen := waitLog(t, g.cs.Store, r.ID, len(order))
			before := collectUpTo(t, g.cs.Store, r.ID, seen)
			g.crash(func() { close(freed) })

			h2 := g.start(nil)
			final := wait(t, h2, r.ID)
			if final.Status != store.StatusCompleted {
				t.Fatalf("final status %s", final.Status)
			}
			all := collect(t, h2, r.ID, -1)
			checkLog(t, all)
			requireCoherent(t, all)
			after := collect(t, h2, r.ID, seen)
			resets, taken := takeBacks(t, g.cs.Store, r.ID, before, after)
			t.Logf("resets after the crash %d, characters taken back %d; events after the crash %s", resets, taken, types(after))
			if resets != 0 || taken != 0 {
				t.Fatalf("%d resets taking back %d characters after the crash: %s", resets, taken, types(after))
			}
			if got := strings.Join(deltas(after), "|"); got != "más" {
				t.Fatalf("deltas appended after the crash %q, want only the new text", got)
			}
			if got := outputs(all); !slices.Equal(got, []string{"one uno", "two dos", "three tres más"}) {
				t.Fatalf("outputs %q", got)
			}
			if n0, n1, n2 := runs[0].Load(), runs[1].Load(), runs[2].Load(); n0 != 1 || n1 != 1 || n2 != 2 {
				t.Fatalf("executors ran %d, %d, %d times, want 1, 1, 2", n0, n1, n2)
			}
			if got := metricSum(t, g.reg, "superstep_live_replay_resets_total"); got != 0 {
				t.Errorf("resets counted %v", got)
			}
		})
	}
}
