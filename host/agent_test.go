package host_test

import (
	"context"
	"errors"
	"iter"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
)

// historyAgent answers with the number of messages it received and the
// last one's text; "fail" makes the turn fail.
var historyAgent = agent.AgentFunc(func(ctx context.Context, s *agent.Session, in []agent.Message) iter.Seq2[agent.Update, error] {
	return func(yield func(agent.Update, error) bool) {
		last := in[len(in)-1].Text
		if last == "fail" {
			yield(agent.Update{}, errors.New("agent says no"))
			return
		}
		var texts []string
		for _, m := range in {
			texts = append(texts, string(m.Role)+":"+m.Text)
		}
		if !yield(agent.Update{Kind: agent.UpdateText, Text: strings.Join(texts, "|")}, nil) {
			return
		}
		yield(agent.Update{Kind: agent.UpdateText, Text: "bye"}, nil)
	}
})

func TestHost_PlainAgent(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{noReg: true})
	if err := b.host.RegisterAgent("chat", historyAgent); err != nil {
		t.Fatal(err)
	}
	models := b.host.Models()
	if len(models) != 1 || models[0].ID != "chat" || models[0].Kind != host.KindAgent {
		t.Fatalf("models %+v", models)
	}
	first := create(t, b.host, "chat", "hi", nil)
	evs := collect(t, b.host, first.ID, -1)
	checkLog(t, evs)
	if got := outputs(evs); !slices.Equal(got, []string{"user:hi", "bye"}) {
		t.Fatalf("turn 1 outputs %q", got)
	}
	// The next turn sees the history: previous input and output.
	second, err := b.host.Create(testCtx(t), &host.CreateParams{Model: "chat", PreviousResponseID: first.ID,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "again"}}})
	if err != nil {
		t.Fatal(err)
	}
	evs = collect(t, b.host, second.ID, -1)
	if got := outputs(evs); !slices.Equal(got, []string{"user:hi|assistant:user:hi|assistant:bye|user:again", "bye"}) {
		t.Fatalf("turn 2 outputs %q", got)
	}
	// One durable step per turn.
	run, err := b.store.RunGet(testCtx(t), first.RunID)
	if err != nil || run.LastStep != 2 {
		t.Fatalf("run after two turns: %+v %v", run, err)
	}
	failed := create(t, b.host, "chat", "fail", nil)
	if got := wait(t, b.host, failed.ID); got.Status != store.StatusFailed {
		t.Fatalf("failing turn: %s", got.Status)
	}
}

// blockingAgent blocks its first turn until ctx ends (the host is stopped
// mid-turn), closing started when that turn begins; later turns echo the
// last message.
type blockingAgent struct {
	calls   atomic.Int32
	started chan struct{}
}

func (a *blockingAgent) Run(ctx context.Context, _ *agent.Session, in []agent.Message) iter.Seq2[agent.Update, error] {
	return func(yield func(agent.Update, error) bool) {
		if a.calls.Add(1) == 1 {
			close(a.started)
			<-ctx.Done()
			yield(agent.Update{}, ctx.Err())
			return
		}
		yield(agent.Update{Kind: agent.UpdateText, Text: "got " + in[len(in)-1].Text}, nil)
	}
}

func TestHost_Recover_PlainAgentTurn(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "h.db")
	s1 := openStore(t, path)
	a := &blockingAgent{started: make(chan struct{})}
	reg := func(t *testing.T, h *host.Host) {
		if err := h.RegisterAgent("blocky", a); err != nil {
			t.Fatal(err)
		}
	}
	h1 := newHost(t, s1, &host.Config{HostID: "h1"}, reg)
	r, err := h1.Create(testCtx(t), &host.CreateParams{Model: "blocky", Store: true, Background: true,
		Request: []byte(`{"model":"blocky","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}]}`),
		Input:   []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "a\nb"}}})
	if err != nil {
		t.Fatal(err)
	}
	// Stop the host mid-turn: nothing was committed, the turn is redone.
	<-a.started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h1.Shutdown(ctx); err == nil {
		t.Fatal("Shutdown with an expired context reported no interrupted run")
	}
	shutdownOnce.Store(h1, true)
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, path)
	defer s2.Close()
	h2 := newHost(t, s2, &host.Config{HostID: "h2"}, reg)
	defer shutdown(t, h2)
	evs := collect(t, h2, r.ID, -1)
	checkLog(t, evs)
	if got := outputs(evs); !slices.Equal(got, []string{"got a\nb"}) {
		t.Fatalf("outputs %q", got)
	}
	if a.calls.Load() != 2 {
		t.Fatalf("agent ran %d times, want 2", a.calls.Load())
	}
	if err := store.Check(testCtx(t), s2); err != nil {
		t.Fatal(err)
	}
}

// Stateless replay: a request without previous_response_id whose input is
// the conversation so far (user message, the assistant's function call and
// its output) starts a turn that sees all of it, the call paired with its
// output; an output answering no call in the input is refused and nothing
// is stored.
func TestHost_StatelessReplay(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{noReg: true})
	var seen atomic.Value
	rec := agent.AgentFunc(func(_ context.Context, _ *agent.Session, in []agent.Message) iter.Seq2[agent.Update, error] {
		seen.Store(slices.Clone(in))
		return func(yield func(agent.Update, error) bool) {
			yield(agent.Update{Kind: agent.UpdateText, Text: "It is 20C."}, nil)
		}
	})
	if err := b.host.RegisterAgent("rec", rec); err != nil {
		t.Fatal(err)
	}
	input := []host.InputItem{
		{Type: host.InputMessage, Role: "user", Text: "weather?"},
		{Type: "reasoning"},
		{Type: "function_call", CallID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`},
		{Type: host.InputFunctionCallOutput, CallID: "call_1", Output: "20C"},
	}
	r, err := b.host.Create(testCtx(t), &host.CreateParams{Model: "rec", Store: true, Input: input})
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, b.host, r.ID, -1)
	if got := outputs(evs); !slices.Equal(got, []string{"It is 20C."}) {
		t.Fatalf("outputs %q", got)
	}
	want := []agent.Message{{Role: agent.RoleUser, Text: "weather?"},
		{Role: agent.RoleAssistant, CallID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`},
		{Role: agent.RoleTool, CallID: "call_1", Text: "20C"}}
	if got, _ := seen.Load().([]agent.Message); !reflect.DeepEqual(got, want) {
		t.Fatalf("the agent saw %+v, want %+v", got, want)
	}

	before, err := b.store.RunList(testCtx(t), &store.RunListParams{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.host.Create(testCtx(t), &host.CreateParams{Model: "rec", Store: true,
		Input: []host.InputItem{{Type: host.InputFunctionCallOutput, CallID: "call_9", Output: "x"}}})
	var ie *host.InputError
	// No function_call answers it and no response left it pending: the
	// param names the call id (issue 15).
	if !errors.As(err, &ie) || ie.Param != "input[0].call_id" || !strings.Contains(ie.Message, "call_9") {
		t.Fatalf("a stray output: %v", err)
	}
	after, err := b.store.RunList(testCtx(t), &store.RunListParams{})
	if err != nil || len(after) != len(before) {
		t.Fatalf("a refused request stored something: %d runs before, %d after (%v)", len(before), len(after), err)
	}
}
