package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/localmodel"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/verify"
	"github.com/superstep/superstep/workflow"
)

// LLM models hosted three ways: a workflow with an agent executor
// (native), the same workflow as an agent (agent:), and the agent itself
// as a plain agent (plain:).
var llmHostings = []string{"", "plain:"}

// toolsInput makes the local model call the tool lookup with {"q":"x"}.
const toolsInput = `please lookup {"q":"x"}`

// toolsRef is the outcome of llm.tools for toolsInput.
var toolsRef = verify.Outcome{Status: "completed",
	Output: []string{`tool_call lookup {"q":"x"} -> found x`, "Tool lookup returned: found x"}}

// llmModels registers the LLM test models on the local model server at url.
type llmModels struct {
	url string
	// keys records the idempotency keys the lookup tool ran with.
	mu   sync.Mutex
	keys []string
}

// newLLMModels starts the deterministic local model server (real HTTP).
func newLLMModels(t *testing.T) *llmModels {
	t.Helper()
	srv, err := localmodel.Start("127.0.0.1:0", &localmodel.Options{TokenDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("close model server: %v", err)
		}
	})
	return &llmModels{url: srv.URL}
}

// chat returns a ChatAgent on the local model server.
func (m *llmModels) chat(t *testing.T, url string, mod func(*agent.Options)) *agent.ChatAgent {
	t.Helper()
	lookup := agent.MustTool("lookup", "looks a key up", func(ctx context.Context, in struct {
		Q string `json:"q"`
	}) (string, error) {
		m.mu.Lock()
		m.keys = append(m.keys, agent.IdempotencyKey(ctx)+"/"+agent.ToolCallID(ctx))
		m.mu.Unlock()
		return "found " + in.Q, nil
	})
	o := &agent.Options{Name: "assistant", BaseURL: url, APIKey: "test", Model: "local",
		Tools: []*agent.Tool{lookup}, Retry: agent.RetryPolicy{Retries: 1, Backoff: time.Millisecond}}
	if mod != nil {
		mod(o)
	}
	a, err := agent.NewChatAgent(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// register registers name hosted the three ways with agent a.
func registerLLM(t *testing.T, h *host.Host, name string, a agent.Agent) {
	t.Helper()
	assistantEx := agent.Executor("assistant", a)
	wf, err := workflow.NewBuilder(name).SetStart(assistantEx).Outputs(assistantEx).Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{h.RegisterWorkflow(name, wf), h.RegisterAgent("plain:"+name, a)} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// register is the host registration of every LLM test model.
func (m *llmModels) register(t *testing.T, h *host.Host) {
	t.Helper()
	registerLLM(t, h, "llm.tools", m.chat(t, m.url, nil))
	registerLLM(t, h, "llm.short", m.chat(t, m.url, func(o *agent.Options) { o.MaxOutputTokens = 2 }))
	registerLLM(t, h, "llm.filtered", m.chat(t, m.url, func(o *agent.Options) {
		o.Metadata = map[string]string{"finish_reason": "content_filter"}
	}))
	registerLLM(t, h, "llm.scripted", scriptedAgent)
	registerLLM(t, h, "llm.looping", m.chat(t, m.url, func(o *agent.Options) { // calls lookup three times
		o.Metadata = map[string]string{"tool_calls": "3", "tool_call": "lookup"}
	}))
	registerLLM(t, h, "llm.narrow", m.chat(t, m.url, func(o *agent.Options) { // a context window of 80 tokens
		o.Metadata = map[string]string{"context_tokens": "80"}
	}))
	chain, err := agent.Sequential("llm.chain", agent.Participant{ID: "writer", Agent: m.chat(t, m.url, nil)},
		agent.Participant{ID: "reviewer", Agent: m.chat(t, m.url, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.RegisterWorkflow("llm.chain", chain); err != nil {
		t.Fatal(err)
	}
}

// scriptedAgent says "a b", calls its tool t, then says "c": a text before
// and after a tool call, with usage.
var scriptedAgent = agent.AgentFunc(func(ctx context.Context, _ *agent.Session, _ []agent.Message) iter.Seq2[agent.Update, error] {
	return func(yield func(agent.Update, error) bool) {
		for _, u := range []agent.Update{
			{Kind: agent.UpdateTextDelta, Text: "a "}, {Kind: agent.UpdateTextDelta, Text: "b"},
			{Kind: agent.UpdateText, Text: "a b"},
			{Kind: agent.UpdateToolCall, CallID: "call_t", Name: "t", Arguments: `{"n":1}`},
			{Kind: agent.UpdateToolResult, CallID: "call_t", Text: "ok"},
			{Kind: agent.UpdateTextDelta, Text: "c"}, {Kind: agent.UpdateText, Text: "c"},
			{Kind: agent.UpdateDone, Usage: &agent.Usage{InputTokens: 5, OutputTokens: 3, TotalTokens: 8,
				CachedInputTokens: 2, ReasoningTokens: 1}},
		} {
			if !yield(u, nil) {
				return
			}
		}
	}
})

// llmResponse is the part of a Response the LLM tests read.
type llmResponse struct {
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	Usage *struct {
		InputTokens        int64 `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int64 `json:"output_tokens"`
		OutputTokensDetails struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
		TotalTokens int64 `json:"total_tokens"`
	} `json:"usage"`
}

// terminalOf decodes the response of the terminal event of a log and the
// stored snapshot, and checks that they agree.
func terminalOf(t *testing.T, h *host.Host, id string) (llmResponse, []event) {
	t.Helper()
	evs := collect(t, h, id, -1)
	checkLog(t, evs)
	var last struct {
		Response llmResponse `json:"response"`
	}
	// Re-read the terminal payload itself: the shared event type drops
	// incomplete_details.
	var payload []byte
	for ev, err := range h.Events(testCtx(t), id, "", int64(len(evs)-2)) {
		if err != nil {
			t.Fatal(err)
		}
		payload = ev.Payload
	}
	if err := json.Unmarshal(payload, &last); err != nil {
		t.Fatal(err)
	}
	rec, err := h.Get(testCtx(t), id, "")
	if err != nil {
		t.Fatal(err)
	}
	var snap llmResponse
	if err := json.Unmarshal(rec.Snapshot, &snap); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(last.Response)
	b, _ := json.Marshal(snap)
	if string(a) != string(b) || string(rec.Status) != snap.Status {
		t.Fatalf("terminal event %s, snapshot %s (record status %s)", a, b, rec.Status)
	}
	return last.Response, evs
}

// verifyOne runs the invariant checker over one response.
func verifyOne(t *testing.T, s store.Store, id string, ref verify.Outcome) {
	t.Helper()
	rec, log, err := verify.Load(testCtx(t), s, id)
	if err != nil {
		t.Fatal(err)
	}
	in := &verify.Input{Responses: []verify.ResponseInput{{ID: id, Log: log, Record: rec, Reference: &ref}}}
	if err := verify.Check(in).Err(); err != nil {
		t.Fatalf("verify %s: %v", id, err)
	}
}

// llmSetup returns a host over a fresh SQLite file with the LLM models and
// the registry of its metrics.
func llmSetup(t *testing.T, m *llmModels) (*testBundle, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	b := setup(t, &setupOpts{noReg: true, cfg: &host.Config{Metrics: reg, CommitBackoff: time.Millisecond}})
	m.register(t, b.host)
	return b, reg
}

// A ChatAgent that calls its own tool, hosted every way, in both
// publication modes: the call is a function_call item (with its argument
// events) before the reply, usage is the model's, and everything agrees
// with the agent run on its own.
func TestLLM_ToolCallsAndUsage(t *testing.T) {
	t.Parallel()
	m := newLLMModels(t)
	b, reg := llmSetup(t, m)

	want := referenceUsage(t, m)
	for _, prefix := range llmHostings {
		for _, md := range []map[string]string{nil, liveMD} {
			model := prefix + "llm.tools"
			r := create(t, b.host, model, toolsInput, md)
			wait(t, b.host, r.ID)
			resp, evs := terminalOf(t, b.host, r.ID)
			if resp.Status != "completed" || resp.Usage == nil || resp.Usage.InputTokens != want.InputTokens ||
				resp.Usage.OutputTokens != want.OutputTokens || resp.Usage.TotalTokens != want.TotalTokens {
				t.Fatalf("%s %v: response %+v usage %+v, want usage %+v", model, md, resp, resp.Usage, want)
			}
			if got := outputs(evs); !slices.Equal(got, []string{`lookup({"q":"x"})`, "Tool lookup returned: found x"}) {
				t.Fatalf("%s %v: outputs %q (%s)", model, md, got, types(evs))
			}
			// The agent's own call is an mcp_call item with its
			// output, never a function_call a client SDK would try to run.
			var toolItems []string
			for _, e := range evs {
				if e.Type == "response.in_progress" && string(e.Response.Usage) != "null" {
					t.Fatalf("%s %v: usage %s before the response ended", model, md, e.Response.Usage)
				}
				switch {
				case strings.HasPrefix(e.Type, "response.function_call_arguments"),
					e.Item != nil && e.Item.Type == "function_call":
					t.Fatalf("%s %v: a function_call event for the server's own tool: %s", model, md, types(evs))
				case e.Item != nil && e.Item.Type == "mcp_call":
					out := "<none>"
					if e.Item.Output != nil {
						out = *e.Item.Output
					}
					toolItems = append(toolItems, e.Item.Status+" "+e.Item.Name+" "+e.Item.Args+" "+out)
				}
			}
			if !slices.Equal(toolItems, []string{`in_progress lookup {"q":"x"} <none>`, `completed lookup {"q":"x"} found x`}) {
				t.Fatalf("%s %v: tool call item events %q", model, md, toolItems)
			}
			verifyOne(t, b.store, r.ID, toolsRef)
		}
	}
	if n := histogramCount(t, reg, "superstep_live_publish_seconds"); n == 0 {
		t.Fatal("superstep_live_publish_seconds observed nothing in live mode")
	}
}

// referenceUsage is the usage of the llm.tools agent run on its own, no
// host, for toolsInput.
func referenceUsage(t *testing.T, m *llmModels) agent.Usage {
	t.Helper()
	var want agent.Usage
	for u, err := range m.chat(t, m.url, nil).Run(testCtx(t), nil, []agent.Message{{Role: agent.RoleUser, Text: toolsInput}}) {
		if err != nil {
			t.Fatal(err)
		}
		if u.Kind == agent.UpdateDone {
			want = *u.Usage
		}
	}
	if want.InputTokens == 0 || want.OutputTokens == 0 || want.TotalTokens != want.InputTokens+want.OutputTokens {
		t.Fatalf("reference usage %+v", want)
	}
	return want
}

// histogramCount returns the sample count of a histogram in reg.
func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// Text before and after a tool call: three items in the order they
// happened, in both modes; in live mode the message before the call is
// closed (live) before the call's item opens. Usage details pass through.
func TestLLM_ToolCallOrder(t *testing.T) {
	t.Parallel()
	m := newLLMModels(t)
	b, _ := llmSetup(t, m)
	ref := verify.Outcome{Status: "completed", Output: []string{"a b", `tool_call t {"n":1} -> ok`, "c"}}
	for _, prefix := range llmHostings {
		for _, md := range []map[string]string{nil, liveMD} {
			model := prefix + "llm.scripted"
			r := create(t, b.host, model, "go", md)
			wait(t, b.host, r.ID)
			resp, evs := terminalOf(t, b.host, r.ID)
			if got := outputs(evs); !slices.Equal(got, []string{"a b", `t({"n":1})`, "c"}) {
				t.Fatalf("%s %v: outputs %q (%s)", model, md, got, types(evs))
			}
			u := resp.Usage
			if u == nil || u.InputTokens != 5 || u.OutputTokens != 3 || u.TotalTokens != 8 ||
				u.InputTokensDetails.CachedTokens != 2 || u.OutputTokensDetails.ReasoningTokens != 1 {
				t.Fatalf("%s %v: usage %+v", model, md, u)
			}
			if md != nil {
				if got := deltas(evs); !slices.Equal(got, []string{"a ", "b", "c"}) {
					t.Fatalf("%s live: deltas %q", model, got)
				}
				var order []string
				for _, e := range evs {
					if (e.Type == "response.output_item.added" || e.Type == "response.output_item.done") && e.Item != nil {
						order = append(order, strings.TrimPrefix(e.Type, "response.output_item.")+":"+e.Item.Type)
					}
				}
				want := []string{"added:message", "done:message", "added:mcp_call", "done:mcp_call", "added:message", "done:message"}
				if !slices.Equal(order, want) {
					t.Fatalf("%s live: item events %q", model, order)
				}
			}
			verifyOne(t, b.store, r.ID, ref)
		}
	}
}

// A reply cut short ends the response as incomplete with the reason, in
// every hosting and mode.
func TestLLM_Incomplete(t *testing.T) {
	t.Parallel()
	m := newLLMModels(t)
	b, _ := llmSetup(t, m)
	cases := []struct{ model, reason, text string }{
		{"llm.short", "max_output_tokens", "Echo: one"},
		{"llm.filtered", "content_filter", "Echo: one two three"},
	}
	for _, tc := range cases {
		for _, prefix := range llmHostings {
			for _, md := range []map[string]string{nil, liveMD} {
				r := create(t, b.host, prefix+tc.model, "one two three", md)
				wait(t, b.host, r.ID)
				resp, evs := terminalOf(t, b.host, r.ID)
				if evs[len(evs)-1].Type != "response.incomplete" || resp.Status != "incomplete" ||
					resp.IncompleteDetails == nil || resp.IncompleteDetails.Reason != tc.reason ||
					resp.Usage == nil || resp.Usage.OutputTokens == 0 {
					t.Fatalf("%s%s %v: %s %+v usage %+v", prefix, tc.model, md, evs[len(evs)-1].Type, resp, resp.Usage)
				}
				verifyOne(t, b.store, r.ID, verify.Outcome{Status: "incomplete", Output: []string{tc.text}})
			}
		}
	}
}

// A model that keeps failing, or never answers, fails the response after
// the agent's retries with a message that says so.
func TestLLM_ModelErrorFailsResponse(t *testing.T) {
	t.Parallel()
	m := newLLMModels(t)
	stop := make(chan struct{}) // ends the hanging handlers at cleanup
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "hang") {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		http.Error(w, `{"error":{"message":"overloaded","type":"server_error"}}`, http.StatusInternalServerError)
	}))
	t.Cleanup(func() {
		close(stop)
		down.Close()
	})
	b := setup(t, &setupOpts{noReg: true})
	registerLLM(t, b.host, "llm.down", m.chat(t, down.URL+"/v1", nil))
	registerLLM(t, b.host, "llm.hang", m.chat(t, down.URL+"/hang/v1", func(o *agent.Options) {
		o.CallTimeout = 50 * time.Millisecond
	}))
	cases := []struct{ model, want string }{
		{"llm.down", "model call failed (model local, 2 attempt(s))"},
		{"llm.hang", "timed out after 50ms"},
	}
	for _, tc := range cases {
		for _, prefix := range llmHostings {
			for _, md := range []map[string]string{nil, liveMD} {
				r := create(t, b.host, prefix+tc.model, "hi", md)
				wait(t, b.host, r.ID)
				resp, evs := terminalOf(t, b.host, r.ID)
				if evs[len(evs)-1].Type != "response.failed" || resp.Error == nil || !strings.Contains(resp.Error.Message, tc.want) {
					t.Fatalf("%s%s %v: %s %+v", prefix, tc.model, md, evs[len(evs)-1].Type, resp.Error)
				}
			}
		}
	}
}

// An agent's own tool call is not a pending request: answering its call_id
// is refused exactly like answering an unknown call_id.
func TestLLM_ToolCallIsNotPending(t *testing.T) {
	t.Parallel()
	m := newLLMModels(t)
	b, _ := llmSetup(t, m)
	r := create(t, b.host, "llm.tools", toolsInput, nil)
	if got := wait(t, b.host, r.ID); got.Status != store.StatusCompleted {
		t.Fatalf("status %s", got.Status)
	}
	answer := func(callID string) error {
		_, err := b.host.Create(testCtx(t), &host.CreateParams{Model: "llm.tools", PreviousResponseID: r.ID, Store: true,
			Input: []host.InputItem{{Type: host.InputFunctionCallOutput, CallID: callID, Output: "42"}}})
		return err
	}
	errTool, errUnknown := answer("call_1"), answer("call_unknown")
	if errTool == nil || errUnknown == nil || errTool.Error() != errUnknown.Error() ||
		!errors.Is(errTool, store.ErrConflict) {
		t.Fatalf("tool call_id: %v; unknown call_id: %v", errTool, errUnknown)
	}
}

// A crash (SIGKILL-like: no write after the fault) after a live superstep
// streamed its tool call and text, before its commit: the superstep re-runs
// (the tool again, with the same idempotency key) and streams what the log
// holds already, so no reset is appended and the tool call item is added
// once; the final output equals a crash-free run's; verify passes for the
// client that followed across the crash.
func TestLLM_Recover_LiveToolCallCrash(t *testing.T) {
	t.Parallel()
	for _, prefix := range llmHostings {
		t.Run("hosting="+strings.TrimSuffix(prefix, ":"), func(t *testing.T) {
			t.Parallel()
			m := newLLMModels(t)
			sc := newScenarioWith(t, host.Config{}, m.register)
			sc.arm(&faultRule{point: host.FaultCommitBefore, mode: modeCrash, match: stepIs(1)})
			r := sc.create(prefix+"llm.tools", toolsInput, liveMD)
			c := newClient("streaming", r.ID)
			done := sc.followAsync(c)
			sc.crashAtFault()
			done()
			sc.check(map[string]verify.Outcome{r.ID: toolsRef}, c)
			evs := collect(t, sc.host(), r.ID, -1)
			calls, resets := 0, 0
			for _, e := range evs[2:] {
				switch {
				case e.Type == "response.in_progress":
					resets++
				case e.Type == "response.output_item.added" && e.Item != nil && e.Item.Type == "mcp_call":
					calls++
				}
			}
			if resets != 0 || calls != 1 {
				t.Fatalf("resets %d, tool call items added %d (%s)", resets, calls, types(evs))
			}
			m.mu.Lock()
			keys := slices.Clone(m.keys)
			m.mu.Unlock()
			if len(keys) != 2 || keys[0] != keys[1] {
				t.Fatalf("tool ran with keys %q", keys)
			}
		})
	}
}

// The usage of a response spanning supersteps survives a crash between
// them: the first agent's tokens (committed before the crash) and the
// second's add up to a crash-free run's.
func TestLLM_Recover_UsageAcrossCrash(t *testing.T) {
	t.Parallel()
	m := newLLMModels(t)
	sc := newScenarioWith(t, host.Config{}, m.register)
	ref := sc.create("llm.chain", "hi there", liveMD)
	sc.waitDone(ref.ID)
	want, _ := terminalOf(t, sc.host(), ref.ID)
	sc.arm(&faultRule{point: host.FaultCommitBefore, mode: modeCrash, match: stepIs(2)})
	r := sc.create("llm.chain", "hi there", liveMD)
	sc.crashAtFault()
	sc.waitDone(r.ID)
	got, _ := terminalOf(t, sc.host(), r.ID)
	if want.Usage == nil || got.Usage == nil || *got.Usage != *want.Usage || want.Usage.TotalTokens == 0 {
		t.Fatalf("usage after a crash %+v, crash-free %+v", got.Usage, want.Usage)
	}
	sc.check(map[string]verify.Outcome{r.ID: {Status: "completed", Output: []string{"Echo: hi there", "Echo: Echo: hi there"}}})
}

// An agent inside a sub-workflow (AsExecutor) counts like one at the top:
// the response's usage is the model's, and a reply the model cut short
// makes the response incomplete. The usage comes from the step's
// annotations, which the sub-workflow passes up; the agent's shared state
// lives in the inner run, where a host reading checkpoints would miss it.
func TestLLM_NestedAgentUsage(t *testing.T) {
	t.Parallel()
	m := newLLMModels(t)
	b, _ := llmSetup(t, m)
	nest := func(name string, a agent.Agent) {
		assistantEx := agent.Executor("assistant", a)
		inner, err := workflow.NewBuilder(name + ".inner").SetStart(assistantEx).Outputs(assistantEx).Build()
		if err != nil {
			t.Fatal(err)
		}
		subEx := inner.AsExecutor("sub")
		wf, err := workflow.NewBuilder(name).SetStart(subEx).Outputs(subEx).Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := b.host.RegisterWorkflow(name, wf); err != nil {
			t.Fatal(err)
		}
	}
	nest("nested:llm.tools", m.chat(t, m.url, nil))
	nest("nested:llm.short", m.chat(t, m.url, func(o *agent.Options) { o.MaxOutputTokens = 2 }))

	want := referenceUsage(t, m)
	for _, md := range []map[string]string{nil, liveMD} {
		r := create(t, b.host, "nested:llm.tools", toolsInput, md)
		wait(t, b.host, r.ID)
		resp, _ := terminalOf(t, b.host, r.ID)
		if resp.Status != "completed" || resp.Usage == nil || resp.Usage.InputTokens != want.InputTokens ||
			resp.Usage.OutputTokens != want.OutputTokens || resp.Usage.TotalTokens != want.TotalTokens || want.TotalTokens == 0 {
			t.Fatalf("%v: response %+v usage %+v, want %+v", md, resp, resp.Usage, want)
		}

		r = create(t, b.host, "nested:llm.short", "one two three four", md)
		wait(t, b.host, r.ID)
		resp, _ = terminalOf(t, b.host, r.ID)
		if resp.Status != "incomplete" || resp.Usage == nil || resp.Usage.OutputTokens != 2 {
			t.Fatalf("%v: short reply: response %+v usage %+v", md, resp, resp.Usage)
		}
	}
}
