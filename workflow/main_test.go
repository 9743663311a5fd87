package workflow_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/superstep/superstep/workflow"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a CommitFunc that keeps every step.
type recorder struct {
	steps []*workflow.Step
}

func (r *recorder) commit(_ context.Context, s *workflow.Step) error {
	r.steps = append(r.steps, s)
	return nil
}

// outputs returns the values of all Output events, in order.
func (r *recorder) outputs() []any {
	var out []any
	for _, s := range r.steps {
		for _, e := range s.Events {
			if o, ok := e.(workflow.Output); ok {
				out = append(out, o.Value)
			}
		}
	}
	return out
}

// events returns every event of type E, in order.
func eventsOf[E workflow.Event](r *recorder) []E {
	var out []E
	for _, s := range r.steps {
		for _, e := range s.Events {
			if v, ok := e.(E); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// mustBuild builds b or fails the test.
func mustBuild(t testing.TB, b *workflow.Builder) *workflow.Workflow {
	t.Helper()
	wf, err := b.Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return wf
}

// runAll starts a run of wf with input and runs it to its end.
func runAll(t testing.TB, wf *workflow.Workflow, input any) (*workflow.Run, *recorder, error) {
	t.Helper()
	run, err := wf.NewRun("run-1", input)
	if err != nil {
		t.Fatalf("NewRun: %v", err)
	}
	rec := &recorder{}
	err = run.Run(context.Background(), rec.commit, nil)
	return run, rec, err
}

// tagged returns an output executor that yields id + ":" + its input.
func tagged(id string) workflow.Executor {
	return workflow.Func(id, func(c *workflow.Context, v string) error { return c.Yield(id + ":" + v) })
}

// pass returns an executor that sends its input on.
func pass[T any](id string) workflow.Executor {
	return workflow.Func(id, func(c *workflow.Context, v T) error { return c.Send(v) })
}
