package workflow_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/workflow"
)

// notes renders a step's annotations as "executor path: value".
func notes(s *workflow.Step) []string {
	var out []string
	for _, a := range s.Annotations {
		if len(a.Path) == 0 || a.Path[0] != a.ExecutorID {
			out = append(out, fmt.Sprintf("bad path %q of %s", a.Path, a.ExecutorID))
			continue
		}
		out = append(out, fmt.Sprintf("%s %s: %v", a.ExecutorID, strings.Join(a.Path, "/"), a.Value))
	}
	return out
}

// annotating returns an executor that annotates "<prefix><input>#<n>" for
// n = 1..count and sends its input on when it has edges.
func annotating(id string, count int) workflow.Executor {
	return workflow.Func(id, func(c *workflow.Context, in string) error {
		for n := 1; n <= count; n++ {
			c.Annotate(fmt.Sprintf("%s#%d", in, n))
		}
		if c.HasEdges() {
			return c.Send(in)
		}
		return nil
	})
}

func TestAnnotate_Plain(t *testing.T) {
	a, b := annotating("a", 2), annotating("b", 1)
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(a).AddEdge(a, b))
	_, rec, err := runAll(t, wf, "x")
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.steps) != 2 {
		t.Fatalf("%d steps", len(rec.steps))
	}
	if got, want := notes(rec.steps[0]), []string{"a a: x#1", "a a: x#2"}; !slices.Equal(got, want) {
		t.Errorf("step 1 annotations %q, want %q", got, want)
	}
	if got, want := notes(rec.steps[1]), []string{"b b: x#1"}; !slices.Equal(got, want) {
		t.Errorf("step 2 annotations %q, want %q", got, want)
	}
	// Annotations describe the step only: they are not in its checkpoint.
	for _, s := range rec.steps {
		if blob := workflow.JoinParts(s.Checkpoint); bytes.Contains(blob, []byte("x#1")) {
			t.Errorf("step %d: an annotation is in the checkpoint: %q", s.Number, blob)
		}
	}
}

func TestAnnotate_RetriedAttemptDropped(t *testing.T) {
	flaky := workflow.Func("flaky", func(c *workflow.Context, in string) error {
		c.Annotate(fmt.Sprintf("attempt %d", c.Attempt()))
		if c.Attempt() < 3 {
			return errors.New("transient")
		}
		return nil
	}, workflow.WithRetry(2, 0))
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(flaky))
	_, rec, err := runAll(t, wf, "x")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := notes(rec.steps[0]), []string{"flaky flaky: attempt 3"}; !slices.Equal(got, want) {
		t.Fatalf("annotations %q, want %q", got, want)
	}
}

// inner builds a sub-workflow a -> b whose executors annotate; b fails
// the first failB times it runs.
func innerAnnotating(t *testing.T, failB int) *workflow.Workflow {
	t.Helper()
	var runs atomic.Int32
	a := annotating("a", 1)
	b := workflow.Func("b", func(c *workflow.Context, in string) error {
		c.Annotate("b saw " + in)
		if int(runs.Add(1)) <= failB {
			return errors.New("b down")
		}
		return c.Yield(in + "!")
	})
	return mustBuild(t, workflow.NewBuilder("inner").SetStart(a).AddEdge(a, b).Outputs(b))
}

func TestAnnotate_SubWorkflow(t *testing.T) {
	// The parent's sub-workflow executor fails once (inner b fails), and
	// its retry runs the inner workflow again: the first attempt's
	// annotations, inner ones included, are dropped.
	sub := innerAnnotating(t, 1).AsExecutor("sub", workflow.WithRetry(1, 0))
	start := annotating("start", 1)
	wf := mustBuild(t, workflow.NewBuilder("outer").SetStart(start).AddEdge(start, sub).Outputs(sub))
	_, rec, err := runAll(t, wf, "x")
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.steps) != 2 {
		t.Fatalf("%d steps", len(rec.steps))
	}
	if got, want := notes(rec.steps[0]), []string{"start start: x#1"}; !slices.Equal(got, want) {
		t.Errorf("step 1 annotations %q, want %q", got, want)
	}
	want := []string{"sub sub/a: x#1", "sub sub/b: b saw x"}
	if got := notes(rec.steps[1]); !slices.Equal(got, want) {
		t.Errorf("step 2 annotations %q, want %q", got, want)
	}
	if got := rec.outputs(); !slices.Equal(got, []any{"x!"}) {
		t.Errorf("outputs %v", got)
	}

	// Nested twice: the path names every level, ExecutorID the outermost.
	inner := innerAnnotating(t, 0)
	inEx := inner.AsExecutor("in")
	mid := mustBuild(t, workflow.NewBuilder("mid").SetStart(inEx).Outputs(inEx))
	midEx := mid.AsExecutor("mid")
	wf = mustBuild(t, workflow.NewBuilder("top").SetStart(midEx).Outputs(midEx))
	_, rec, err = runAll(t, wf, "y")
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"mid mid/in/a: y#1", "mid mid/in/b: b saw y"}
	if len(rec.steps) != 1 || !slices.Equal(notes(rec.steps[0]), want) {
		t.Fatalf("%d steps, annotations %q, want %q", len(rec.steps), notes(rec.steps[0]), want)
	}
}

func TestAnnotate_FanOut(t *testing.T) {
	// Workers finish in reverse order; their annotations are still in
	// executor order, each one's in the order made.
	worker := func(i int) workflow.Executor {
		return workflow.Func(fmt.Sprintf("w%d", i), func(c *workflow.Context, in string) error {
			time.Sleep(time.Duration(3-i) * 5 * time.Millisecond)
			c.Annotate(fmt.Sprintf("%d.1", i))
			c.Annotate(fmt.Sprintf("%d.2", i))
			if in == "fail" && i == 1 {
				return errors.New("w1 down")
			}
			return nil
		})
	}
	start := pass[string]("start")
	ws := []workflow.Executor{worker(0), worker(1), worker(2)}
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(start).AddFanOut(start, ws))
	_, rec, err := runAll(t, wf, "ok")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"w0 w0: 0.1", "w0 w0: 0.2", "w1 w1: 1.1", "w1 w1: 1.2", "w2 w2: 2.1", "w2 w2: 2.2"}
	if got := notes(rec.steps[1]); !slices.Equal(got, want) {
		t.Fatalf("annotations %q, want %q", got, want)
	}

	// A failed step keeps the annotations of the executors that succeeded
	// (their work happened) and drops the failed one's.
	_, rec, err = runAll(t, wf, "fail")
	if !errors.Is(err, workflow.ErrExecutorFailed) {
		t.Fatalf("err %v", err)
	}
	last := rec.steps[len(rec.steps)-1]
	want = []string{"w0 w0: 0.1", "w0 w0: 0.2", "w2 w2: 2.1", "w2 w2: 2.2"}
	if got := notes(last); last.Status != workflow.Failed || !slices.Equal(got, want) {
		t.Fatalf("status %s, annotations %q, want %q", last.Status, got, want)
	}
}

func TestInvocation(t *testing.T) {
	type seen struct {
		step int64
		via  string
		inv  workflow.Invocation
	}
	var got []seen
	record := func(via string) workflow.Executor {
		return workflow.Func(via, func(c *workflow.Context, in string) error {
			if c.Invocation().ID != workflow.InvocationFrom(c.Context()).ID {
				return errors.New("Context.Invocation and InvocationFrom disagree")
			}
			got = append(got, seen{c.Step(), via, c.Invocation()})
			if c.HasEdges() {
				return c.Send(in)
			}
			return nil
		})
	}
	innerWF := mustBuild(t, workflow.NewBuilder("inner").SetStart(record("inner")))
	start, sub := record("outer"), innerWF.AsExecutor("sub")
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(start).AddEdge(start, sub))
	md := map[string]string{"k": "v"}

	check := func(name string, wantID string, wantMax int64) {
		t.Helper()
		if len(got) != 2 {
			t.Fatalf("%s: %d invocations seen", name, len(got))
		}
		outer, inner := got[0], got[1]
		if outer.via != "outer" || outer.inv.ID != wantID || outer.inv.Metadata["k"] != "v" || outer.inv.MaxSupersteps != wantMax {
			t.Errorf("%s: outer executor saw %+v", name, outer)
		}
		// The inner run shares the parent's invocation, with its own limit.
		if inner.via != "inner" || inner.inv.ID != wantID || inner.inv.Metadata["k"] != "v" ||
			inner.inv.MaxSupersteps != workflow.DefaultMaxSupersteps {
			t.Errorf("%s: inner executor saw %+v", name, inner)
		}
		got = nil
	}

	run, err := wf.NewRun("r", "x")
	if err != nil {
		t.Fatal(err)
	}
	// The ctx's invocation is overridden by the options'.
	ctx := workflow.WithInvocation(context.Background(), workflow.Invocation{ID: "from ctx"})
	opts := &workflow.RunOptions{MaxSupersteps: 7, Invocation: &workflow.Invocation{ID: "resp_1", Metadata: md, MaxSupersteps: 99}}
	if err := run.Run(ctx, (&recorder{}).commit, opts); err != nil {
		t.Fatal(err)
	}
	check("options", "resp_1", 7)

	// Without RunOptions.Invocation, the ctx's reaches the executors.
	run, err = wf.NewRun("r", "x")
	if err != nil {
		t.Fatal(err)
	}
	ctx = workflow.WithInvocation(context.Background(), workflow.Invocation{ID: "resp_2", Metadata: md})
	if err := run.Run(ctx, (&recorder{}).commit, nil); err != nil {
		t.Fatal(err)
	}
	check("ctx", "resp_2", workflow.DefaultMaxSupersteps)

	if inv := workflow.InvocationFrom(context.Background()); inv.ID != "" || inv.Metadata != nil || inv.MaxSupersteps != 0 {
		t.Fatalf("empty context: %+v", inv)
	}
}
