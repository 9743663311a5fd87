package examples

import (
	"context"
	"fmt"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/workflow"
)

// Orchestra is the model name of the concurrent orchestration demo.
const Orchestra = "demo.orchestra"

// OrchestraIDs are demo.orchestra's agents (executor ids, and the prefixes
// of their per-agent metadata), in participant order.
var OrchestraIDs = []string{"analyst", "planner", "critic", "scribe"}

// orchestra: agent.Concurrent of the four OrchestraIDs agents, each with
// its own calculate tool: superstep 1 dispatches the input, superstep 2
// runs the four agents' turns at once (each calls its tool as the model
// asks, metadata tool_calls or "<agent>.tool_calls"), superstep 3 yields
// their replies joined as "<id>: <reply>" paragraphs, the one output.
// Tool calls are journaled like demo.tools'; the agents, being plain agent
// executors, journal their completion inside the superstep (so an agent
// that finished before a crash is not run again) and write no
// "<response_id> <superstep> <executor_id>" lines of their own.
func orchestra(iv invocation, o *LLMOptions) (*workflow.Workflow, error) {
	ps := make([]agent.Participant, len(OrchestraIDs))
	for i, id := range OrchestraIDs {
		calc, err := agent.NewTool(CalculateTool, "Computes a op b exactly; use it for every arithmetic operation.",
			func(ctx context.Context, in CalcArgs) (string, error) {
				res, err := in.eval()
				if err != nil {
					return "", err
				}
				return res, iv.journalTool(ctx, id, CalculateTool)
			})
		if err != nil {
			return nil, err
		}
		// Distinct instructions: a model server can tell the agents'
		// requests apart.
		a, err := chatAgent(o, id, fmt.Sprintf("You are the %s of a team of four. For any arithmetic, call the "+
			CalculateTool+" tool (one operation per call) instead of computing yourself, then answer briefly.", id), calc)
		if err != nil {
			return nil, err
		}
		ps[i] = agent.Participant{ID: id, Agent: a}
	}
	return agent.Concurrent(Orchestra, nil, ps...)
}

// OrchestraWorkflow returns demo.orchestra's workflow with agents on the
// model server o names.
func OrchestraWorkflow(o *LLMOptions) (*workflow.Workflow, error) {
	return orchestra(invocation{opts: Options{Journal: o.Journal}}, o)
}
