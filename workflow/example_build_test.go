package workflow_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/superstep/superstep/workflow"
)

// Build a fan-out/fan-in workflow and run it, printing what each commit
// publishes. The commit hook is where a host would write the checkpoint and
// the events in one transaction.
func Example_build() {
	split := workflow.Func("split", func(c *workflow.Context, text string) error {
		return c.Send(text)
	})
	upper := workflow.Map("upper", func(c *workflow.Context, s string) (string, error) {
		return strings.ToUpper(s), nil
	})
	count := workflow.Map("count", func(c *workflow.Context, s string) (string, error) {
		return fmt.Sprintf("%d letters", len(s)), nil
	})
	join := workflow.Func("join", func(c *workflow.Context, parts []any) error {
		return c.Yield(strings.TrimSpace(fmt.Sprintln(parts...)))
	})
	wf, err := workflow.NewBuilder("shout").
		SetStart(split).
		AddFanOut(split, []workflow.Executor{upper, count}).
		AddFanIn([]workflow.Executor{upper, count}, join).Outputs(join).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	run, err := wf.NewRun("run-1", "hello")
	if err != nil {
		fmt.Println(err)
		return
	}
	commit := func(ctx context.Context, s *workflow.Step) error {
		for _, e := range s.Events {
			if o, ok := e.(workflow.Output); ok {
				fmt.Printf("step %d output: %v\n", s.Number, o.Value)
			}
		}
		fmt.Printf("step %d committed: %s\n", s.Number, s.Status)
		return nil
	}
	if err := run.Run(context.Background(), commit, nil); err != nil {
		fmt.Println(err)
	}
	// Output:
	// step 1 committed: running
	// step 2 committed: running
	// step 3 output: HELLO 5 letters
	// step 3 committed: completed
}
