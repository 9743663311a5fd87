package main

import (
	"fmt"
	"strings"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/workflow"
)

// NewWorkflow builds the "announce" workflow: a writer agent drafts an
// announcement of the topic it is given, a human approves the draft, and
// the approved draft fans out to two channels, each posting its version.
func NewWorkflow(model agent.Options) (*workflow.Workflow, error) {
	// 1. The writer: a ChatAgent step; its reply is sent along its edge.
	model.Name = "writer"
	model.Instructions = "Write a two-sentence announcement of the topic the user gives."
	writerAgent, err := agent.NewChatAgent(&model)
	if err != nil {
		return nil, err
	}
	writer := agent.Executor("writer", writerAgent)

	// 2. The approval: ask a human (the response completes with a
	// function_call named "approval"), then send the draft on or stop.
	approval := workflow.Handlers("approval", []workflow.Handler{
		workflow.On(func(c *workflow.Context, draft string) error {
			_, err := workflow.RequestInput[bool](c, "", map[string]string{"draft": draft})
			return err
		}),
		workflow.On(func(c *workflow.Context, a workflow.Answer[bool]) error {
			if !a.Value {
				return c.Yield("not published")
			}
			return c.Send(a.Payload.(map[string]string)["draft"])
		}),
	})

	// 3. The fan-out: both channels get the approved draft, in one superstep.
	blog := workflow.Map("blog", func(c *workflow.Context, draft string) (string, error) {
		return "blog: " + draft, nil
	})
	social := workflow.Map("social", func(c *workflow.Context, draft string) (string, error) {
		short, _, _ := strings.Cut(draft, ". ")
		return fmt.Sprintf("social: %s. #announce", short), nil
	})

	return workflow.NewBuilder("announce").
		SetStart(writer).
		AddEdge(writer, approval).
		AddFanOut(approval, []workflow.Executor{blog, social}).
		Outputs(approval, blog, social).
		Build()
}
