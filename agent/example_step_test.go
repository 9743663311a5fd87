package agent_test

import (
	"context"
	"fmt"
	"iter"
	"strings"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/workflow"
)

// An agent as one step of a workflow: a Map prepares the prompt, the agent
// replies (a ChatAgent would call a model; this one answers from a
// function), and a Map after it checks the reply. The agent's reply is
// sent on as text, and yielded because the executor is an output.
func Example_agentStep() {
	shouter := agent.AgentFunc(func(ctx context.Context, s *agent.Session, in []agent.Message) iter.Seq2[agent.Update, error] {
		return func(yield func(agent.Update, error) bool) {
			yield(agent.Update{Kind: agent.UpdateText, Text: strings.ToUpper(in[len(in)-1].Text)}, nil)
		}
	})
	prompt := workflow.Map("prompt", func(c *workflow.Context, topic string) (string, error) {
		return "a line on " + topic, nil
	})
	writer := agent.Executor("writer", shouter)
	check := workflow.Map("check", func(c *workflow.Context, reply string) (string, error) {
		return fmt.Sprintf("%d characters", len(reply)), nil
	})
	wf, err := workflow.NewBuilder("write").SetStart(prompt).AddChain(prompt, writer, check).
		Outputs(writer, check).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	run, _ := wf.NewRun("run-1", "tea")
	err = run.Run(context.Background(), func(_ context.Context, s *workflow.Step) error {
		for _, e := range s.Events {
			if o, ok := e.(workflow.Output); ok {
				fmt.Printf("step %d %s: %v\n", s.Number, o.ExecutorID, o.Value)
			}
		}
		return nil
	}, nil)
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// step 2 writer: A LINE ON TEA
	// step 3 check: 13 characters
}
