package agent

import (
	"errors"
	"fmt"
	"strings"

	"github.com/superstep/superstep/workflow"
)

// Participant is an agent in an orchestration. Its ID is its executor id.
type Participant struct {
	ID    string
	Agent Agent
	// Description says what the agent is for (handoff tools show it).
	Description string
}

// errNoParticipants is returned for an orchestration without agents.
var errNoParticipants = errors.New("agent: orchestration needs at least one participant")

// Sequential returns a workflow that runs the agents one after the other:
// the first receives the input, each next one the previous one's reply
// (text). Every reply is an output of the workflow, in order; each agent's
// tokens stream as live events while it runs.
func Sequential(name string, ps ...Participant) (*workflow.Workflow, error) {
	if len(ps) == 0 {
		return nil, errNoParticipants
	}
	b := workflow.NewBuilder(name)
	execs := make([]workflow.Executor, len(ps))
	for i, p := range ps {
		execs[i] = Executor(p.ID, p.Agent)
	}
	b.SetStart(execs[0])
	if len(execs) > 1 {
		b.AddChain(execs...)
	}
	return b.Outputs(execs...).Build()
}

// dispatchID and aggregateID are the executor ids of Concurrent's
// dispatcher and aggregator; participants must not use them (Build
// reports the duplicate id).
const (
	dispatchID  = "dispatch"
	aggregateID = "aggregate"
)

// Concurrent returns a workflow that gives the input to every agent at
// once (fan-out, one superstep) and, when all have replied (fan-in),
// yields aggregate(replies), replies in participant order, as its one
// output. The replies themselves are intermediate results. A nil aggregate
// joins the replies as "<id>: <reply>" paragraphs. Participants must not
// use the ids "dispatch" and "aggregate".
func Concurrent(name string, aggregate func(replies []string) string, ps ...Participant) (*workflow.Workflow, error) {
	if len(ps) == 0 {
		return nil, errNoParticipants
	}
	if aggregate == nil {
		aggregate = func(replies []string) string {
			parts := make([]string, len(replies))
			for i, r := range replies {
				parts[i] = ps[i].ID + ": " + r
			}
			return strings.Join(parts, "\n\n")
		}
	}
	dispatch := workflow.Handlers(dispatchID, []workflow.Handler{
		workflow.On(func(c *workflow.Context, in []Message) error { return c.Send(in) }),
		workflow.On(func(c *workflow.Context, in string) error { return c.Send(in) }),
	})
	agg := workflow.Func(aggregateID, func(c *workflow.Context, in []any) error {
		replies := make([]string, len(in))
		for i, v := range in {
			replies[i] = valueText(v)
		}
		return c.Yield(aggregate(replies))
	})
	execs := make([]workflow.Executor, len(ps))
	for i, p := range ps {
		execs[i] = Executor(p.ID, p.Agent)
	}
	b := workflow.NewBuilder(name).SetStart(dispatch).AddFanOut(dispatch, execs).AddFanIn(execs, agg)
	return b.Intermediate(execs...).Outputs(agg).Build()
}

// Handoff returns a workflow in which the first agent receives the input
// and any agent may hand the conversation to any other (a ChatAgent sees a
// tool "handoff_to_<id>" per other participant; other agents emit an
// UpdateHandoff). The agent that answers without handing off ends the run;
// every reply is an output. RunOptions.MaxSupersteps bounds endless
// handoffs.
func Handoff(name string, ps ...Participant) (*workflow.Workflow, error) {
	if len(ps) == 0 {
		return nil, errNoParticipants
	}
	execs := make([]workflow.Executor, len(ps))
	for i, p := range ps {
		var targets []HandoffTarget
		for _, q := range ps {
			if q.ID != p.ID {
				targets = append(targets, HandoffTarget{ID: q.ID, Description: q.Description})
			}
		}
		execs[i] = Executor(p.ID, p.Agent, WithHandoffs(targets...))
	}
	b := workflow.NewBuilder(name).SetStart(execs[0])
	if len(ps) > 1 {
		for i := range ps {
			var cases []workflow.Case
			for j, q := range ps {
				if i != j {
					to := q.ID
					cases = append(cases, workflow.CaseType(execs[j], func(t Transfer) bool { return t.To == to }))
				}
			}
			b.AddSwitch(execs[i], cases, nil)
		}
	}
	wf, err := b.Outputs(execs...).Build()
	if err != nil {
		return nil, fmt.Errorf("agent: handoff %q: %w", name, err)
	}
	return wf, nil
}
