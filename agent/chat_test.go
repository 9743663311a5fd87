package agent_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/localmodel"
)

var apis = []agent.API{agent.APIChatCompletions, agent.APIResponses}

// localURL starts the deterministic local model server (no token delay),
// optionally wrapped, and returns its base URL for openai-go.
func localURL(t testing.TB, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	var h http.Handler = localmodel.NewHandler(&localmodel.Options{TokenDelay: -1})
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// newChat returns a ChatAgent on url with fast retries.
func newChat(t testing.TB, url string, api agent.API, mod func(*agent.Options)) *agent.ChatAgent {
	t.Helper()
	o := &agent.Options{BaseURL: url, APIKey: "test", Model: "local", API: api,
		Retry: agent.RetryPolicy{Retries: 2, Backoff: time.Millisecond}}
	if mod != nil {
		mod(o)
	}
	a, err := agent.NewChatAgent(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func kinds(us []agent.Update) string {
	var ks []string
	for _, u := range us {
		ks = append(ks, string(u.Kind))
	}
	return strings.Join(ks, " ")
}

func last(us []agent.Update) agent.Update { return us[len(us)-1] }

func TestChatAgent_StreamsTokensInOrder(t *testing.T) {
	for _, api := range apis {
		t.Run(string(api), func(t *testing.T) {
			a := newChat(t, localURL(t, nil), api, func(o *agent.Options) { o.Metadata = map[string]string{"reply": "the quick brown fox"} })
			us, err := collect(t, a, nil, user("go"))
			if err != nil {
				t.Fatal(err)
			}
			if got := kinds(us); got != "text_delta text_delta text_delta text_delta text done" {
				t.Fatalf("updates: %s", got)
			}
			var joined strings.Builder
			want := []string{"the", " quick", " brown", " fox"}
			for i, u := range us[:4] {
				if u.Text != want[i] {
					t.Fatalf("delta %d = %q, want %q", i, u.Text, want[i])
				}
				joined.WriteString(u.Text)
			}
			if us[4].Text != joined.String() {
				t.Fatalf("text %q, deltas %q", us[4].Text, joined.String())
			}
			d := last(us)
			// prompt "go" = 1 token, reply = 4 tokens
			if d.Reason != "" || d.Usage == nil || *d.Usage != (agent.Usage{InputTokens: 1, OutputTokens: 4, TotalTokens: 5}) {
				t.Fatalf("done %+v usage %+v", d, d.Usage)
			}
			if a.Usage() != *d.Usage {
				t.Fatalf("agent usage %+v", a.Usage())
			}
		})
	}
}

type weatherArgs struct {
	City  string `json:"city" description:"the city"`
	Units string `json:"units,omitempty"`
}

func TestChatAgent_ToolLoop(t *testing.T) {
	for _, api := range apis {
		t.Run(string(api), func(t *testing.T) {
			var (
				mu    sync.Mutex
				calls []string
				keys  []string
			)
			tool := agent.MustTool("get_weather", "weather of a city", func(ctx context.Context, in weatherArgs) (string, error) {
				mu.Lock()
				defer mu.Unlock()
				calls = append(calls, in.City)
				keys = append(keys, agent.IdempotencyKey(ctx)+"|"+agent.ToolCallID(ctx))
				return "sunny in " + in.City, nil
			})
			a := newChat(t, localURL(t, nil), api, func(o *agent.Options) { o.Tools = []*agent.Tool{tool} })
			ctx := agent.WithIdempotencyKey(t.Context(), "run1:3:writer")
			var us []agent.Update
			for u, err := range a.Run(ctx, nil, []agent.Message{user(`call get_weather {"city":"Oslo"}`)}) {
				if err != nil {
					t.Fatal(err)
				}
				us = append(us, u)
			}
			if got := kinds(us); !strings.HasPrefix(got, "tool_call tool_result text_delta") || !strings.HasSuffix(got, "text done") {
				t.Fatalf("updates: %s", got)
			}
			if us[0].Name != "get_weather" || us[0].Arguments != `{"city":"Oslo"}` || us[1].Text != "sunny in Oslo" || us[1].CallID != us[0].CallID {
				t.Fatalf("call %+v result %+v", us[0], us[1])
			}
			if txt := us[len(us)-2].Text; txt != "Tool get_weather returned: sunny in Oslo" {
				t.Fatalf("final text %q", txt)
			}
			if len(calls) != 1 || calls[0] != "Oslo" || keys[0] != "run1:3:writer|call_1" {
				t.Fatalf("tool saw %v %v", calls, keys)
			}
			if u := last(us).Usage; u.TotalTokens != u.InputTokens+u.OutputTokens || u.InputTokens == 0 {
				t.Fatalf("usage of two calls %+v", u)
			}
		})
	}
}

type tripArgs struct {
	City  string    `json:"city"`
	When  time.Time `json:"when"`
	Stops []struct {
		Name string `json:"name"`
	} `json:"stops"`
	Note string `json:"note,omitempty"`
}

// With metadata follow_tools, the local model calls the agent's first tool
// unprompted, with arguments made up from the tool's schema that decode
// into its Go type (a date-time for a time.Time), then answers with the
// result.
func TestChatAgent_LocalModelFollowsTools(t *testing.T) {
	for _, api := range apis {
		t.Run(string(api), func(t *testing.T) {
			var got []tripArgs
			plan := agent.MustTool("plan_trip", "", func(_ context.Context, in tripArgs) (string, error) {
				got = append(got, in)
				return fmt.Sprintf("%s on %s, %d stops", in.City, in.When.Format(time.DateOnly), len(in.Stops)), nil
			})
			weather := agent.MustTool("get_weather", "", func(context.Context, weatherArgs) (string, error) {
				t.Error("get_weather called")
				return "", nil
			})
			a := newChat(t, localURL(t, nil), api, func(o *agent.Options) {
				o.Tools = []*agent.Tool{plan, weather}
				o.Metadata = map[string]string{"follow_tools": "true"}
			})
			us, err := collect(t, a, nil, user("somewhere warm"))
			if err != nil {
				t.Fatal(err)
			}
			if got := kinds(us); !strings.HasPrefix(got, "tool_call tool_result text_delta") || !strings.HasSuffix(got, "text done") {
				t.Fatalf("updates: %s", got)
			}
			if us[0].Name != "plan_trip" || us[0].Arguments != `{"city":"x","stops":[],"when":"1970-01-01T00:00:00Z"}` {
				t.Fatalf("call %+v", us[0])
			}
			if txt := us[len(us)-2].Text; txt != "Tool plan_trip returned: x on 1970-01-01, 0 stops" || len(got) != 1 {
				t.Fatalf("final text %q, tool ran %d times", txt, len(got))
			}
		})
	}
}

func TestChatAgent_ToolCallLimit(t *testing.T) {
	for _, api := range apis {
		t.Run(string(api), func(t *testing.T) {
			var n atomic.Int32
			tool := agent.MustTool("ping", "", func(context.Context, struct{}) (int32, error) { return n.Add(1), nil })
			for _, tc := range []struct {
				want  string // tool calls the model wants
				limit int
				fails bool
			}{{"3", 3, false}, {"5", 3, true}} {
				n.Store(0)
				a := newChat(t, localURL(t, nil), api, func(o *agent.Options) {
					o.Tools, o.MaxToolCalls = []*agent.Tool{tool}, tc.limit
					o.Metadata = map[string]string{"tool_calls": tc.want}
				})
				us, err := collect(t, a, nil, user("ping please"))
				if tc.fails != errors.Is(err, agent.ErrToolCallLimit) {
					t.Fatalf("want %s limit %d: err %v", tc.want, tc.limit, err)
				}
				if int(n.Load()) != tc.limit {
					t.Fatalf("tool ran %d times, limit %d", n.Load(), tc.limit)
				}
				if !tc.fails && last(us).Text == "" && last(us).Kind != agent.UpdateDone {
					t.Fatalf("no final reply: %s", kinds(us))
				}
			}
		})
	}
}

func TestChatAgent_FinishReasons(t *testing.T) {
	for _, api := range apis {
		t.Run(string(api), func(t *testing.T) {
			url := localURL(t, nil)
			a := newChat(t, url, api, func(o *agent.Options) { o.MaxOutputTokens = 2 })
			us, err := collect(t, a, nil, user("one two three"))
			if err != nil {
				t.Fatal(err)
			}
			if d := last(us); d.Reason != agent.ReasonMaxOutputTokens || us[len(us)-2].Text != "Echo: one" {
				t.Fatalf("length: %s %+v", kinds(us), d)
			}
			a = newChat(t, url, api, func(o *agent.Options) { o.Metadata = map[string]string{"finish_reason": "content_filter"} })
			us, err = collect(t, a, nil, user("x"))
			if err != nil {
				t.Fatal(err)
			}
			if d := last(us); d.Reason != agent.ReasonContentFilter {
				t.Fatalf("content_filter: %+v", d)
			}
		})
	}
}

// failFirst answers the first n requests with a 500.
func failFirst(n int32, count *atomic.Int32) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if count.Add(1) <= n {
				http.Error(w, `{"error":{"message":"boom","type":"server_error"}}`, http.StatusInternalServerError)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func TestChatAgent_RetriesThenFails(t *testing.T) {
	for _, api := range apis {
		t.Run(string(api), func(t *testing.T) {
			var count atomic.Int32
			a := newChat(t, localURL(t, failFirst(2, &count)), api, nil)
			us, err := collect(t, a, nil, user("hi"))
			if err != nil || count.Load() != 3 || last(us).Kind != agent.UpdateDone {
				t.Fatalf("2 failures, 2 retries: err %v, %d requests", err, count.Load())
			}
			count.Store(0)
			a = newChat(t, localURL(t, failFirst(100, &count)), api, nil)
			_, err = collect(t, a, nil, user("hi"))
			if !errors.Is(err, agent.ErrModel) || !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "3 attempt") {
				t.Fatalf("err %v", err)
			}
			if count.Load() != 3 {
				t.Fatalf("%d requests, want 3", count.Load())
			}
			count.Store(0)
			a = newChat(t, localURL(t, failFirst(100, &count)), api, func(o *agent.Options) { o.Retry.Retries = -1 })
			if _, err = collect(t, a, nil, user("hi")); !errors.Is(err, agent.ErrModel) || count.Load() != 1 {
				t.Fatalf("no retries: err %v, %d requests", err, count.Load())
			}
		})
	}
}

// A stream cut after its first tokens is retried, and the deltas already
// streamed are voided by an UpdateRetry.
func TestChatAgent_RetryMidStream(t *testing.T) {
	var count atomic.Int32
	cut := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if count.Add(1) > 1 {
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"id":"x","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":"partial"},"finish_reason":null}]}`+"\n\n")
		})
	}
	a := newChat(t, localURL(t, cut), agent.APIChatCompletions, nil)
	us, err := collect(t, a, nil, user("again"))
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(us); got != "text_delta retry text_delta text_delta text done" || us[0].Text != "partial" || us[4].Text != "Echo: again" {
		t.Fatalf("updates %s %+v", got, us)
	}
}

func TestChatAgent_TimeoutRetriedThenFails(t *testing.T) {
	a := newChat(t, localURL(t, nil), agent.APIChatCompletions, func(o *agent.Options) {
		o.CallTimeout = 30 * time.Millisecond
		o.Retry = agent.RetryPolicy{Retries: 1, Backoff: time.Millisecond}
		o.Metadata = map[string]string{"token_delay_ms": "1000"}
	})
	_, err := collect(t, a, nil, user("slow"))
	if !errors.Is(err, agent.ErrModel) || !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), "2 attempt") {
		t.Fatalf("err %v", err)
	}
}

func TestChatAgent_SessionKeepsConversation(t *testing.T) {
	a := newChat(t, localURL(t, nil), agent.APIChatCompletions, nil)
	s := agent.NewSession("c")
	if _, err := collect(t, a, s, user("first")); err != nil {
		t.Fatal(err)
	}
	us, err := collect(t, a, s, user("second"))
	if err != nil {
		t.Fatal(err)
	}
	// turn 2's prompt has turn 1's user message and reply: 1 + 2 + 1 tokens
	if d := last(us); d.Usage.InputTokens != 4 {
		t.Fatalf("second turn input tokens %d, want 4", d.Usage.InputTokens)
	}
}

func TestNewChatAgent_Validates(t *testing.T) {
	if _, err := agent.NewChatAgent(&agent.Options{API: "grpc"}); err == nil {
		t.Fatal("unknown API accepted")
	}
	tool := agent.MustTool("t", "", func(context.Context, struct{}) (string, error) { return "", nil })
	if _, err := agent.NewChatAgent(&agent.Options{Tools: []*agent.Tool{tool, tool}}); err == nil {
		t.Fatal("duplicate tool accepted")
	}
	if a, err := agent.NewChatAgent(nil); err != nil || a.Name() != "assistant" {
		t.Fatalf("zero options: %v", err)
	}
}

type mdKey struct{}

// Metadata layers: Options.Metadata < MetadataFrom(ctx) < WithMetadata; the
// local model replies with metadata "reply", so the winner is visible.
func TestChatAgent_MetadataPrecedence(t *testing.T) {
	url := localURL(t, nil)
	a := newChat(t, url, agent.APIResponses, func(o *agent.Options) {
		o.Metadata = map[string]string{"reply": "static"}
		o.MetadataFrom = func(ctx context.Context) map[string]string {
			if v, ok := ctx.Value(mdKey{}).(string); ok {
				return map[string]string{"reply": v}
			}
			return nil
		}
	})
	reply := func(ctx context.Context) string {
		var text string
		for u, err := range a.Run(ctx, nil, []agent.Message{user("x")}) {
			if err != nil {
				t.Fatal(err)
			}
			if u.Kind == agent.UpdateText {
				text = u.Text
			}
		}
		return text
	}
	ctx := t.Context()
	if got := reply(ctx); got != "static" {
		t.Fatalf("static: %q", got)
	}
	ctx = context.WithValue(ctx, mdKey{}, "from ctx")
	if got := reply(ctx); got != "from ctx" {
		t.Fatalf("MetadataFrom: %q", got)
	}
	if got := reply(agent.WithMetadata(ctx, map[string]string{"reply": "explicit"})); got != "explicit" {
		t.Fatalf("WithMetadata: %q", got)
	}
}

// Instructions are sent as the system prompt with every call: the local
// model counts them as input tokens.
func TestChatAgent_InstructionsSent(t *testing.T) {
	for _, api := range apis {
		a := newChat(t, localURL(t, nil), api, func(o *agent.Options) { o.Instructions = "be very brief" })
		us, err := collect(t, a, nil, user("go"))
		if err != nil {
			t.Fatal(err)
		}
		if u := last(us).Usage; u.InputTokens != 4 {
			t.Fatalf("%s: input tokens %d, want 4 (3 instructions + 1 prompt)", api, u.InputTokens)
		}
	}
}
