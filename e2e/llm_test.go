package e2e

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/localmodel"
	responsesapi "github.com/superstep/superstep/responses"
	"github.com/superstep/superstep/store"
)

// newLLMEnv is newEnv with the LLM demos on the local model server (or on
// baseURL when it is not empty), journalling to journal.
func newLLMEnv(t *testing.T, baseURL, journal string) *env {
	t.Helper()
	ctx := context.Background()
	if baseURL == "" {
		ms, err := localmodel.Start("127.0.0.1:0", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { // after the env's close: the host no longer calls it
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := ms.Close(cctx); err != nil {
				t.Errorf("local model server: %v", err)
			}
		})
		baseURL = ms.URL
	}
	modelHTTP := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(modelHTTP.CloseIdleConnections)
	logger := testLogger()
	st, h := newHost(t, "llm.db", logger)
	err := examples.RegisterLLM(h, &examples.LLMOptions{BaseURL: baseURL, APIKey: "local", Model: "e2e-model",
		HTTPClient: modelHTTP, Journal: journal, Retry: agent.RetryPolicy{Retries: 1, Backoff: 10 * time.Millisecond}})
	if err != nil {
		t.Fatalf("RegisterLLM: %v", err)
	}
	return serveHost(t, ctx, st, h, logger)
}

// serveHost starts h, serves it over a real HTTP server and returns the
// env of a client of it (API key "test-key").
func serveHost(t *testing.T, ctx context.Context, st store.Store, h *host.Host, logger *slog.Logger) *env {
	t.Helper()
	if err := h.Start(ctx); err != nil {
		t.Fatalf("host.Start: %v", err)
	}
	handler, err := responsesapi.NewHandler(h, &responsesapi.Options{Logger: logger})
	if err != nil {
		t.Fatalf("responses.NewHandler: %v", err)
	}
	e := &env{t: t, store: st, host: h, srv: httptest.NewServer(handler), dialer: &cuttableDialer{}, apiKey: "test-key"}
	e.http = &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: e.dialer.DialContext}}
	e.client = e.newClient(e.apiKey)
	t.Cleanup(e.close)
	return e
}

// textDeltas returns the output_text.delta frames of a stream, by item id,
// and the item ids in the order their first delta came.
func textDeltas(s streamed) (map[string][]string, []string) {
	deltas := map[string][]string{}
	var order []string
	for _, ev := range s.Events {
		if ev.Type != "response.output_text.delta" {
			continue
		}
		if _, ok := deltas[ev.ItemID]; !ok {
			order = append(order, ev.ItemID)
		}
		deltas[ev.ItemID] = append(deltas[ev.ItemID], ev.Delta)
	}
	return deltas, order
}

// count returns how many events of type typ s has.
func (s streamed) count(typ string) int {
	n := 0
	for _, ev := range s.Events {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// requireUsage checks that a response's usage is filled and adds up.
func requireUsage(t *testing.T, r *responses.Response) {
	t.Helper()
	u := r.Usage
	if u.InputTokens <= 0 || u.OutputTokens <= 0 || u.TotalTokens != u.InputTokens+u.OutputTokens {
		t.Fatalf("usage %+v: want input and output tokens > 0 and total = input + output", u)
	}
}

// writerReviewerWant is the deterministic output of demo.writer-reviewer
// on the local model: the writer's draft, then the reviewer's text.
func writerReviewerWant(in string) []string {
	draft := "Echo: " + in
	return []string{draft, "Echo: " + examples.ReviewPrompt + draft}
}

// TestLLM_WriterReviewerStreamsTokens: demo.writer-reviewer streams (live
// by default) every token as its own response.output_text.delta, writer's
// then reviewer's, in order; the deltas of each item add up to its text
// and to the final output; usage is filled. With
// metadata.publication=committed the same output arrives one item at a
// time, each in one delta.
func TestLLM_WriterReviewerStreamsTokens(t *testing.T) {
	t.Parallel()
	journal := filepath.Join(t.TempDir(), "journal")
	e := newLLMEnv(t, "", journal)
	ctx := context.Background()
	in := "durable logs for agents"
	want := writerReviewerWant(in)

	live := drain(e.client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: examples.WriterReviewer,
		Input: textInput(in), Metadata: shared.Metadata{"token_delay_ms": "2", "step_delay_ms": "5"}}), nil)
	requireLifecycle(t, live, "response.completed")
	final := live.last().Response
	if got := outputTexts(t, final.RawJSON()); !slices.Equal(got, want) {
		t.Fatalf("final output %q, want %q", got, want)
	}
	if got := streamTexts(live); !slices.Equal(got, want) {
		t.Fatalf("output_text.done texts %q, want %q", got, want)
	}
	deltas, order := textDeltas(live)
	if len(order) != 2 || order[0] != final.Output[0].ID || order[1] != final.Output[1].ID {
		t.Fatalf("deltas came for items %v, want the writer's then the reviewer's (%s, %s)", order, final.Output[0].ID, final.Output[1].ID)
	}
	tokens := 0
	for i, id := range order {
		d := deltas[id]
		if strings.Join(d, "") != want[i] || len(d) != len(strings.FieldsFunc(want[i], func(r rune) bool { return r == ' ' })) {
			t.Fatalf("item %d deltas %q: want one per space-separated token of %q", i, d, want[i])
		}
		tokens += len(d)
	}
	// The writer's deltas all come before the reviewer's first one.
	lastWriter, firstReviewer := -1, -1
	for i, ev := range live.Events {
		if ev.Type == "response.output_text.delta" && ev.ItemID == order[0] {
			lastWriter = i
		}
		if ev.Type == "response.output_text.delta" && ev.ItemID == order[1] && firstReviewer < 0 {
			firstReviewer = i
		}
	}
	if lastWriter > firstReviewer {
		t.Fatalf("writer delta at %d after the reviewer's first at %d: %v", lastWriter, firstReviewer, live.types())
	}
	if n := live.count("response.in_progress"); n != 1 {
		t.Fatalf("%d response.in_progress events (a reset?): %v", n, live.types())
	}
	requireUsage(t, &final)
	if final.Usage.OutputTokens != int64(tokens) {
		t.Fatalf("usage output tokens %d, want the %d tokens streamed", final.Usage.OutputTokens, tokens)
	}
	// The demo journal: one line per agent invocation.
	id := final.ID
	requireJournalOnce(t, journal, id, 2)

	committed := drain(e.client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: examples.WriterReviewer,
		Input: textInput(in), Metadata: shared.Metadata{"token_delay_ms": "0", "publication": "committed"}}), nil)
	requireLifecycle(t, committed, "response.completed")
	cfinal := committed.last().Response
	if got := outputTexts(t, cfinal.RawJSON()); !slices.Equal(got, want) {
		t.Fatalf("committed: final output %q, want %q", got, want)
	}
	cdeltas, corder := textDeltas(committed)
	for i, id := range corder {
		if !slices.Equal(cdeltas[id], want[i:i+1]) {
			t.Fatalf("committed: item %d deltas %q, want the whole text in one", i, cdeltas[id])
		}
	}
	if len(corder) != 2 {
		t.Fatalf("committed: deltas for items %v", corder)
	}
	if cfinal.Usage.InputTokens != final.Usage.InputTokens || cfinal.Usage.OutputTokens != final.Usage.OutputTokens {
		t.Fatalf("committed usage %+v, live %+v: the deterministic model should use the same tokens", cfinal.Usage, final.Usage)
	}
	stored, err := e.client.Responses.Get(ctx, cfinal.ID, responses.ResponseGetParams{})
	if err != nil || !slices.Equal(outputTexts(t, stored.RawJSON()), want) {
		t.Fatalf("stored response: %v %s", err, stored.RawJSON())
	}
	requireUsage(t, stored)
}

// TestLLM_ToolCallsAreServerToolItems: demo.tools' call of its own
// calculate tool is an mcp_call item (the API's item for a call the server made; no SDK
// mistakes for a function_call it must run) carrying its arguments and
// output, before the answer's message; no function_call item or argument
// event is sent for it; the tool journals its idempotency key.
func TestLLM_ToolCallsAreServerToolItems(t *testing.T) {
	t.Parallel()
	journal := filepath.Join(t.TempDir(), "journal")
	e := newLLMEnv(t, "", journal)
	ctx := context.Background()
	args := `{"a":6,"op":"*","b":7}`
	for _, pub := range []string{"", "committed", "live"} {
		md := shared.Metadata{"token_delay_ms": "1"}
		if pub != "" {
			md["publication"] = pub
		}
		s := drain(e.client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: examples.Tools,
			Input: textInput("What is 6 times 7? Use calculate " + args), Metadata: md}), nil)
		requireLifecycle(t, s, "response.completed")
		final := s.last().Response
		calls := toolCalls(t, final.RawJSON())
		if len(calls) != 1 || calls[0].Name != examples.CalculateTool || calls[0].Arguments != args || calls[0].ID == "" ||
			calls[0].Output == nil || *calls[0].Output != "42" {
			t.Fatalf("publication %q: tool calls %+v, want one calculate(%s) -> 42\n%s", pub, calls, args, final.RawJSON())
		}
		if fc := functionCalls(t, final.RawJSON()); len(fc) != 0 {
			t.Fatalf("publication %q: function_call items %+v for the server's own tool", pub, fc)
		}
		if len(final.Output) != 2 || final.Output[0].Type != "mcp_call" || final.Output[1].Type != "message" {
			t.Fatalf("publication %q: output %s, want the tool call then the message", pub, final.RawJSON())
		}
		if got := outputTexts(t, final.RawJSON()); !slices.Equal(got, []string{"Tool calculate returned: 42"}) {
			t.Fatalf("publication %q: answer %q", pub, got)
		}
		added, done := false, false
		for _, ev := range s.Events {
			switch {
			case strings.HasPrefix(ev.Type, "response.function_call_arguments"):
				t.Fatalf("publication %q: %s for the server's own tool: %v", pub, ev.Type, s.types())
			case ev.Type == "response.output_item.added" && ev.Item.Type == "mcp_call":
				added = ev.Item.Name == examples.CalculateTool && ev.Item.ID == calls[0].ID
			case ev.Type == "response.output_item.done" && ev.Item.Type == "mcp_call":
				done = added
			}
		}
		if !added || !done {
			t.Fatalf("publication %q: the tool call item was not added then done: %v", pub, s.types())
		}
		if n := s.count("response.in_progress"); n != 1 {
			t.Fatalf("publication %q: %d response.in_progress events (a reset?): %v", pub, n, s.types())
		}
		requireUsage(t, &final)
		data, err := os.ReadFile(journal)
		if err != nil {
			t.Fatal(err)
		}
		toolLine := final.ID + " 1 tool:calculate "
		if !strings.Contains(string(data), toolLine) || !strings.Contains(string(data), ":1:assistant call_1\n") {
			t.Fatalf("publication %q: journal lacks the tool's line %q...:1:assistant call_1:\n%s", pub, toolLine, data)
		}
	}
}

// TestLLM_ModelDownFails: with nothing listening at the model server's
// base URL, the agent's retries run out and the response fails with a
// message that names the failed model call.
func TestLLM_ModelDownFails(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	e := newLLMEnv(t, dead, "")
	s := drain(e.client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: examples.WriterReviewer,
		Input: textInput("anything")}), nil)
	requireLifecycle(t, s, "response.failed")
	r := s.last().Response
	if r.Error.Code != "server_error" || !strings.Contains(r.Error.Message, "model call failed") ||
		!strings.Contains(r.Error.Message, examples.WriterID) {
		t.Fatalf("error %+v: want a server_error naming the writer's failed model call", r.Error)
	}
}

// TestLLM_LengthIsIncomplete: a reply cut at the token limit (scripted by
// metadata "reviewer.finish_reason") makes the response incomplete with
// reason max_output_tokens.
func TestLLM_LengthIsIncomplete(t *testing.T) {
	t.Parallel()
	e := newLLMEnv(t, "", "")
	s := drain(e.client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: examples.WriterReviewer,
		Input: textInput("long"), Metadata: shared.Metadata{"token_delay_ms": "0", "reviewer.finish_reason": "length"}}), nil)
	requireLifecycle(t, s, "response.incomplete")
	r := s.last().Response
	if r.IncompleteDetails.Reason != "max_output_tokens" {
		t.Fatalf("incomplete details %+v", r.IncompleteDetails)
	}
	if got := outputTexts(t, r.RawJSON()); !slices.Equal(got, writerReviewerWant("long")) {
		t.Fatalf("output %q", got)
	}
}

// TestLLM_BinaryModelServerLocal runs `superstep serve --model-server
// local`: demo.writer-reviewer streams from the in-process local model,
// journals its two supersteps, and the server stops cleanly.
func TestLLM_BinaryModelServerLocal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, journal := filepath.Join(dir, "llm.db"), filepath.Join(dir, "journal")
	p := startServer(t, []string{"SUPERSTEP_DEMO_JOURNAL=" + journal}, "--db", db, "--model-server", "local", "--model", "local-echo")
	c := p.client("k")
	s := drain(c.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: examples.WriterReviewer,
		Input: textInput("a binary"), Metadata: shared.Metadata{"step_delay_ms": "10"}}), nil)
	requireLifecycle(t, s, "response.completed")
	if got := outputTexts(t, s.last().Response.RawJSON()); !slices.Equal(got, writerReviewerWant("a binary")) {
		t.Fatalf("output %q", got)
	}
	if deltas, _ := textDeltas(s); len(deltas) != 2 {
		t.Fatalf("deltas %v", deltas)
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM:\n%s", code, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "LLM demos registered") {
		t.Fatalf("log lacks the LLM demos line:\n%s", p.stderr)
	}
	requireJournalOnce(t, journal, s.responseID(t), 2)
}
