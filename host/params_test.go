package host_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
)

// orderTool is a client tool (a function the caller runs) in wire form.
const orderTool = `{"type":"function","name":"lookup_order","description":"an order's status",` +
	`"parameters":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}}`

// createRaw creates a response from a raw request body, as the HTTP layer
// does: the input is what the one reader reads from it.
func createRaw(t *testing.T, h *host.Host, body string) (*store.Response, error) {
	t.Helper()
	req, err := protocol.ParseCreate([]byte(body), 0)
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return h.Create(testCtx(t), &host.CreateParams{Model: req.Model, Request: []byte(body), Input: req.Input,
		Instructions: req.Instructions, Metadata: req.Metadata, Background: true, Store: true, Stream: true,
		PreviousResponseID: req.PreviousResponseID})
}

// eachPublication runs test, in parallel, once per publication mode, each
// with its own local model server and host (llmSetup).
func eachPublication(t *testing.T, test func(t *testing.T, mode string, m *llmModels, b *testBundle)) {
	t.Parallel()
	for _, mode := range []string{host.PublicationCommitted, host.PublicationLive} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			m := newLLMModels(t)
			b, _ := llmSetup(t, m)
			test(t, mode, m, b)
		})
	}
}

// A plain ChatAgent model takes the request's function tools: the model
// (the local model server, over HTTP, made to call the tool by
// tool_choice) calls the client tool, and the response completes with a
// function_call item for the client, the agent's own tool untouched; the
// client's function_call_output with previous_response_id continues the
// conversation, and the model's reply uses the output. Both publication
// modes.
func TestHost_ClientTools(t *testing.T) {
	eachPublication(t, func(t *testing.T, mode string, m *llmModels, b *testBundle) {
		first, err := createRaw(t, b.host, fmt.Sprintf(`{"model":"plain:llm.tools","input":"where is my order?",
			"metadata":{"publication":%q},"tools":[%s],"tool_choice":{"type":"function","name":"lookup_order"}}`, mode, orderTool))
		if err != nil {
			t.Fatal(err)
		}
		evs := collect(t, b.host, first.ID, -1)
		checkLog(t, evs)
		last := evs[len(evs)-1].Response
		if got := outputs(evs); last.Status != "completed" || !slices.Equal(got, []string{`lookup_order({"id":"x"})`}) {
			t.Fatalf("turn 1: %s %q", last.Status, got)
		}
		call := last.Output[0]
		if call.Type != "function_call" || call.CallID == "" {
			t.Fatalf("turn 1 output %+v", call)
		}
		m.mu.Lock()
		ran := len(m.keys)
		m.mu.Unlock()
		if ran != 0 {
			t.Fatalf("the agent's own tool ran %d times", ran)
		}
		second, err := createRaw(t, b.host, fmt.Sprintf(`{"model":"plain:llm.tools","previous_response_id":%q,
			"metadata":{"publication":%q},"tools":[%s],
			"input":[{"type":"function_call_output","call_id":%q,"output":"shipped"}]}`, first.ID, mode, orderTool, call.CallID))
		if err != nil {
			t.Fatal(err)
		}
		evs = collect(t, b.host, second.ID, -1)
		checkLog(t, evs)
		if got := outputs(evs); evs[len(evs)-1].Response.Status != "completed" ||
			!slices.Equal(got, []string{"Tool lookup_order returned: shipped"}) {
			t.Fatalf("turn 2: %s %q", evs[len(evs)-1].Response.Status, got)
		}
	})
}

// Settings a model cannot honour are an InputError naming the field, and
// nothing is stored: client tools or sampling for a workflow or for a
// plain agent that is no ChatAgent, hosted tools, a client tool named as
// one of the agent's own, a tool_choice naming no tool offered. Explicit
// defaults and instructions are accepted everywhere.
func TestHost_ModelParamsRefused(t *testing.T) {
	t.Parallel()
	m := newLLMModels(t)
	b, _ := llmSetup(t, m)
	runs := func() int {
		rs, err := b.store.RunList(testCtx(t), &store.RunListParams{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return len(rs)
	}
	for _, c := range []struct{ model, extra, param string }{
		{"llm.tools", `"tools":[` + orderTool + `]`, "tools"},
		{"llm.tools", `"tool_choice":"none"`, "tool_choice"},
		{"plain:llm.scripted", `"temperature":0.5`, "temperature"},
		{"plain:llm.scripted", `"text":{"format":{"type":"json_object"}}`, "text.format"},
		{"llm.tools", `"max_output_tokens":100`, "max_output_tokens"},
		{"llm.tools", `"max_tool_calls":2`, "max_tool_calls"},
		{"llm.tools", `"reasoning":{"effort":"low"}`, "reasoning.effort"},
		{"llm.tools", `"truncation":"auto"`, "truncation"},
		{"llm.tools", `"frequency_penalty":0.5`, "frequency_penalty"},
		{"llm.tools", `"text":{"verbosity":"low"}`, "text.verbosity"},
		{"plain:llm.tools", `"reasoning":{"effort":"low","summary":"auto"}`, "reasoning.summary"},
		{"plain:llm.scripted", `"max_tool_calls":0`, "max_tool_calls"},
		{"plain:llm.tools", `"tools":[{"type":"web_search"}]`, "tools"},
		{"plain:llm.tools", `"tools":[{"type":"function","name":"lookup"}]`, "tools[0].name"},
		{"plain:llm.tools", `"tool_choice":{"type":"function","name":"nope"}`, "tool_choice"},
		{"plain:llm.tools", `"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[]}`, "tool_choice"},
	} {
		before := runs()
		_, err := createRaw(t, b.host, fmt.Sprintf(`{"model":%q,"input":"hi",%s}`, c.model, c.extra))
		var ie *host.InputError
		if !errors.As(err, &ie) || ie.Param != c.param {
			t.Errorf("%s with %s: %v, want an InputError on %s", c.model, c.extra, err, c.param)
		}
		if after := runs(); after != before {
			t.Errorf("%s with %s: %d runs stored, %d before", c.model, c.extra, after, before)
		}
	}
	for _, model := range []string{"llm.tools", "plain:llm.scripted", "plain:llm.tools"} {
		r, err := createRaw(t, b.host, fmt.Sprintf(`{"model":%q,"input":"hi","instructions":"be brief","temperature":1,
			"top_p":1,"tools":[],"tool_choice":"auto","parallel_tool_calls":true,"text":{"format":{"type":"text"},"verbosity":"medium"},"reasoning":{"effort":null,"summary":null},"truncation":"disabled","presence_penalty":0,"frequency_penalty":0}`, model))
		if err != nil {
			t.Fatalf("%s with defaults: %v", model, err)
		}
		if got := wait(t, b.host, r.ID); got.Status != store.StatusCompleted {
			t.Fatalf("%s with defaults: %s", model, got.Status)
		}
	}
}

// max_tool_calls caps the calls of the agent's own tools in a response:
// the local model would call the agent's tool three times (llm.looping);
// with max_tool_calls 1 the response holds one mcp_call and
// then the model's answer, the tool ran once, and the Response echoes
// the cap. Both publication modes.
func TestHost_MaxToolCalls(t *testing.T) {
	eachPublication(t, func(t *testing.T, mode string, m *llmModels, b *testBundle) {
		r, err := createRaw(t, b.host, fmt.Sprintf(`{"model":"plain:llm.looping","input":"find it","max_tool_calls":1,
			"metadata":{"publication":%q}}`, mode))
		if err != nil {
			t.Fatal(err)
		}
		evs := collect(t, b.host, r.ID, -1)
		checkLog(t, evs)
		last := evs[len(evs)-1].Response
		got := outputs(evs)
		if last.Status != "completed" || len(got) != 2 || !strings.HasPrefix(got[0], "lookup(") || strings.Contains(got[1], "(") {
			t.Fatalf("%s %q, want one lookup call, then the answer", last.Status, got)
		}
		m.mu.Lock()
		ran := len(m.keys)
		m.mu.Unlock()
		if ran != 1 {
			t.Fatalf("the tool ran %d times, want 1", ran)
		}
		var echo struct {
			MaxToolCalls *int `json:"max_tool_calls"`
		}
		if err := json.Unmarshal(wait(t, b.host, r.ID).Snapshot, &echo); err != nil || echo.MaxToolCalls == nil || *echo.MaxToolCalls != 1 {
			t.Fatalf("the Response echoes max_tool_calls %v (%v), want 1", echo.MaxToolCalls, err)
		}
	})
}

// truncation auto lets a conversation outgrow the model's context window
// (llm.narrow: 80 tokens on the local model server): the fifth turn of
// questions of 10 tokens and answers of 11 fails with the server's own
// message without it, and completes with it, the model sent the newest
// exchanges only.
func TestHost_TruncationAuto(t *testing.T) {
	t.Parallel()
	m := newLLMModels(t)
	b, _ := llmSetup(t, m)
	prev := ""
	turn := func(n int, extra string) *store.Response {
		t.Helper()
		body := fmt.Sprintf(`{"model":"plain:llm.narrow","input":"u%d a b c d e f g h i"%s`, n, extra)
		if prev != "" {
			body += fmt.Sprintf(`,"previous_response_id":%q`, prev)
		}
		r, err := createRaw(t, b.host, body+"}")
		if err != nil {
			t.Fatal(err)
		}
		return wait(t, b.host, r.ID)
	}
	for n := 1; n <= 4; n++ {
		r := turn(n, "")
		if r.Status != store.StatusCompleted {
			t.Fatalf("turn %d: %s %s", n, r.Status, r.Error)
		}
		prev = r.ID
	}
	failed := turn(5, "")
	if failed.Status != store.StatusFailed || !strings.Contains(string(failed.Error), "maximum context length is 80 tokens") {
		t.Fatalf("turn 5 without truncation: %s %s, want failed with the model server's message", failed.Status, failed.Error)
	}
	done := turn(5, `,"truncation":"auto"`)
	var w wireResponse
	if err := json.Unmarshal(done.Snapshot, &w); err != nil {
		t.Fatal(err)
	}
	if got := itemTexts(w); done.Status != store.StatusCompleted || !slices.Equal(got, []string{"message:Echo: u5 a b c d e f g h i"}) {
		t.Fatalf("turn 5 with truncation auto: %s %q", done.Status, got)
	}
	var echo struct {
		Truncation string `json:"truncation"`
	}
	if err := json.Unmarshal(done.Snapshot, &echo); err != nil || echo.Truncation != "auto" {
		t.Fatalf("the Response echoes truncation %q (%v), want auto", echo.Truncation, err)
	}
}

// The settings survive a crash: a response whose first superstep crashed
// before its commit is resumed with the settings read again from the stored
// request, so the model still calls the client tool.
func TestHost_ClientTools_Recovered(t *testing.T) {
	t.Parallel()
	m := newLLMModels(t)
	path := filepath.Join(t.TempDir(), "superstep.db")
	db := testDB{name: "sqlite", open: func(t *testing.T) store.Store { return openStore(t, path) }}
	inc := startIncarnation(t, db, host.Config{}, m.register, func(f *host.Fault) bool {
		return f.Point == host.FaultCommitBefore && f.Step == 1
	})
	r, err := createRaw(t, inc.h, `{"model":"plain:llm.tools","input":"where is my order?","tools":[`+orderTool+`],
		"tool_choice":{"type":"function","name":"lookup_order"}}`)
	if err != nil {
		t.Fatal(err)
	}
	inc.crashed()
	inc2 := startIncarnation(t, db, host.Config{}, m.register, nil)
	if done := wait(t, inc2.h, r.ID); done.Status != store.StatusCompleted {
		t.Fatalf("status %s", done.Status)
	}
	if got := outputs(collect(t, inc2.h, r.ID, -1)); !slices.Equal(got, []string{`lookup_order({"id":"x"})`}) {
		t.Fatalf("outputs after recovery %q", got)
	}
}
