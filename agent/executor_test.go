package agent_test

import (
	"context"
	"iter"
	"slices"
	"testing"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/workflow"
)

// TestStepUsage reads what real ChatAgent executors annotated, step by step.
func TestStepUsage(t *testing.T) {
	a := newChat(t, localURL(t, nil), agent.APIChatCompletions, func(o *agent.Options) { o.MaxOutputTokens = 1 })
	first, second := agent.Executor("first", a), agent.Executor("second", a)
	wf, err := workflow.NewBuilder("two").SetStart(first).AddChain(first, second).Outputs("first", "second").Build()
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
	inner, err := workflow.NewBuilder("inner").SetStart(b).AddEdge(b, c, nil).Outputs("c").Build()
	if err != nil {
		t.Fatal(err)
	}
	start := agent.Executor("start", scripted("S", tokens(1), ""))
	sub := inner.AsExecutor("sub")
	side := agent.Executor("side", scripted("D", tokens(1000), ""))
	wf, err := workflow.NewBuilder("outer").SetStart(start).
		AddFanOut(start, []workflow.Executor{sub, side}, nil).Outputs("sub", "side").Build()
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
