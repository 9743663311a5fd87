package examples_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/localmodel"
	"github.com/superstep/superstep/workflow"
)

// modelServer is the local model server behind httptest, recording the
// metadata of every model request.
type modelServer struct {
	srv  *httptest.Server
	http *http.Client
	mu   sync.Mutex
	mds  []map[string]string
}

func newModelServer(t *testing.T) *modelServer {
	t.Helper()
	m := &modelServer{}
	model := localmodel.NewHandler(&localmodel.Options{TokenDelay: -1})
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Metadata map[string]string `json:"metadata"`
		}
		_ = json.Unmarshal(body, &req)
		m.mu.Lock()
		m.mds = append(m.mds, req.Metadata)
		m.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		model.ServeHTTP(w, r)
	}))
	// Its own transport, so that no idle connection outlives the test.
	m.http = &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		m.http.CloseIdleConnections()
		m.srv.Close()
	})
	return m
}

func (m *modelServer) metadata() []map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.mds)
}

func (m *modelServer) options(api agent.API, journal string) *examples.LLMOptions {
	return &examples.LLMOptions{BaseURL: m.srv.URL + "/v1", APIKey: "k", Model: "local-echo", API: api,
		HTTPClient: m.http, Journal: journal, Retry: agent.RetryPolicy{Retries: -1}}
}

// runLLM runs a demo in memory and returns its outputs: texts, and the
// agents' tool calls as "call name(arguments)".
func runLLM(t *testing.T, wf *agent.WorkflowAgent, s *agent.Session, md map[string]string, in []agent.Message) ([]string, error) {
	t.Helper()
	ctx := workflow.WithInvocation(context.Background(), workflow.Invocation{ID: "resp_t", Metadata: md})
	var out []string
	for u, err := range wf.Run(ctx, s, in) {
		if err != nil {
			return out, err
		}
		switch u.Kind {
		case agent.UpdateToolCall:
			out = append(out, "call "+u.Name+"("+u.Arguments+")")
		case agent.UpdateText:
			out = append(out, u.Text)
		default:
			t.Fatalf("unexpected update %+v", u)
		}
	}
	return out, nil
}

// readJournal returns the journal's lines.
func readJournal(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

func TestLLM_WriterReviewer(t *testing.T) {
	for _, api := range []agent.API{agent.APIChatCompletions, agent.APIResponses} {
		t.Run(string(api), func(t *testing.T) {
			m := newModelServer(t)
			journal := filepath.Join(t.TempDir(), "journal")
			wfs, err := examples.LLMWorkflows(m.options(api, journal))
			if err != nil {
				t.Fatal(err)
			}
			md := map[string]string{"step_delay_ms": "1", "token_delay_ms": "0", "publication": "live"}
			got, err := runLLM(t, agent.FromWorkflow(wfs[examples.WriterReviewer]), nil, md,
				[]agent.Message{{Role: agent.RoleUser, Text: "durable logs"}})
			want := []string{"Echo: durable logs", "Echo: " + examples.ReviewPrompt + "Echo: durable logs"}
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("outputs %q, %v; want %q", got, err, want)
			}
			if j := readJournal(t, journal); !slices.Equal(j, []string{"resp_t 1 writer", "resp_t 2 reviewer"}) {
				t.Fatalf("journal %q", j)
			}
			// Only the model server's knobs are passed on.
			for _, got := range m.metadata() {
				if len(got) != 1 || got["token_delay_ms"] != "0" {
					t.Fatalf("model request metadata %v, want only token_delay_ms", got)
				}
			}
		})
	}
}

// TestLLM_PerAgentMetadata scripts each agent with "<agent>.reply", which
// wins over the plain key.
func TestLLM_PerAgentMetadata(t *testing.T) {
	m := newModelServer(t)
	wfs, err := examples.LLMWorkflows(m.options("", filepath.Join(t.TempDir(), "journal")))
	if err != nil {
		t.Fatal(err)
	}
	md := map[string]string{"reply": "plain", "reviewer.reply": "The final text."}
	got, err := runLLM(t, agent.FromWorkflow(wfs[examples.WriterReviewer]), nil, md, []agent.Message{{Role: agent.RoleUser, Text: "x"}})
	if want := []string{"plain", "The final text."}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("outputs %q, %v; want %q", got, err, want)
	}
}

func TestLLM_Tools(t *testing.T) {
	for _, api := range []agent.API{agent.APIChatCompletions, agent.APIResponses} {
		t.Run(string(api), func(t *testing.T) {
			m := newModelServer(t)
			journal := filepath.Join(t.TempDir(), "journal")
			wfs, err := examples.LLMWorkflows(m.options(api, journal))
			if err != nil {
				t.Fatal(err)
			}
			wa := agent.FromWorkflow(wfs[examples.Tools])
			got, err := runLLM(t, wa, nil, nil, []agent.Message{{Role: agent.RoleUser, Text: `calculate {"a":6,"op":"*","b":7}`}})
			if want := []string{`call calculate({"a":6,"op":"*","b":7})`, "Tool calculate returned: 42"}; err != nil || !slices.Equal(got, want) {
				t.Fatalf("outputs %q, %v; want %q", got, err, want)
			}
			// The tool journals its idempotency key (run:superstep:executor)
			// and call id, then the executor its invocation.
			want := []string{"resp_t 1 tool:calculate session:1:assistant call_1", "resp_t 1 assistant"}
			if j := readJournal(t, journal); !slices.Equal(j, want) {
				t.Fatalf("journal %q, want %q", j, want)
			}
			// A tool error is told to the model, which reports it.
			got, err = runLLM(t, wa, nil, map[string]string{"tool_call": "calculate", "tool_arguments": `{"a":1,"op":"/","b":0}`},
				[]agent.Message{{Role: agent.RoleUser, Text: "one over zero"}})
			if want := []string{`call calculate({"a":1,"op":"/","b":0})`, "Tool calculate returned: error: division by zero"}; err != nil || !slices.Equal(got, want) {
				t.Fatalf("outputs %q, %v; want %q", got, err, want)
			}
		})
	}
}

// TestLLM_FollowTools: with metadata follow_tools the local model calls
// calculate on any input, with arguments made up from CalcArgs' schema
// (a 1, op "x", b 1: "x" is a multiplication), then reports the result.
func TestLLM_FollowTools(t *testing.T) {
	for _, api := range []agent.API{agent.APIChatCompletions, agent.APIResponses} {
		t.Run(string(api), func(t *testing.T) {
			m := newModelServer(t)
			wfs, err := examples.LLMWorkflows(m.options(api, filepath.Join(t.TempDir(), "journal")))
			if err != nil {
				t.Fatal(err)
			}
			got, err := runLLM(t, agent.FromWorkflow(wfs[examples.Tools]), nil, map[string]string{"follow_tools": "true"},
				[]agent.Message{{Role: agent.RoleUser, Text: "what is one times one?"}})
			if want := []string{`call calculate({"a":1,"b":1,"op":"x"})`, "Tool calculate returned: 1"}; err != nil || !slices.Equal(got, want) {
				t.Fatalf("outputs %q, %v; want %q", got, err, want)
			}
			for _, md := range m.metadata() {
				if md["follow_tools"] != "true" {
					t.Fatalf("model request metadata %v: follow_tools not passed on", md)
				}
			}
		})
	}
}

func TestLLM_ModelDown(t *testing.T) {
	m := newModelServer(t)
	o := m.options("", "")
	m.srv.Close() // nothing listens at the base URL any more
	wfs, err := examples.LLMWorkflows(o)
	if err != nil {
		t.Fatal(err)
	}
	_, err = runLLM(t, agent.FromWorkflow(wfs[examples.WriterReviewer]), nil, nil, []agent.Message{{Role: agent.RoleUser, Text: "x"}})
	if err == nil || !strings.Contains(err.Error(), "model call failed") {
		t.Fatalf("run with the model server down: %v, want a model call failure", err)
	}
}

func TestLLM_NoModelServer(t *testing.T) {
	if _, err := examples.LLMWorkflows(nil); err == nil {
		t.Fatal("LLMWorkflows(nil) succeeded")
	}
	if _, err := examples.LLMWorkflows(&examples.LLMOptions{Model: "m"}); err == nil {
		t.Fatal("LLMWorkflows without base URL and key succeeded")
	}
	if _, err := examples.LLMWorkflows(&examples.LLMOptions{BaseURL: "http://127.0.0.1:1/v1", API: "nope"}); err == nil {
		t.Fatal("LLMWorkflows with an unknown API succeeded")
	}
}

func TestLLM_Calculate(t *testing.T) {
	m := newModelServer(t)
	wfs, err := examples.LLMWorkflows(m.options("", filepath.Join(t.TempDir(), "journal")))
	if err != nil {
		t.Fatal(err)
	}
	wa := agent.FromWorkflow(wfs[examples.Tools])
	for args, want := range map[string]string{
		`{"a":1.5,"op":"+","b":2}`:    "3.5",
		`{"a":1,"op":"-","b":3}`:      "-2",
		`{"a":1,"op":"/","b":4}`:      "0.25",
		`{"a":1,"op":"^","b":4}`:      `error: unknown operator "^" (want + - * /)`,
		`{"a":1e308,"op":"*","b":10}`: "error: result out of range",
	} {
		got, err := runLLM(t, wa, nil, map[string]string{"tool_call": "calculate", "tool_arguments": args},
			[]agent.Message{{Role: agent.RoleUser, Text: "compute"}})
		if w := []string{"call calculate(" + args + ")", "Tool calculate returned: " + want}; err != nil || !slices.Equal(got, w) {
			t.Errorf("%s: %q, %v; want %q", args, got, err, w)
		}
	}
}
