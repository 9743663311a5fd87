package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/workflow"
)

// withParams returns ctx carrying p as the invocation's Params, as a host
// gives them.
func withParams(ctx context.Context, p *agent.ModelParams) context.Context {
	return workflow.WithInvocation(ctx, workflow.Invocation{ID: "resp_1", Params: p})
}

var orderTool = agent.FunctionTool{Name: "lookup_order", Description: "an order's status", Parameters: map[string]any{
	"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}, "required": []string{"id"}}}

// A client tool from the invocation is offered next to the agent's own;
// the model's call of it ends the turn with an UpdateFunctionCall (the
// agent runs nothing), and the answer in the next turn pairs with the call:
// the local model's reply names the tool, which it finds through the call.
// Against the local model server over HTTP, both APIs, forced by
// tool_choice and unprompted with metadata follow_tools.
func TestChatAgent_ClientTools(t *testing.T) {
	for _, api := range apis {
		for _, how := range []string{"tool_choice", "follow_tools"} {
			t.Run(string(api)+"/"+how, func(t *testing.T) {
				own := agent.MustTool("get_weather", "", func(context.Context, weatherArgs) (string, error) {
					t.Error("the agent's own tool ran")
					return "", nil
				})
				p := &agent.ModelParams{Tools: []agent.FunctionTool{orderTool}}
				a := newChat(t, localURL(t, nil), api, func(o *agent.Options) {
					if how == "tool_choice" {
						o.Tools = []*agent.Tool{own}
						p.ToolChoice = agent.ToolChoice{Mode: agent.ToolChoiceFunction, Name: "lookup_order"}
					} else {
						o.Metadata = map[string]string{"follow_tools": "true"}
					}
				})
				if err := a.CheckParams(p); err != nil {
					t.Fatal(err)
				}
				s := agent.NewSession("c")
				var us []agent.Update
				for u, err := range a.Run(withParams(t.Context(), p), s, []agent.Message{user("where is my order?")}) {
					if err != nil {
						t.Fatal(err)
					}
					us = append(us, u)
				}
				if got := kinds(us); got != "function_call done" {
					t.Fatalf("updates: %s", got)
				}
				call := us[0]
				if call.Name != "lookup_order" || call.Arguments != `{"id":"x"}` || call.CallID == "" {
					t.Fatalf("call %+v", call)
				}
				// The caller answers; the next request offers the tool again
				// without forcing it (as a client loop does).
				p.ToolChoice = agent.ToolChoice{}
				us, err := collectCtx(withParams(t.Context(), p), a, s, agent.Message{Role: agent.RoleTool, CallID: call.CallID, Text: "shipped"})
				if err != nil {
					t.Fatal(err)
				}
				if got := kinds(us); !strings.HasSuffix(got, "text done") || strings.Contains(got, "call") {
					t.Fatalf("turn 2 updates: %s", got)
				}
				if txt := us[len(us)-2].Text; txt != "Tool lookup_order returned: shipped" {
					t.Fatalf("turn 2 reply %q", txt)
				}
			})
		}
	}
}

// collectCtx runs one turn of a under ctx and gathers its updates.
func collectCtx(ctx context.Context, a agent.Agent, s *agent.Session, in ...agent.Message) ([]agent.Update, error) {
	var us []agent.Update
	for u, err := range a.Run(ctx, s, in) {
		if err != nil {
			return us, err
		}
		us = append(us, u)
	}
	return us, nil
}

// A tool_choice forcing the agent's own tool holds for the first model
// call only: after the tool ran, the model may answer (else it would be
// made to call the tool until the tool-call limit).
func TestChatAgent_ForcedToolChoiceEndsAfterTools(t *testing.T) {
	for _, api := range apis {
		t.Run(string(api), func(t *testing.T) {
			var n int
			own := agent.MustTool("get_weather", "", func(_ context.Context, in weatherArgs) (string, error) {
				n++
				return "sunny", nil
			})
			a := newChat(t, localURL(t, nil), api, func(o *agent.Options) { o.Tools = []*agent.Tool{own}; o.MaxToolCalls = 3 })
			p := &agent.ModelParams{ToolChoice: agent.ToolChoice{Mode: agent.ToolChoiceFunction, Name: "get_weather"}}
			us, err := collectCtx(withParams(t.Context(), p), a, nil, user("hello"))
			if err != nil {
				t.Fatal(err)
			}
			if got := kinds(us); !strings.HasPrefix(got, "tool_call tool_result") || !strings.HasSuffix(got, "text done") || n != 1 {
				t.Fatalf("updates %s, tool ran %d times", got, n)
			}
		})
	}
}

// The caller's settings reach the model request as each API spells them;
// the smaller max-output cap holds; instructions follow the agent's own.
func TestChatAgent_ParamsSent(t *testing.T) {
	temp, topP, par, strict, presence, frequency := 0.25, 0.5, false, true, 0.5, -1.0
	p := &agent.ModelParams{Instructions: "answer in French", Tools: []agent.FunctionTool{orderTool},
		ToolChoice: agent.ToolChoice{Mode: agent.ToolChoiceRequired}, ParallelToolCalls: &par, MaxOutputTokens: 50,
		Temperature: &temp, TopP: &topP, TextFormat: &agent.TextFormat{Type: agent.TextFormatJSONSchema, Name: "answer",
			Schema: map[string]any{"type": "object"}, Strict: &strict}, ReasoningEffort: "low", Verbosity: "low",
		PresencePenalty: &presence, FrequencyPenalty: &frequency, ServiceTier: "flex", User: "u1", SafetyIdentifier: "s1", PromptCacheKey: "k1", PromptCacheRetention: "24h"}
	want := map[agent.API]map[string]string{
		agent.APIChatCompletions: {"temperature": `0.25`, "top_p": `0.5`, "parallel_tool_calls": `false`, "tool_choice": `"required"`,
			"max_completion_tokens": `20`, "reasoning_effort": `"low"`, "verbosity": `"low"`, "presence_penalty": `0.5`, "frequency_penalty": `-1`, "service_tier": `"flex"`, "user": `"u1"`,
			"safety_identifier": `"s1"`, "prompt_cache_key": `"k1"`, "prompt_cache_retention": `"24h"`,
			"response_format": `{"json_schema":{"name":"answer","strict":true,"schema":{"type":"object"}},"type":"json_schema"}`},
		agent.APIResponses: {"temperature": `0.25`, "top_p": `0.5`, "parallel_tool_calls": `false`, "tool_choice": `"required"`,
			"max_output_tokens": `20`, "instructions": `"be brief\n\nanswer in French"`, "reasoning": `{"effort":"low"}`,
			"service_tier": `"flex"`, "user": `"u1"`, "safety_identifier": `"s1"`, "prompt_cache_key": `"k1"`,
			"prompt_cache_retention": `"24h"`,
			"text":                   `{"verbosity":"low","format":{"name":"answer","schema":{"type":"object"},"strict":true,"type":"json_schema"}}`},
	}
	for _, api := range apis {
		t.Run(string(api), func(t *testing.T) {
			var (
				mu     sync.Mutex
				bodies []map[string]json.RawMessage
			)
			capture := func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					b, _ := io.ReadAll(r.Body)
					var m map[string]json.RawMessage
					_ = json.Unmarshal(b, &m)
					mu.Lock()
					bodies = append(bodies, m)
					mu.Unlock()
					r.Body = io.NopCloser(bytes.NewReader(b))
					next.ServeHTTP(w, r)
				})
			}
			a := newChat(t, localURL(t, capture), api, func(o *agent.Options) { o.Instructions = "be brief"; o.MaxOutputTokens = 20 })
			if _, err := collectCtx(withParams(t.Context(), p), a, nil, user("hi")); err != nil {
				t.Fatal(err)
			}
			if len(bodies) != 1 {
				t.Fatalf("%d model requests", len(bodies))
			}
			for k, v := range want[api] {
				if got := string(bodies[0][k]); got != v {
					t.Errorf("%s = %s, want %s", k, got, v)
				}
			}
			if api == agent.APIChatCompletions && !strings.Contains(string(bodies[0]["messages"]), `"be brief\n\nanswer in French"`) {
				t.Errorf("messages %s lack the joined instructions", bodies[0]["messages"])
			}
			if !strings.Contains(string(bodies[0]["tools"]), `"lookup_order"`) {
				t.Errorf("tools %s lack the client tool", bodies[0]["tools"])
			}
			// Settings the caller did not give are not sent.
			if _, err := collectCtx(withParams(t.Context(), &agent.ModelParams{}), a, nil, user("hi")); err != nil {
				t.Fatal(err)
			}
			for k := range want[api] {
				if v, ok := bodies[1][k]; ok && k != "max_completion_tokens" && k != "max_output_tokens" && k != "instructions" {
					t.Errorf("without settings, %s = %s was sent", k, v)
				}
			}
		})
	}
}

func TestChatAgent_CheckParams(t *testing.T) {
	own := agent.MustTool("get_weather", "", func(context.Context, weatherArgs) (string, error) { return "", nil })
	a := newChat(t, "http://127.0.0.1:1/v1", agent.APIChatCompletions, func(o *agent.Options) { o.Tools = []*agent.Tool{own} })
	bare := newChat(t, "http://127.0.0.1:1/v1", agent.APIChatCompletions, nil)
	viaResponses := newChat(t, "http://127.0.0.1:1/v1", agent.APIResponses, nil)
	pen, zero, neg := 0.5, 0.0, -1
	for _, c := range []struct {
		name  string
		a     *agent.ChatAgent
		p     agent.ModelParams
		param string // "" means accepted
	}{
		{"Zero", a, agent.ModelParams{}, ""},
		{"ClientTool", a, agent.ModelParams{Tools: []agent.FunctionTool{orderTool}}, ""},
		{"ChooseOwnTool", a, agent.ModelParams{ToolChoice: agent.ToolChoice{Mode: agent.ToolChoiceFunction, Name: "get_weather"}}, ""},
		{"Unnamed", a, agent.ModelParams{Tools: []agent.FunctionTool{orderTool, {}}}, "tools[1].name"},
		{"ClashesWithOwn", a, agent.ModelParams{Tools: []agent.FunctionTool{{Name: "get_weather"}}}, "tools[0].name"},
		{"Twice", a, agent.ModelParams{Tools: []agent.FunctionTool{orderTool, orderTool}}, "tools[1].name"},
		{"ChoiceNotOffered", a, agent.ModelParams{ToolChoice: agent.ToolChoice{Mode: agent.ToolChoiceFunction, Name: "nope"}}, "tool_choice"},
		{"RequiredWithoutTools", bare, agent.ModelParams{ToolChoice: agent.ToolChoice{Mode: agent.ToolChoiceRequired}}, "tool_choice"},
		{"AllowedTools", a, agent.ModelParams{ToolChoice: agent.ToolChoice{Mode: "allowed_tools"}}, "tool_choice"},
		{"FormatType", a, agent.ModelParams{TextFormat: &agent.TextFormat{Type: "xml"}}, "text.format.type"},
		{"SchemaUnnamed", a, agent.ModelParams{TextFormat: &agent.TextFormat{Type: agent.TextFormatJSONSchema, Schema: map[string]any{}}}, "text.format.name"},
		{"JSONObject", a, agent.ModelParams{TextFormat: &agent.TextFormat{Type: agent.TextFormatJSONObject}}, ""},
		{"PenaltiesChat", a, agent.ModelParams{PresencePenalty: &pen, FrequencyPenalty: &pen}, ""},
		{"PresenceResponses", viaResponses, agent.ModelParams{PresencePenalty: &pen}, "presence_penalty"},
		{"FrequencyResponses", viaResponses, agent.ModelParams{PresencePenalty: &zero, FrequencyPenalty: &pen}, "frequency_penalty"},
		{"ZeroPenaltyResponses", viaResponses, agent.ModelParams{PresencePenalty: &zero}, ""},
		{"NegativeToolCap", a, agent.ModelParams{MaxToolCalls: &neg}, "max_tool_calls"},
	} {
		err := c.a.CheckParams(&c.p)
		var pe *agent.ParamError
		switch {
		case c.param == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.param != "" && (!errors.As(err, &pe) || pe.Param != c.param):
			t.Errorf("%s: %v, want a ParamError on %s", c.name, err, c.param)
		}
	}
}

// bodyRecorder wraps the local model server, recording each request's
// top-level fields.
type bodyRecorder struct {
	mu     sync.Mutex
	bodies []map[string]json.RawMessage
}

func (rec *bodyRecorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]json.RawMessage
		_ = json.Unmarshal(b, &m)
		rec.mu.Lock()
		rec.bodies = append(rec.bodies, m)
		rec.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		next.ServeHTTP(w, r)
	})
}

func (rec *bodyRecorder) toolChoices() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []string
	for _, b := range rec.bodies {
		out = append(out, string(b["tool_choice"]))
	}
	return out
}

// max_tool_calls caps the agent's own tool calls in the turn: once that
// many ran, the model is asked with tool_choice none and answers. The
// local model would call the tool three times (metadata tool_calls);
// both APIs.
func TestChatAgent_MaxToolCalls(t *testing.T) {
	for _, api := range apis {
		for _, tc := range []struct {
			limit   int
			kinds   string
			choices []string
		}{
			{0, "text done", []string{`"none"`}},
			{1, "tool_call tool_result text done", []string{``, `"none"`}},
			{2, "tool_call tool_result tool_call tool_result text done", []string{``, ``, `"none"`}},
		} {
			t.Run(fmt.Sprintf("%s/%d", api, tc.limit), func(t *testing.T) {
				var n int
				own := agent.MustTool("get_weather", "", func(_ context.Context, in weatherArgs) (string, error) {
					n++
					return "sunny", nil
				})
				var rec bodyRecorder
				a := newChat(t, localURL(t, rec.wrap), api, func(o *agent.Options) {
					o.Tools = []*agent.Tool{own}
					o.Metadata = map[string]string{"tool_calls": "3", "tool_call": "get_weather"}
				})
				p := &agent.ModelParams{MaxToolCalls: &tc.limit}
				if err := a.CheckParams(p); err != nil {
					t.Fatal(err)
				}
				us, err := collectCtx(withParams(t.Context(), p), a, nil, user("weather?"))
				if err != nil {
					t.Fatal(err)
				}
				if got := strings.ReplaceAll(kinds(us), "text_delta ", ""); got != tc.kinds || n != tc.limit {
					t.Fatalf("updates %s, tool ran %d times; want %s, %d", got, n, tc.kinds, tc.limit)
				}
				if got := rec.toolChoices(); !slices.Equal(got, tc.choices) {
					t.Fatalf("tool_choice of each model request %q, want %q", got, tc.choices)
				}
			})
		}
	}
	// Without the setting, the model calls the tool three times.
	var n int
	own := agent.MustTool("get_weather", "", func(_ context.Context, in weatherArgs) (string, error) {
		n++
		return "sunny", nil
	})
	a := newChat(t, localURL(t, nil), agent.APIChatCompletions, func(o *agent.Options) {
		o.Tools = []*agent.Tool{own}
		o.Metadata = map[string]string{"tool_calls": "3", "tool_call": "get_weather"}
	})
	if _, err := collectCtx(withParams(t.Context(), &agent.ModelParams{}), a, nil, user("weather?")); err != nil || n != 3 {
		t.Fatalf("without max_tool_calls the tool ran %d times (err %v), want 3", n, err)
	}
}

// Calls of one reply past max_tool_calls are not run and not shown: the
// model is told they were not run (each call keeps its answer, as the API
// requires) and asked with tool_choice none.
func TestChatAgent_MaxToolCallsInOneReply(t *testing.T) {
	var n int
	own := agent.MustTool("get_weather", "", func(_ context.Context, in weatherArgs) (string, error) {
		n++
		return "sunny", nil
	})
	var rec bodyRecorder
	var first atomic.Bool
	twoCalls := func(next http.Handler) http.Handler {
		return rec.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if first.Swap(true) {
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			for i, id := range []string{"call_a", "call_b"} {
				fmt.Fprintf(w, `data: {"id":"x","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":"%s","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"%s\"}"}}]},"finish_reason":null}]}`+"\n\n", i, id, id)
			}
			fmt.Fprint(w, `data: {"id":"x","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`+"\n\n")
			fmt.Fprint(w, "data: [DONE]\n\n")
		}))
	}
	a := newChat(t, localURL(t, twoCalls), agent.APIChatCompletions, func(o *agent.Options) { o.Tools = []*agent.Tool{own} })
	limit := 1
	us, err := collectCtx(withParams(t.Context(), &agent.ModelParams{MaxToolCalls: &limit}), a, nil, user("weather?"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.ReplaceAll(kinds(us), "text_delta ", ""); got != "tool_call tool_result text done" || n != 1 || us[0].CallID != "call_a" {
		t.Fatalf("updates %s (first %+v), tool ran %d times; want call_a only", got, us[0], n)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.bodies) != 2 {
		t.Fatalf("%d model requests, want 2", len(rec.bodies))
	}
	var msgs []struct {
		Role       string `json:"role"`
		ToolCallID string `json:"tool_call_id"`
		Content    any    `json:"content"`
	}
	if err := json.Unmarshal(rec.bodies[1]["messages"], &msgs); err != nil {
		t.Fatal(err)
	}
	answered := map[string]string{}
	for _, m := range msgs {
		if m.Role == "tool" {
			answered[m.ToolCallID] = fmt.Sprint(m.Content)
		}
	}
	if answered["call_a"] != "sunny" || !strings.Contains(answered["call_b"], "max_tool_calls (1) was reached") {
		t.Fatalf("tool messages of the second request %v", answered)
	}
	if got := string(rec.bodies[1]["tool_choice"]); got != `"none"` {
		t.Fatalf("second request's tool_choice %s, want \"none\"", got)
	}
}

// With truncation auto, a model call the server refuses as longer than
// its context window is made again without the older half of the earlier
// exchanges, until it fits; without, the turn fails with the server's
// error. Four exchanges of 10 + 11 tokens and a fifth question of 10 make
// 94 tokens against a window of 50: the call is made with all five
// exchanges, then with the last three (52), then with the last two (31).
// A single exchange too long fails either way. Both APIs.
func TestChatAgent_TruncateAuto(t *testing.T) {
	question := func(n int) string {
		return fmt.Sprintf("u%d a b c d e f g h i", n) // 10 tokens
	}
	for _, api := range apis {
		t.Run(string(api), func(t *testing.T) {
			var rec bodyRecorder
			url := localURL(t, rec.wrap)
			open := newChat(t, url, api, nil)
			fourTurns := func(id string) *agent.Session {
				s := agent.NewSession(id)
				for n := 1; n <= 4; n++ {
					if _, err := collectCtx(withParams(t.Context(), &agent.ModelParams{}), open, s, user(question(n))); err != nil {
						t.Fatal(err)
					}
				}
				return s
			}
			narrow := newChat(t, url, api, func(o *agent.Options) { o.Metadata = map[string]string{"context_tokens": "50"} })
			_, err := collectCtx(withParams(t.Context(), &agent.ModelParams{}), narrow, fourTurns("off"), user(question(5)))
			if !errors.Is(err, agent.ErrModel) || !strings.Contains(err.Error(), "maximum context length is 50 tokens") ||
				!strings.Contains(err.Error(), "context_length_exceeded") {
				t.Fatalf("truncation disabled: %v, want the server's message and code context_length_exceeded", err)
			}
			s := fourTurns("auto")
			rec.mu.Lock()
			rec.bodies = nil
			rec.mu.Unlock()
			us, err := collectCtx(withParams(t.Context(), &agent.ModelParams{TruncateAuto: true}), narrow, s, user(question(5)))
			if err != nil {
				t.Fatal(err)
			}
			if got := last(us[:len(us)-1]).Text; got != "Echo: "+question(5) {
				t.Fatalf("reply %q", got)
			}
			// The memory keeps every exchange: the next turn, on a model
			// with room, is sent them all.
			if _, err := collectCtx(withParams(t.Context(), &agent.ModelParams{}), open, s, user(question(6))); err != nil {
				t.Fatal(err)
			}
			rec.mu.Lock()
			var sent []string
			for _, b := range rec.bodies {
				conv := string(b["messages"]) + string(b["input"])
				var has []string
				for n := 1; n <= 6; n++ {
					if strings.Contains(conv, fmt.Sprintf(`u%d a`, n)) {
						has = append(has, fmt.Sprint(n))
					}
				}
				sent = append(sent, strings.Join(has, ""))
			}
			rec.mu.Unlock()
			if want := []string{"12345", "345", "45", "123456"}; !slices.Equal(sent, want) {
				t.Fatalf("the calls carried exchanges %q, want %q", sent, want)
			}
			long := strings.Repeat("w ", 60)
			if _, err := collectCtx(withParams(t.Context(), &agent.ModelParams{TruncateAuto: true}), narrow, agent.NewSession("d"), user(long)); !errors.Is(err, agent.ErrModel) {
				t.Fatalf("one exchange over the window: %v, want ErrModel", err)
			}
		})
	}
}

// Each call of a truncated model call has its span, and the span of a call
// made without the oldest items says how many it left out.
func TestChatAgent_TruncateAuto_Traced(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	url := localURL(t, nil)
	open := newChat(t, url, agent.APIChatCompletions, nil)
	s := agent.NewSession("traced")
	for n := 1; n <= 4; n++ {
		if _, err := collectCtx(withParams(t.Context(), &agent.ModelParams{}), open, s, user(fmt.Sprintf("u%d a b c d e f g h i", n))); err != nil {
			t.Fatal(err)
		}
	}
	narrow := newChat(t, url, agent.APIChatCompletions, func(o *agent.Options) { o.Metadata = map[string]string{"context_tokens": "50"} })
	ctx, parent := tp.Tracer("test").Start(withParams(t.Context(), &agent.ModelParams{TruncateAuto: true}), "executor")
	if _, err := collectCtx(ctx, narrow, s, user("u5 a b c d e f g h i")); err != nil {
		t.Fatal(err)
	}
	parent.End()
	var got []string
	for _, sp := range rec.Ended() {
		if sp.Name() != "chat local" {
			continue
		}
		n := "whole"
		for _, kv := range sp.Attributes() {
			if kv.Key == "superstep.model.truncated_items" {
				n = kv.Value.Emit()
			}
		}
		got = append(got, n)
	}
	if want := []string{"whole", "4", "6"}; !slices.Equal(got, want) {
		t.Fatalf("model call spans %q, want %q", got, want)
	}
}
