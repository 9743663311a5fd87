package workflow_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/superstep/superstep/workflow"
)

// printOutputs is a commit hook that prints each superstep's outputs; a
// host writes the checkpoint and the events there, in one transaction.
func printOutputs(_ context.Context, s *workflow.Step) error {
	for _, e := range s.Events {
		if o, ok := e.(workflow.Output); ok {
			fmt.Printf("step %d: %v\n", s.Number, o.Value)
		}
	}
	return nil
}

// A chain: each Map's result is the next one's input, one superstep each.
func Example_chain() {
	trim := workflow.Map("trim", func(c *workflow.Context, s string) (string, error) {
		return strings.TrimSpace(s), nil
	})
	count := workflow.Map("count", func(c *workflow.Context, s string) (int, error) {
		return len(strings.Fields(s)), nil
	})
	report := workflow.Map("report", func(c *workflow.Context, n int) (string, error) {
		return fmt.Sprintf("%d words", n), nil
	})
	wf, err := workflow.NewBuilder("words").SetStart(trim).AddChain(trim, count, report).Outputs(report).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	run, _ := wf.NewRun("run-1", "  the quick brown fox ")
	if err := run.Run(context.Background(), printOutputs, nil); err != nil {
		fmt.Println(err)
	}
	// Output:
	// step 3: 4 words
}

// Job is the message of the fan-out example.
type Job struct {
	Text    string
	Workers int
}

func init() { workflow.RegisterType[Job]("example.Job") }

// A fan-out: a typed selector picks the workers, a When condition skips
// empty jobs, and a fan-in delivers the workers' results together. (The
// third worker, never picked here, is an output so its result has
// somewhere to go: Build checks that.)
func Example_fanOut() {
	split := workflow.Map("split", func(c *workflow.Context, s string) (Job, error) {
		return Job{Text: s, Workers: 2}, nil
	})
	workers := []workflow.Executor{
		workflow.Map("upper", func(c *workflow.Context, j Job) (string, error) { return strings.ToUpper(j.Text), nil }),
		workflow.Map("reverse", func(c *workflow.Context, j Job) (string, error) {
			r := []rune(j.Text)
			for i, k := 0, len(r)-1; i < k; i, k = i+1, k-1 {
				r[i], r[k] = r[k], r[i]
			}
			return string(r), nil
		}),
		workflow.Map("unused", func(c *workflow.Context, j Job) (string, error) { return "never", nil }),
	}
	join := workflow.Map("join", func(c *workflow.Context, parts []any) (string, error) {
		return strings.TrimSpace(fmt.Sprintln(parts...)), nil
	})
	wf, err := workflow.NewBuilder("fan").SetStart(split).
		AddFanOut(split, workers,
			workflow.Select(func(j Job, ws []workflow.Executor) []workflow.Executor { return ws[:j.Workers] }),
			workflow.When(func(j Job) bool { return j.Text != "" })).
		AddFanIn(workers[:2], join).
		Outputs(join, workers[2]).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	run, _ := wf.NewRun("run-1", "abc")
	if err := run.Run(context.Background(), printOutputs, nil); err != nil {
		fmt.Println(err)
	}
	// Output:
	// step 3: ABC cba
}
