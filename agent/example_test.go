package agent_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/workflow"
)

// A workflow served as an agent on its own (no host): the first turn asks
// for confirmation, the second answers it through the call id.
func ExampleFromWorkflow() {
	greet := workflow.Handlers("greet", []workflow.Handler{
		workflow.On(func(c *workflow.Context, name string) error {
			_, err := workflow.RequestInput[string](c, "call_1", "nickname for "+name+"?")
			return err
		}),
		workflow.On(func(c *workflow.Context, a workflow.Answer[string]) error {
			return c.Yield("hello, " + strings.ToUpper(a.Value))
		}),
	})
	wf, _ := workflow.NewBuilder("greeter").SetStart(greet).Outputs(greet).Build()
	a := agent.FromWorkflow(wf)

	s := agent.NewSession("conv-1")
	turn := func(in ...agent.Message) {
		for u, err := range a.Run(context.Background(), s, in) {
			if err != nil {
				fmt.Println("error:", err)
				return
			}
			fmt.Printf("%s: %s%s%s\n", u.Kind, u.Text, u.CallID, u.Arguments)
		}
	}
	turn(agent.Message{Role: agent.RoleUser, Text: "Ada"})
	turn(agent.Message{Role: agent.RoleTool, CallID: "call_1", Text: "countess"})
	// Output:
	// function_call: call_1"nickname for Ada?"
	// text: hello, COUNTESS
}
