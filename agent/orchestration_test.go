package agent_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/workflow"
)

// runResult is what a workflow run produced.
type runResult struct {
	outputs []string          // Output values in order
	live    map[string]string // per executor: the concatenated text deltas
	order   []string          // "live:<executor>" and "commit:<n>" in order
	steps   []*workflow.Step
}

// runWorkflow runs wf to the end with a Live hook and an in-memory commit.
func runWorkflow(t *testing.T, wf *workflow.Workflow, input any) (*runResult, *workflow.Run) {
	t.Helper()
	res := &runResult{live: map[string]string{}}
	var mu sync.Mutex
	live := func(_ context.Context, ev workflow.LiveEvent) error {
		mu.Lock()
		defer mu.Unlock()
		if u, ok := ev.Value.(agent.Update); ok && u.Kind == agent.UpdateTextDelta {
			res.live[ev.ExecutorID] += u.Text
			if n := len(res.order); n == 0 || res.order[n-1] != "live:"+ev.ExecutorID {
				res.order = append(res.order, "live:"+ev.ExecutorID)
			}
		}
		return nil
	}
	commit := func(_ context.Context, s *workflow.Step) error {
		mu.Lock()
		defer mu.Unlock()
		res.steps = append(res.steps, s)
		res.order = append(res.order, fmt.Sprintf("commit:%d", s.Number))
		for _, e := range s.Events {
			if o, ok := e.(workflow.Output); ok {
				res.outputs = append(res.outputs, agent.ValueText(o.Value))
			}
		}
		return nil
	}
	run, err := wf.NewRun("run-1", input)
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Run(t.Context(), commit, &workflow.RunOptions{Live: live, MaxSupersteps: 20}); err != nil {
		t.Fatal(err)
	}
	return res, run
}

func TestSequential_WriterReviewer(t *testing.T) {
	url := localURL(t, nil)
	writer := newChat(t, url, agent.APIChatCompletions, func(o *agent.Options) { o.Name = "writer" })
	reviewer := newChat(t, url, agent.APIResponses, func(o *agent.Options) { o.Name = "reviewer" })
	wf, err := agent.Sequential("writer-reviewer", agent.Participant{ID: "writer", Agent: writer}, agent.Participant{ID: "reviewer", Agent: reviewer})
	if err != nil {
		t.Fatal(err)
	}
	res, run := runWorkflow(t, wf, "a haiku")
	want := []string{"Echo: a haiku", "Echo: Echo: a haiku"}
	if !slices.Equal(res.outputs, want) {
		t.Fatalf("outputs %q", res.outputs)
	}
	if res.live["writer"] != want[0] || res.live["reviewer"] != want[1] {
		t.Fatalf("live text %q", res.live)
	}
	if got := strings.Join(res.order, " "); got != "live:writer commit:1 live:reviewer commit:2" {
		t.Fatalf("order %s", got)
	}
	if run.Status() != workflow.Completed {
		t.Fatalf("status %s", run.Status())
	}
	restored, err := wf.Restore("run-1", res.steps[len(res.steps)-1].Checkpoint)
	if err != nil || restored.Status() != workflow.Completed || restored.StepNumber() != 2 {
		t.Fatalf("restore: %v", err)
	}
}

func TestConcurrent_FanOutFanIn(t *testing.T) {
	url := localURL(t, nil)
	mk := func(reply string) agent.Agent {
		return newChat(t, url, agent.APIChatCompletions, func(o *agent.Options) { o.Metadata = map[string]string{"reply": reply} })
	}
	wf, err := agent.Concurrent("panel", nil,
		agent.Participant{ID: "optimist", Agent: mk("looks great")},
		agent.Participant{ID: "pessimist", Agent: mk("looks risky")})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := runWorkflow(t, wf, []agent.Message{user("plan")})
	if len(res.outputs) != 1 || res.outputs[0] != "optimist: looks great\n\npessimist: looks risky" {
		t.Fatalf("outputs %q", res.outputs)
	}
	if res.live["optimist"] != "looks great" || res.live["pessimist"] != "looks risky" {
		t.Fatalf("live %q", res.live)
	}
	if len(res.steps) != 3 { // dispatch, both agents in one superstep, aggregate
		t.Fatalf("%d steps", len(res.steps))
	}
}

func TestHandoff_TriageToBilling(t *testing.T) {
	url := localURL(t, nil)
	triage := newChat(t, url, agent.APIChatCompletions, nil)
	billing := newChat(t, url, agent.APIResponses, func(o *agent.Options) { o.Metadata = map[string]string{"reply": "refund issued"} })
	wf, err := agent.Handoff("support",
		agent.Participant{ID: "triage", Agent: triage},
		agent.Participant{ID: "billing", Agent: billing, Description: "billing questions"})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := runWorkflow(t, wf, "please handoff_to_billing about my invoice")
	if !slices.Equal(res.outputs, []string{"refund issued"}) {
		t.Fatalf("outputs %q", res.outputs)
	}
	res, _ = runWorkflow(t, wf, "hello")
	if !slices.Equal(res.outputs, []string{"Echo: hello"}) {
		t.Fatalf("no handoff: outputs %q", res.outputs)
	}
}

// An AgentFunc can hand off too, and tools see the superstep's
// idempotency key through the executor.
func TestExecutor_IdempotencyKeyAndHandoffFunc(t *testing.T) {
	var keys []string
	router := agent.AgentFunc(func(ctx context.Context, _ *agent.Session, in []agent.Message) iter.Seq2[agent.Update, error] {
		return func(yield func(agent.Update, error) bool) {
			keys = append(keys, agent.IdempotencyKey(ctx))
			yield(agent.Update{Kind: agent.UpdateHandoff, Name: "b"}, nil)
		}
	})
	answer := agent.AgentFunc(func(ctx context.Context, _ *agent.Session, in []agent.Message) iter.Seq2[agent.Update, error] {
		return func(yield func(agent.Update, error) bool) {
			keys = append(keys, agent.IdempotencyKey(ctx))
			yield(agent.Update{Kind: agent.UpdateText, Text: fmt.Sprintf("%d messages", len(in))}, nil)
		}
	})
	wf, err := agent.Handoff("h", agent.Participant{ID: "a", Agent: router}, agent.Participant{ID: "b", Agent: answer})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := runWorkflow(t, wf, "q")
	if !slices.Equal(res.outputs, []string{"1 messages"}) || !slices.Equal(keys, []string{"run-1:1:a", "run-1:2:b"}) {
		t.Fatalf("outputs %q keys %q", res.outputs, keys)
	}
}

func TestExecutor_UsageAndFailure(t *testing.T) {
	url := localURL(t, nil)
	a := newChat(t, url, agent.APIChatCompletions, func(o *agent.Options) { o.MaxOutputTokens = 1 })
	soloEx := agent.Executor("solo", a)
	wf, err := workflow.NewBuilder("one").SetStart(soloEx).Outputs(soloEx).Build()
	if err != nil {
		t.Fatal(err)
	}
	res, _ := runWorkflow(t, wf, "x y z")
	if !slices.Equal(res.outputs, []string{"Echo:"}) {
		t.Fatalf("outputs %q", res.outputs)
	}
	usage, inc := agent.StepUsage(res.steps[0])
	if usage.InputTokens != 3 || usage.OutputTokens != 1 || inc == nil || inc.Reason != agent.ReasonMaxOutputTokens || inc.ExecutorID != "solo" {
		t.Fatalf("usage %+v incomplete %+v", usage, inc)
	}

	failing := agent.AgentFunc(func(context.Context, *agent.Session, []agent.Message) iter.Seq2[agent.Update, error] {
		return func(yield func(agent.Update, error) bool) { yield(agent.Update{}, errors.New("model down")) }
	})
	xEx := agent.Executor("x", failing)
	wf, _ = workflow.NewBuilder("f").SetStart(xEx).Outputs(xEx).Build()
	run, _ := wf.NewRun("r", "in")
	err = run.Run(t.Context(), func(context.Context, *workflow.Step) error { return nil }, nil)
	if !errors.Is(err, workflow.ErrExecutorFailed) || !strings.Contains(err.Error(), "model down") {
		t.Fatalf("err %v", err)
	}
}

// After a refused commit the superstep re-runs, and the agent's tool sees
// the same idempotency key both times.
func TestExecutor_IdempotencyKeyStableAcrossRerun(t *testing.T) {
	var keys []string
	tool := agent.MustTool("charge", "charges a card", func(ctx context.Context, _ struct{}) (string, error) {
		keys = append(keys, agent.IdempotencyKey(ctx))
		return "ok", nil
	})
	a := newChat(t, localURL(t, nil), agent.APIChatCompletions, func(o *agent.Options) { o.Tools = []*agent.Tool{tool} })
	payerEx := agent.Executor("payer", a)
	wf, err := workflow.NewBuilder("pay").SetStart(payerEx).Outputs(payerEx).Build()
	if err != nil {
		t.Fatal(err)
	}
	run, _ := wf.NewRun("run-7", "please charge")
	refused := false
	var outputs []string
	commit := func(_ context.Context, s *workflow.Step) error {
		if !refused {
			refused = true
			return errors.New("store down")
		}
		for _, e := range s.Events {
			if u, ok := agent.UpdateFromEvent(e); ok {
				outputs = append(outputs, string(u.Kind)+":"+u.Text+u.Name+u.Arguments)
			}
		}
		return nil
	}
	if err := run.Run(t.Context(), commit, nil); err == nil {
		t.Fatal("refused commit not reported")
	}
	if err := run.Run(t.Context(), commit, nil); err != nil {
		t.Fatal(err)
	}
	// The yielded tool call carries its output ("ok") with it.
	if !slices.Equal(keys, []string{"run-7:1:payer", "run-7:1:payer"}) || !slices.Equal(outputs, []string{"tool_call:okcharge{}", "text:Tool charge returned: ok"}) {
		t.Fatalf("keys %q outputs %q", keys, outputs)
	}
}
