package agent_test

import (
	"testing"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/workflow"
)

// CheckpointUsage and CheckpointIncomplete read what an agent executor
// recorded from a real checkpoint: this pins the workflow's state-part
// format they depend on.
func TestCheckpointUsage(t *testing.T) {
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
	one, err := agent.CheckpointUsage(res.steps[0].Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if one.InputTokens != 3 || one.OutputTokens != 1 || one.TotalTokens != 4 {
		t.Fatalf("usage after step 1: %+v", one)
	}
	both, err := agent.CheckpointUsage(res.steps[1].Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	// The second agent got "Echo:" (one token) and replied one token.
	if d := both.Sub(one); d.InputTokens != 1 || d.OutputTokens != 1 || d.TotalTokens != 2 {
		t.Fatalf("usage of step 2: %+v (total %+v)", d, both)
	}
	inc, ok, err := agent.CheckpointIncomplete(res.steps[1].Checkpoint)
	if err != nil || !ok || inc != (agent.Incomplete{Reason: agent.ReasonMaxOutputTokens, ExecutorID: "second", Step: 2}) {
		t.Fatalf("incomplete %+v %v %v", inc, ok, err)
	}
	if _, ok, err := agent.CheckpointIncomplete(nil); ok || err != nil {
		t.Fatalf("empty checkpoint: %v %v", ok, err)
	}
	bad := []workflow.Part{{Name: "state/" + agent.UsageKey("x"), Data: []byte("no newline")}}
	if _, err := agent.CheckpointUsage(bad); err == nil {
		t.Fatal("malformed part accepted")
	}
}
