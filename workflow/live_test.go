package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/superstep/superstep/workflow"
)

// journal records live events and commits in the order they happen.
type journal struct {
	mu      sync.Mutex
	lines   []string
	refuse  map[int64]int // step -> commits still to refuse
	liveErr error
}

func (j *journal) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = append(j.lines, s)
}

func (j *journal) live(_ context.Context, ev workflow.LiveEvent) error {
	if j.liveErr != nil {
		return j.liveErr
	}
	if d, ok := ev.Value.(workflow.LiveDiscard); ok {
		j.add(fmt.Sprintf("discard %d %s#%d: %v", ev.Step, ev.ExecutorID, ev.Attempt, d.Err))
		return nil
	}
	j.add(fmt.Sprintf("live %d %s#%d.%d %v", ev.Step, ev.ExecutorID, ev.Attempt, ev.Seq, ev.Value))
	return nil
}

func (j *journal) commit(_ context.Context, s *workflow.Step) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.refuse[s.Number] > 0 {
		j.refuse[s.Number]--
		j.lines = append(j.lines, fmt.Sprintf("refused %d", s.Number))
		return errors.New("disk full")
	}
	var outs []string
	for _, e := range s.Events {
		if o, ok := e.(workflow.Output); ok {
			outs = append(outs, fmt.Sprint(o.Value))
		}
	}
	j.lines = append(j.lines, fmt.Sprintf("commit %d %v", s.Number, outs))
	return nil
}

// tokenWorkflow streams the words of its input as live events, then yields
// the whole input; a second executor does the same with its upper case.
func tokenWorkflow(t *testing.T) *workflow.Workflow {
	t.Helper()
	stream := func(id string, f func(string) string) workflow.Executor {
		return workflow.Func(id, func(c *workflow.Context, in string) error {
			out := f(in)
			for _, w := range strings.Fields(out) {
				if err := c.EmitLive(w); err != nil {
					return err
				}
			}
			if err := c.Yield(out); err != nil {
				return err
			}
			if c.HasEdges() {
				return c.Send(out)
			}
			return nil
		})
	}
	a, b := stream("a", func(s string) string { return s }), stream("b", strings.ToUpper)
	wf, err := workflow.NewBuilder("tokens").SetStart(a).AddEdge(a, b).Outputs(a, b).Build()
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

func TestLive_EventsBeforeCommit(t *testing.T) {
	j := &journal{}
	run, err := tokenWorkflow(t).NewRun("r", "x y")
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Run(t.Context(), j.commit, &workflow.RunOptions{Live: j.live}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"live 1 a#1.0 x", "live 1 a#1.1 y", "commit 1 [x y]",
		"live 2 b#1.0 X", "live 2 b#1.1 Y", "commit 2 [X Y]",
	}
	if !slices.Equal(j.lines, want) {
		t.Fatalf("journal\n%s\nwant\n%s", strings.Join(j.lines, "\n"), strings.Join(want, "\n"))
	}
}

// A refused commit leaves the superstep uncommitted: the next Run re-runs
// it, emitting its live events again, and the committed Step still has the
// outputs.
func TestLive_RerunAfterRefusedCommit(t *testing.T) {
	j := &journal{refuse: map[int64]int{2: 1}}
	run, err := tokenWorkflow(t).NewRun("r", "p q")
	if err != nil {
		t.Fatal(err)
	}
	opts := &workflow.RunOptions{Live: j.live}
	if err := run.Run(t.Context(), j.commit, opts); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("first run: %v", err)
	}
	if run.StepNumber() != 1 {
		t.Fatalf("run at step %d after refused commit of 2", run.StepNumber())
	}
	if err := run.Run(t.Context(), j.commit, opts); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"live 1 a#1.0 p", "live 1 a#1.1 q", "commit 1 [p q]",
		"live 2 b#1.0 P", "live 2 b#1.1 Q", "refused 2",
		"live 2 b#1.0 P", "live 2 b#1.1 Q", "commit 2 [P Q]",
	}
	if !slices.Equal(j.lines, want) {
		t.Fatalf("journal\n%s\nwant\n%s", strings.Join(j.lines, "\n"), strings.Join(want, "\n"))
	}
}

// An error from the Live hook abandons the superstep: nothing is committed.
func TestLive_HookErrorAbandonsStep(t *testing.T) {
	j := &journal{liveErr: errors.New("log unavailable")}
	run, err := tokenWorkflow(t).NewRun("r", "x")
	if err != nil {
		t.Fatal(err)
	}
	err = run.Run(t.Context(), j.commit, &workflow.RunOptions{Live: j.live})
	if !errors.Is(err, workflow.ErrLive) || !strings.Contains(err.Error(), "log unavailable") {
		t.Fatalf("err %v", err)
	}
	if len(j.lines) != 0 || run.StepNumber() != 0 {
		t.Fatalf("committed after live failure: %v, step %d", j.lines, run.StepNumber())
	}
}

// A failed attempt's live events are voided by a LiveDiscard before the retry.
func TestLive_DiscardOnRetry(t *testing.T) {
	attempts := 0
	flaky := workflow.Func("f", func(c *workflow.Context, in string) error {
		attempts++
		if err := c.EmitLive(in); err != nil {
			return err
		}
		if attempts == 1 {
			return errors.New("model hiccup")
		}
		return c.Yield(in)
	}, workflow.WithRetry(1, 0))
	wf, err := workflow.NewBuilder("flaky").SetStart(flaky).Outputs(flaky).Build()
	if err != nil {
		t.Fatal(err)
	}
	j := &journal{}
	run, _ := wf.NewRun("r", "tok")
	if err := run.Run(t.Context(), j.commit, &workflow.RunOptions{Live: j.live}); err != nil {
		t.Fatal(err)
	}
	want := []string{"live 1 f#1.0 tok", "discard 1 f#1: model hiccup", "live 1 f#2.0 tok", "commit 1 [tok]"}
	if !slices.Equal(j.lines, want) {
		t.Fatalf("journal\n%s", strings.Join(j.lines, "\n"))
	}
}

// Without a Live hook EmitLive is a no-op, and CanYield/HasEdges describe
// the executor's declaration.
func TestLive_NoHook(t *testing.T) {
	var seen []string
	a := workflow.Func("a", func(c *workflow.Context, in string) error {
		seen = append(seen, fmt.Sprint(c.EmitLive("x"), c.CanYield(), c.HasEdges()))
		return c.Send(in)
	})
	b := workflow.Func("b", func(c *workflow.Context, in string) error {
		seen = append(seen, fmt.Sprint(c.EmitLive("x"), c.CanYield(), c.HasEdges()))
		return c.Yield(in)
	})
	wf, err := workflow.NewBuilder("n").SetStart(a).AddEdge(a, b).Outputs(b).Build()
	if err != nil {
		t.Fatal(err)
	}
	run, _ := wf.NewRun("r", "v")
	if err := run.Run(t.Context(), (&recorder{}).commit, nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []string{"<nil> false true", "<nil> true false"}) {
		t.Fatalf("seen %v", seen)
	}
}

// A sub-workflow's live events reach the parent's hook, nested.
func TestLive_SubWorkflowForwards(t *testing.T) {
	inner := tokenWorkflow(t)
	sub := inner.AsExecutor("sub")
	wf, err := workflow.NewBuilder("outer").SetStart(sub).Outputs(sub).Build()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	live := func(_ context.Context, ev workflow.LiveEvent) error {
		in, ok := ev.Value.(workflow.LiveEvent)
		if !ok {
			return fmt.Errorf("not nested: %#v", ev.Value)
		}
		got = append(got, fmt.Sprintf("%s/%s %v", ev.ExecutorID, in.ExecutorID, in.Value))
		return nil
	}
	run, _ := wf.NewRun("r", "m")
	if err := run.Run(t.Context(), (&recorder{}).commit, &workflow.RunOptions{Live: live}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"sub/a m", "sub/b M"}) {
		t.Fatalf("live %v", got)
	}
}
