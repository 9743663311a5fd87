package host_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"maps"
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
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/workflow"
)

// gatedModel is the local model server (real HTTP) counting the requests
// it receives by body; the request numbered hold (from 1) waits for
// release before it is answered.
type gatedModel struct {
	url     string
	next    http.Handler
	hold    int
	held    chan struct{} // closed when request hold arrived
	release chan struct{}

	mu     sync.Mutex
	n      int
	bodies [][32]byte
}

func startGatedModel(t *testing.T, hold int) *gatedModel {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &gatedModel{url: "http://" + ln.Addr().String(), next: localmodel.NewHandler(&localmodel.Options{TokenDelay: -1}),
		hold: hold, held: make(chan struct{}), release: make(chan struct{})}
	srv := &http.Server{Handler: m, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		select {
		case <-m.release:
		default:
			close(m.release)
		}
		_ = srv.Close()
	})
	return m
}

func (m *gatedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	m.mu.Lock()
	m.n++
	n := m.n
	m.bodies = append(m.bodies, sha256.Sum256(body))
	m.mu.Unlock()
	if n == m.hold {
		close(m.held)
		<-m.release
	}
	m.next.ServeHTTP(w, r)
}

// sends returns how many times each distinct request was received, in
// the order first received.
func (m *gatedModel) sends() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var order [][32]byte
	count := map[[32]byte]int{}
	for _, b := range m.bodies {
		if count[b] == 0 {
			order = append(order, b)
		}
		count[b]++
	}
	out := make([]int, len(order))
	for i, b := range order {
		out[i] = count[b]
	}
	return out
}

// journalCrashStore is a crashStore that keeps the raw store's journal,
// refusing appends once crashed like every other write.
type journalCrashStore struct {
	*crashStore
	j     store.Journal
	lists *atomic.Int64 // JournalList calls, when not nil
}

func (s journalCrashStore) JournalAppend(ctx context.Context, p *store.JournalAppendParams) error {
	if s.dead() {
		return errCrashed
	}
	return s.j.JournalAppend(ctx, p)
}

func (s journalCrashStore) JournalList(ctx context.Context, runID string, step int64) ([]store.JournalEntry, error) {
	if s.lists != nil {
		s.lists.Add(1)
	}
	return s.j.JournalList(ctx, runID, step)
}

// metricSum returns the sum of a registered counter's series.
func metricSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestHost_Journal_Recover: a host crashes (its writes stop) while the
// third of an agent turn's four model calls is in flight, after two model
// calls and two tool calls finished; the host that recovers the run
// answers those four calls from the journal and makes only the one in
// flight again. Without the journal (Config.NoJournal on the recovering
// host) every call is made again; when the recovering host's agent asks
// something else (other instructions), the journal is discarded from the
// first call on and the divergence is counted.
func TestHost_Journal_Recover(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		noJournal    bool
		instructions string
		// want: sends of each distinct model request, in order.
		want                 []int
		wantTools            int // tool executions in all
		replayed, divergence float64
	}{
		{name: "Journal", want: []int{1, 1, 2, 1}, wantTools: 3, replayed: 4},
		{name: "NoJournal", noJournal: true, want: []int{2, 2, 2, 1}, wantTools: 5},
		{name: "Diverged", instructions: "Be brief.", want: []int{1, 1, 1, 1, 1, 1, 1}, wantTools: 5, divergence: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := startGatedModel(t, 3)
			var mu sync.Mutex
			tools := map[string]int{}
			newAgent := func(instructions string) *workflow.Workflow {
				calc := agent.MustTool("calculate", "computes", func(ctx context.Context, in struct {
					A float64 `json:"a"`
				}) (string, error) {
					mu.Lock()
					tools[agent.ToolCallID(ctx)]++
					mu.Unlock()
					return "42", nil
				})
				a, err := agent.NewChatAgent(&agent.Options{Name: "assistant", BaseURL: m.url, APIKey: "test", Model: "local",
					Instructions: instructions, Tools: []*agent.Tool{calc}, Metadata: map[string]string{"tool_calls": "3"},
					Retry: agent.RetryPolicy{Retries: -1}})
				if err != nil {
					t.Fatal(err)
				}
				assistantEx := agent.Executor("assistant", a)
				wf, err := workflow.NewBuilder("j.tools").SetStart(assistantEx).Outputs(assistantEx).Build()
				if err != nil {
					t.Fatal(err)
				}
				return wf
			}
			register := func(instructions string) func(*testing.T, *host.Host) {
				return func(t *testing.T, h *host.Host) {
					if err := h.RegisterWorkflow("j.tools", newAgent(instructions)); err != nil {
						t.Fatal(err)
					}
				}
			}
			raw := openStore(t, filepath.Join(t.TempDir(), "h.db"))
			defer raw.Close()
			cs := &crashStore{Store: raw}
			cfg := host.Config{HostID: "h1", LeaseDuration: 1500 * time.Millisecond, CommitRetries: 1, CommitBackoff: time.Millisecond}
			var lists atomic.Int64
			h1 := newHost(t, journalCrashStore{crashStore: cs, j: raw.(store.Journal), lists: &lists}, &cfg, register(""))
			defer shutdown(t, h1)
			r := create(t, h1, "j.tools", `calculate {"a":1}`, nil)
			select {
			case <-m.held:
			case <-testCtx(t).Done():
				t.Fatal("the third model request never came")
			}
			// A response created here has no journal to read: its calls
			// were journaled without reading the store.
			if n := lists.Load(); n != 0 {
				t.Errorf("a response created on h1 read its journal %d times, want 0", n)
			}
			cs.crashed.Store(true) // the process dies: nothing it does from now on is written
			close(m.release)
			h1.WaitRunExited(t)

			reg := prometheus.NewRegistry()
			cfg = host.Config{HostID: "h2", LeaseDuration: 1500 * time.Millisecond, NoJournal: tc.noJournal, Metrics: reg}
			h2 := newHost(t, raw, &cfg, register(tc.instructions))
			defer shutdown(t, h2)
			final := wait(t, h2, r.ID)
			if final.Status != store.StatusCompleted {
				t.Fatalf("final status %s", final.Status)
			}
			if got := m.sends(); !slices.Equal(got, tc.want) {
				t.Errorf("sends of each distinct model request %v, want %v", got, tc.want)
			}
			mu.Lock()
			n := 0
			for _, c := range tools {
				n += c
			}
			mu.Unlock()
			if n != tc.wantTools || len(tools) != 3 {
				t.Errorf("tool executions %v (%d in all), want %d over 3 calls", tools, n, tc.wantTools)
			}
			if got := metricSum(t, reg, "superstep_journal_replayed_total"); got != tc.replayed {
				t.Errorf("calls replayed %v, want %v", got, tc.replayed)
			}
			if got := metricSum(t, reg, "superstep_journal_diverged_total"); got != tc.divergence {
				t.Errorf("divergences %v, want %v", got, tc.divergence)
			}
			// The commit that finished the response pruned the journal,
			// also on a host that keeps none (what h1 journaled).
			for step := int64(0); step <= 2; step++ {
				if es, err := raw.(store.Journal).JournalList(testCtx(t), final.RunID, step); err != nil || len(es) != 0 {
					t.Errorf("journal of step %d after the run finished: %d entries, err %v", step, len(es), err)
				}
			}
		})
	}
}

// commitCrashStore is a journalCrashStore whose process dies at the
// commit of step `at`, before it is written, and that records the key of
// every journal entry appended.
type commitCrashStore struct {
	journalCrashStore
	at int64

	mu   sync.Mutex
	keys []string
}

func (s *commitCrashStore) Commit(ctx context.Context, p *store.CommitParams) (*store.CommitResult, error) {
	if p.Step == s.at {
		s.crashed.Store(true)
	}
	return s.journalCrashStore.Commit(ctx, p)
}

func (s *commitCrashStore) JournalAppend(ctx context.Context, p *store.JournalAppendParams) error {
	err := s.journalCrashStore.JournalAppend(ctx, p)
	if err == nil {
		s.mu.Lock()
		for _, e := range p.Entries {
			s.keys = append(s.keys, e.Key)
		}
		s.mu.Unlock()
	}
	return err
}

// CreateJournalAppend and CreateCommit make s a store.CreateJournaler and
// a store.CreateCommitter, dying like its other writes.
func (s *commitCrashStore) CreateJournalAppend(ctx context.Context, cp *store.ResponseCreateParams, p *store.JournalAppendParams) (*store.ResponseCreateResult, error) {
	if s.dead() {
		return nil, errCrashed
	}
	res, err := s.crashStore.Store.(store.CreateJournaler).CreateJournalAppend(ctx, cp, p)
	if err == nil {
		s.mu.Lock()
		for _, e := range p.Entries {
			s.keys = append(s.keys, e.Key)
		}
		s.mu.Unlock()
	}
	return res, err
}

func (s *commitCrashStore) CreateCommit(ctx context.Context, cp *store.ResponseCreateParams, p *store.CommitParams) (*store.ResponseCreateResult, *store.CommitResult, error) {
	if p.Step == s.at {
		s.crashed.Store(true)
	}
	if s.dead() {
		return nil, nil, errCrashed
	}
	return s.crashStore.Store.(store.CreateCommitter).CreateCommit(ctx, cp, p)
}

// calcChat returns a ChatAgent on m with a calculate tool that counts its
// runs in ran; the local model calls the tool toolCalls times a turn.
func calcChat(t *testing.T, m *gatedModel, toolCalls string, ran *atomic.Int64) *agent.ChatAgent {
	t.Helper()
	calc := agent.MustTool("calculate", "computes", func(ctx context.Context, in struct {
		A float64 `json:"a"`
	}) (string, error) {
		ran.Add(1)
		return "42", nil
	})
	a, err := agent.NewChatAgent(&agent.Options{Name: "assistant", BaseURL: m.url, APIKey: "test", Model: "local",
		Tools: []*agent.Tool{calc}, Metadata: map[string]string{"tool_calls": toolCalls}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// hostDyingAtCommit returns a host on raw, as register registers models,
// whose process dies at the commit of step 1 (the store it writes to);
// the caller shuts it down before it closes raw.
func hostDyingAtCommit(t *testing.T, raw store.Store, register func(*testing.T, *host.Host)) (*commitCrashStore, *host.Host) {
	t.Helper()
	cs := &commitCrashStore{journalCrashStore: journalCrashStore{crashStore: &crashStore{Store: raw}, j: raw.(store.Journal)}, at: 1}
	cfg := host.Config{HostID: "h1", LeaseDuration: 1500 * time.Millisecond, CommitRetries: 1, CommitBackoff: time.Millisecond}
	return cs, newHost(t, cs, &cfg, register)
}

// journaledBy waits until h's run stopped, dead at the commit of step
// s.at, and returns the keys of the journal entries it wrote.
func (s *commitCrashStore) journaledBy(t *testing.T, h *host.Host) []string {
	t.Helper()
	h.WaitRunExited(t)
	if !s.crashed.Load() {
		t.Fatalf("the run exited without reaching the commit of step %d", s.at)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.keys)
}

// finishElsewhere starts a second host on raw, as register registers
// models, and returns response id as it finishes there, with the
// number of journaled calls that host replayed; the host is shut down.
func finishElsewhere(t *testing.T, raw store.Store, register func(*testing.T, *host.Host), id string) (*store.Response, float64) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := host.Config{HostID: "h2", LeaseDuration: 1500 * time.Millisecond, Metrics: reg}
	h2 := newHost(t, raw, &cfg, register)
	defer shutdown(t, h2)
	final := wait(t, h2, id)
	if final.Status != store.StatusCompleted {
		t.Fatalf("final status %s", final.Status)
	}
	return final, metricSum(t, reg, "superstep_journal_replayed_total")
}

// TestHost_Journal_BlockingTurnCrash: a blocking request's create rides
// with the first journal entry of its turn (one write where there were
// two), and a crash at the turn's commit loses nothing: the run is in the
// store with its journal, and the host that recovers it answers every
// call from the journal and completes the response.
func TestHost_Journal_BlockingTurnCrash(t *testing.T) {
	t.Parallel()
	m := startGatedModel(t, 0)
	var tools atomic.Int64
	register := func(t *testing.T, h *host.Host) {
		if err := h.RegisterAgent("j.blocking", calcChat(t, m, "1", &tools)); err != nil {
			t.Fatal(err)
		}
	}
	raw := openStore(t, filepath.Join(t.TempDir(), "h.db"))
	defer raw.Close()
	cs, h1 := hostDyingAtCommit(t, raw, register)
	defer shutdown(t, h1)
	w0 := raw.(*sqlite.Store).Stats().Writes
	if _, err := h1.CreateBlocking(testCtx(t), &host.CreateParams{Model: "j.blocking", Store: true,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: `calculate {"a":1}`}}}); err != nil {
		t.Fatal(err)
	}
	keys := cs.journaledBy(t, h1) // its waiter would wait for whoever finishes the response
	if len(keys) != 3 {
		t.Fatalf("journaled %v, want two model calls and a tool call", keys)
	}
	// The create with the first entry, then the two other entries.
	if n := raw.(*sqlite.Store).Stats().Writes - w0; n != 3 {
		t.Errorf("%d store writes before the crash, want 3", n)
	}
	runs, err := raw.RunList(testCtx(t), &store.RunListParams{Limit: 10})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %d (%v), want the one created with its journal", len(runs), err)
	}

	_, replayed := finishElsewhere(t, raw, register, runs[0].HeadResponseID)
	if got := m.sends(); !slices.Equal(got, []int{1, 1}) {
		t.Errorf("sends of each distinct model request %v, want each of two once", got)
	}
	if n := tools.Load(); n != 1 {
		t.Errorf("%d tool executions, want 1", n)
	}
	if replayed != 3 {
		t.Errorf("calls replayed %v, want 3", replayed)
	}
}

// TestHost_Journal_SoloAgentNoCompletion: a ChatAgent alone in its
// superstep (as every hosted conversation's turn is) journals its model
// and tool calls but not its completion, which would hold everything it
// produced. When the host dies at that superstep's commit, the host that
// recovers the run re-runs the agent from the journal: no model request
// and no tool is made again, and the response is the same.
func TestHost_Journal_SoloAgentNoCompletion(t *testing.T) {
	t.Parallel()
	m := startGatedModel(t, 0)
	var tools atomic.Int64
	register := func(t *testing.T, h *host.Host) {
		assistantEx := agent.Executor("assistant", calcChat(t, m, "2", &tools))
		wf, err := workflow.NewBuilder("j.solo").SetStart(assistantEx).Outputs(assistantEx).Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := h.RegisterWorkflow("j.solo", wf); err != nil {
			t.Fatal(err)
		}
	}
	raw := openStore(t, filepath.Join(t.TempDir(), "h.db"))
	defer raw.Close()
	cs, h1 := hostDyingAtCommit(t, raw, register)
	defer shutdown(t, h1)
	r := create(t, h1, "j.solo", `calculate {"a":1}`, nil)
	keys := cs.journaledBy(t, h1)
	if len(keys) != 5 {
		t.Errorf("journaled %d entries %v, want 5: three model calls and two tool calls", len(keys), keys)
	}
	for _, k := range keys {
		if strings.Contains(k, "@done") {
			t.Errorf("journaled the solo agent's completion (%s)", k)
		}
	}

	final, replayed := finishElsewhere(t, raw, register, r.ID)
	if got := m.sends(); !slices.Equal(got, []int{1, 1, 1}) {
		t.Errorf("sends of each distinct model request %v, want each of three once", got)
	}
	if n := tools.Load(); n != 2 {
		t.Errorf("%d tool executions, want 2", n)
	}
	if replayed != 5 {
		t.Errorf("calls replayed %v, want 5", replayed)
	}
	var w wireResponse
	if err := json.Unmarshal(final.Snapshot, &w); err != nil {
		t.Fatal(err)
	}
	if got := itemTexts(w); len(got) == 0 || !strings.HasPrefix(got[len(got)-1], "message:") {
		t.Errorf("output %v, want the agent's tool calls and its answer", got)
	}
}

// itemTexts returns a snapshot's output items as type and text (or name
// and arguments), without their ids.
func itemTexts(w wireResponse) []string {
	var out []string
	for _, it := range w.Output {
		s := it.Type + ":" + it.Name + it.Args
		if len(it.Content) > 0 {
			s += it.Content[0].Text
		}
		out = append(out, s)
	}
	return out
}

// TestHost_Journal_ConcurrentAgents: four agents run in one superstep, in
// live mode; the host crashes after agents a1 to a3 finished (their
// completions journaled) while agent b's model call is in flight. The
// recovering host re-applies the three completions (no model request and
// no tool call of theirs is made twice) and makes b's call again; the
// response ends as a crash-free one does.
func TestHost_Journal_ConcurrentAgents(t *testing.T) {
	t.Parallel()
	ma, mb := startGatedModel(t, 0), startGatedModel(t, 1)
	var mu sync.Mutex
	tools := map[string]int{}
	register := func(t *testing.T, h *host.Host) {
		calc := agent.MustTool("calculate", "computes", func(ctx context.Context, in struct {
			A float64 `json:"a"`
		}) (string, error) {
			mu.Lock()
			tools[workflow.InvocationFrom(ctx).ID+"/"+agent.IdempotencyKey(ctx)+"/"+agent.ToolCallID(ctx)]++
			mu.Unlock()
			return "42", nil
		})
		newAgent := func(name, url string, tools ...*agent.Tool) workflow.Executor {
			a, err := agent.NewChatAgent(&agent.Options{Name: name, BaseURL: url, APIKey: "test", Model: "local",
				Instructions: "You are " + name + ".", Tools: tools, Metadata: map[string]string{"tool_calls": "2"}, Retry: agent.RetryPolicy{Retries: -1}})
			if err != nil {
				t.Fatal(err)
			}
			return agent.Executor(name, a)
		}
		split := workflow.Func("split", func(c *workflow.Context, in string) error { return c.Send(in) })
		agents := []workflow.Executor{newAgent("a1", ma.url, calc), newAgent("a2", ma.url, calc), newAgent("b", mb.url),
			newAgent("a3", ma.url, calc)}
		wf, err := workflow.NewBuilder("j.pair").SetStart(split).AddFanOut(split, agents).Outputs(agents...).Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := h.RegisterWorkflow("j.pair", wf, host.WithPublication(host.PublicationLive)); err != nil {
			t.Fatal(err)
		}
	}
	raw := openStore(t, filepath.Join(t.TempDir(), "h.db"))
	defer raw.Close()
	cs := &crashStore{Store: raw}
	cfg := host.Config{HostID: "h1", LeaseDuration: 1500 * time.Millisecond, CommitRetries: 1, CommitBackoff: time.Millisecond}
	h1 := newHost(t, journalCrashStore{crashStore: cs, j: raw.(store.Journal)}, &cfg, register)
	defer shutdown(t, h1)
	r := create(t, h1, "j.pair", `calculate {"a":1}`, nil)
	ctx := testCtx(t)
	select {
	case <-mb.held:
	case <-ctx.Done():
		t.Fatal("b's model request never came")
	}
	for done := false; !done; {
		es, err := raw.(store.Journal).JournalList(ctx, r.RunID, 2)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range es {
			if strings.HasSuffix(e.Key, "@done#0") {
				n++
			}
		}
		done = n == 3
		if !done {
			select {
			case <-ctx.Done():
				t.Fatalf("a1 to a3's completions never journaled (journal %+v)", es)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	cs.crashed.Store(true)
	close(mb.release)
	h1.WaitRunExited(t)
	aSends := len(ma.sends())

	reg := prometheus.NewRegistry()
	cfg = host.Config{HostID: "h2", LeaseDuration: 1500 * time.Millisecond, Metrics: reg}
	h2 := newHost(t, raw, &cfg, register)
	defer shutdown(t, h2)
	final := wait(t, h2, r.ID)
	if final.Status != store.StatusCompleted {
		t.Fatalf("final status %s", final.Status)
	}
	checkLog(t, collect(t, h2, r.ID, -1))
	if got := ma.sends(); len(got) != aSends || slices.Max(got) != 1 {
		t.Errorf("agents a1 to a3's model requests after recovery %v, want the %d made before the crash, each once", got, aSends)
	}
	if got := mb.sends(); !slices.Equal(got, []int{2}) {
		t.Errorf("agent b's model requests %v, want its one request (in flight at the crash) twice", got)
	}
	mu.Lock()
	if len(tools) != 6 || slices.Max(slices.Collect(maps.Values(tools))) != 1 {
		t.Errorf("tool executions %v, want two calls of each of a1 to a3, once each", tools)
	}
	mu.Unlock()
	if got := metricSum(t, reg, "superstep_journal_replayed_total"); got != 3 {
		t.Errorf("replayed %v, want 3 (the completions of a1 to a3)", got)
	}

	ref := create(t, h2, "j.pair", `calculate {"a":1}`, nil)
	if refFinal := wait(t, h2, ref.ID); !slices.Equal(itemTexts(snapshot(t, final)), itemTexts(snapshot(t, refFinal))) {
		t.Errorf("output after the crash %q, a crash-free run's %q", itemTexts(snapshot(t, final)), itemTexts(snapshot(t, refFinal)))
	}
}
