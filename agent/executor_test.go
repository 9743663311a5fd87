package agent_test

import (
	"context"
	"errors"
	"iter"
	"reflect"
	"slices"
	"testing"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/workflow"
)

// TestStepUsage reads what real ChatAgent executors annotated, step by step.
func TestStepUsage(t *testing.T) {
	a := newChat(t, localURL(t, nil), agent.APIChatCompletions, func(o *agent.Options) { o.MaxOutputTokens = 1 })
	first, second := agent.Executor("first", a), agent.Executor("second", a)
	wf, err := workflow.NewBuilder("two").SetStart(first).AddChain(first, second).Outputs(first, second).Build()
	if err != nil {
		t.Fatal(err)
	}
	res, _ := runWorkflow(t, wf, "x y z")
	if len(res.steps) != 2 {
		t.Fatalf("%d steps", len(res.steps))
	}
	// Each step's usage is its own, not the run's so far.
	for i, want := range []agent.Usage{{InputTokens: 3, OutputTokens: 1, TotalTokens: 4}, {InputTokens: 1, OutputTokens: 1, TotalTokens: 2}} {
		s := res.steps[i]
		u, inc := agent.StepUsage(s)
		wantInc := agent.Incomplete{Reason: agent.ReasonMaxOutputTokens, ExecutorID: []string{"first", "second"}[i], Step: s.Number}
		if u != want || inc == nil || *inc != wantInc {
			t.Errorf("step %d: usage %+v, incomplete %+v; want %+v, %+v", s.Number, u, inc, want, wantInc)
		}
	}
	if u, inc := agent.StepUsage(&workflow.Step{Number: 1}); u != (agent.Usage{}) || inc != nil {
		t.Fatalf("step without annotations: %+v %+v", u, inc)
	}
}

// scripted is an agent that replies text and ends its turn with usage and
// reason.
func scripted(text string, usage agent.Usage, reason string) agent.Agent {
	return agent.AgentFunc(func(context.Context, *agent.Session, []agent.Message) iter.Seq2[agent.Update, error] {
		return func(yield func(agent.Update, error) bool) {
			if yield(agent.Update{Kind: agent.UpdateText, Text: text}, nil) {
				yield(agent.Update{Kind: agent.UpdateDone, Usage: &usage, Reason: reason}, nil)
			}
		}
	})
}

// TestStepUsage_Nested counts agents inside a sub-workflow and in a
// fan-out, which the checkpoint's shared state misses or mixes.
func TestStepUsage_Nested(t *testing.T) {
	tokens := func(n int64) agent.Usage { return agent.Usage{InputTokens: n, OutputTokens: n, TotalTokens: 2 * n} }
	// Inner: b, then c, whose reply is cut short; both in one outer step.
	b := agent.Executor("b", scripted("B", tokens(10), ""))
	c := agent.Executor("c", scripted("C", tokens(100), agent.ReasonContentFilter))
	inner, err := workflow.NewBuilder("inner").SetStart(b).AddEdge(b, c).Outputs(c).Build()
	if err != nil {
		t.Fatal(err)
	}
	start := agent.Executor("start", scripted("S", tokens(1), ""))
	sub := inner.AsExecutor("sub")
	side := agent.Executor("side", scripted("D", tokens(1000), ""))
	wf, err := workflow.NewBuilder("outer").SetStart(start).
		AddFanOut(start, []workflow.Executor{sub, side}).Outputs(sub, side).Build()
	if err != nil {
		t.Fatal(err)
	}
	res, _ := runWorkflow(t, wf, "go")
	if len(res.steps) != 2 || !slices.Equal(res.outputs, []string{"C", "D"}) {
		t.Fatalf("%d steps, outputs %q", len(res.steps), res.outputs)
	}
	if u, inc := agent.StepUsage(res.steps[0]); u != tokens(1) || inc != nil {
		t.Errorf("step 1: %+v %+v", u, inc)
	}
	u, inc := agent.StepUsage(res.steps[1])
	// The cut reply is named after the executor whose output carries it.
	wantInc := agent.Incomplete{Reason: agent.ReasonContentFilter, ExecutorID: "sub", Step: 2}
	if u != tokens(1110) || inc == nil || *inc != wantInc {
		t.Fatalf("step 2: usage %+v, incomplete %+v; want %+v, %+v", u, inc, tokens(1110), wantInc)
	}
}

// WithMemory: the executor gives the agent the whole conversation each
// turn (restored from the checkpoint, so a new Run instance continues it),
// yields each text as the agent gave it, and yields a function call the
// agent asks its caller to answer instead of failing.
func TestExecutor_WithMemory(t *testing.T) {
	var seen [][]agent.Message
	a := agent.AgentFunc(func(_ context.Context, _ *agent.Session, in []agent.Message) iter.Seq2[agent.Update, error] {
		seen = append(seen, slices.Clone(in))
		return func(yield func(agent.Update, error) bool) {
			if in[len(in)-1].CallID == "" {
				if yield(agent.Update{Kind: agent.UpdateText, Text: "one"}, nil) {
					yield(agent.Update{Kind: agent.UpdateFunctionCall, CallID: "call_9", Name: "weather", Arguments: `{}`}, nil)
				}
				return
			}
			yield(agent.Update{Kind: agent.UpdateText, Text: "sunny: " + in[len(in)-1].Text}, nil)
		}
	})
	agentEx := agent.Executor("agent", a, agent.WithMemory())
	wf, err := workflow.NewBuilder("conv").SetStart(agentEx).Outputs(agentEx).Build()
	if err != nil {
		t.Fatal(err)
	}
	res, run := runWorkflow(t, wf, []agent.Message{{Role: agent.RoleUser, Text: "hi"}})
	var ups []agent.Update
	for _, ev := range res.steps[0].Events {
		if u, ok := agent.UpdateFromEvent(ev); ok {
			ups = append(ups, u)
		}
	}
	if len(ups) != 2 || ups[0].Text != "one" || ups[1].Kind != agent.UpdateFunctionCall || ups[1].CallID != "call_9" {
		t.Fatalf("turn 1 updates %+v", ups)
	}
	parts, err := run.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	again, err := wf.Restore("run-1", parts)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Send([]agent.Message{{Role: agent.RoleTool, CallID: "call_9", Text: "20C"}}); err != nil {
		t.Fatal(err)
	}
	var out []string
	err = again.Run(t.Context(), func(_ context.Context, s *workflow.Step) error {
		for _, ev := range s.Events {
			if o, ok := ev.(workflow.Output); ok {
				out = append(out, agent.ValueText(o.Value))
			}
		}
		return nil
	}, nil)
	if err != nil || !slices.Equal(out, []string{"sunny: 20C"}) {
		t.Fatalf("turn 2: %q %v", out, err)
	}
	// The call is in the conversation, so the answer pairs with it.
	want := []agent.Message{{Role: agent.RoleUser, Text: "hi"}, {Role: agent.RoleAssistant, Text: "one"},
		{Role: agent.RoleAssistant, CallID: "call_9", Name: "weather", Arguments: `{}`},
		{Role: agent.RoleTool, CallID: "call_9", Text: "20C"}}
	if len(seen) != 2 || !reflect.DeepEqual(seen[1], want) {
		t.Fatalf("the agent saw %+v, want %+v", seen, want)
	}

	// Without memory, a function call fails the turn.
	plainEx := agent.Executor("agent", a)
	plain, _ := workflow.NewBuilder("plain").SetStart(plainEx).Outputs(plainEx).Build()
	r, _ := plain.NewRun("r", "hi")
	if err := r.Run(t.Context(), func(context.Context, *workflow.Step) error { return nil }, nil); !errors.Is(err, workflow.ErrExecutorFailed) {
		t.Fatalf("without memory: %v", err)
	}
}
