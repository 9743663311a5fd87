package workflow_test

import (
	"context"
	"fmt"

	"github.com/superstep/superstep/workflow"
)

// An executor asks a human for approval; the run goes Idle with the request
// pending, survives a checkpoint, and continues once it is answered.
func Example_humanInTheLoop() {
	build := func() *workflow.Workflow {
		review := workflow.Handlers("review", []workflow.Handler{
			workflow.On(func(c *workflow.Context, draft string) error {
				_, err := workflow.RequestInput[bool](c, "approve-1", "publish "+draft+"?")
				return err
			}),
			workflow.On(func(c *workflow.Context, a workflow.Answer[bool]) error {
				if a.Value {
					return c.Yield("published")
				}
				return c.Yield("discarded")
			}),
		})
		wf, _ := workflow.NewBuilder("review").SetStart(review).Outputs(review).Build()
		return wf
	}
	print := func(ctx context.Context, s *workflow.Step) error {
		for _, e := range s.Events {
			switch e := e.(type) {
			case workflow.RequestInfo:
				fmt.Printf("step %d asks %s: %v\n", s.Number, e.Request.ID, e.Request.Payload)
			case workflow.Output:
				fmt.Printf("step %d output: %v\n", s.Number, e.Value)
			}
		}
		return nil
	}

	run, _ := build().NewRun("run-1", "the post")
	_ = run.Run(context.Background(), print, nil)
	fmt.Println("status:", run.Status())

	// Later, perhaps in another process: restore, answer, continue.
	parts, _ := run.Checkpoint()
	restored, _ := build().Restore("run-1", parts)
	fmt.Println("wrong type:", restored.Respond("approve-1", "yes") != nil)
	_ = restored.Respond("approve-1", true)
	_ = restored.Run(context.Background(), print, nil)
	fmt.Println("status:", restored.Status())
	// Output:
	// step 1 asks approve-1: publish the post?
	// status: idle
	// wrong type: true
	// step 2 output: published
	// status: completed
}
