package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/workflow"
)

func TestRun_StateVisibleOnlyAfterBoundary(t *testing.T) {
	// a and b run in the same superstep; a writes, b reads (before and after).
	a := workflow.Func("a", func(c *workflow.Context, v string) error {
		if err := c.Set("k", "from-a"); err != nil {
			return err
		}
		own, _ := c.Get("k") // read-your-writes
		return c.Send("a-own=" + fmt.Sprint(own))
	})
	b := workflow.Func("b", func(c *workflow.Context, v string) error {
		got, ok := c.Get("k")
		return c.Send(fmt.Sprintf("b-same-step=%v,%v", got, ok))
	})
	reader := workflow.Func("reader", func(c *workflow.Context, v string) error {
		got, ok, err := workflow.GetState[string](c, "k")
		if err != nil {
			return err
		}
		return c.Yield(fmt.Sprintf("%s|next=%s,%v", v, got, ok))
	})
	start := pass[string]("start")
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(start).
		AddFanOut(start, []workflow.Executor{a, b}).
		AddEdge(a, reader).AddEdge(b, reader).Outputs(reader))
	run, rec, err := runAll(t, wf, "go")
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"a-own=from-a|next=from-a,true", "b-same-step=<nil>,false|next=from-a,true"}
	if got := rec.outputs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("outputs = %q, want %q", got, want)
	}
	if run.Status() != workflow.Completed || run.StepNumber() != 3 {
		t.Fatalf("status %s step %d", run.Status(), run.StepNumber())
	}
}

func TestRun_StateWrongTypeAndDelete(t *testing.T) {
	ex := workflow.Func("a", func(c *workflow.Context, v string) error {
		if c.Step() == 1 {
			_ = c.Set("n", 7)
			_ = c.Set("gone", "x")
			return c.Send("again")
		}
		if _, _, err := workflow.GetState[string](c, "n"); err == nil {
			return errors.New("GetState[string] of an int did not fail")
		}
		n, ok, err := workflow.GetState[int](c, "n")
		c.Delete("gone")
		_, stillThere := c.Get("gone")
		return c.Yield(fmt.Sprint(n, ok, err, stillThere))
	})
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(ex).AddEdge(ex, ex, workflow.When(func(m string) bool { return m == "again" })).Outputs(ex))
	run, rec, err := runAll(t, wf, "first")
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.outputs(); !reflect.DeepEqual(got, []any{"7 true <nil> false"}) {
		t.Fatalf("outputs = %v", got)
	}
	parts, _ := run.Checkpoint()
	for _, p := range parts {
		if p.Name == "state/gone" {
			t.Fatal("deleted key still in checkpoint")
		}
	}
}

func TestRun_ExecutorMessagesInOrder(t *testing.T) {
	split := workflow.Func("split", func(c *workflow.Context, v string) error {
		for _, part := range strings.Split(v, ",") {
			if err := c.Send(part); err != nil {
				return err
			}
		}
		return nil
	})
	var seen []string
	collect := workflow.Func("collect", func(c *workflow.Context, v string) error {
		seen = append(seen, v)
		return nil
	})
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(split).AddEdge(split, collect))
	if _, _, err := runAll(t, wf, "1,2,3,4,5,6,7,8"); err != nil {
		t.Fatal(err)
	}
	if strings.Join(seen, ",") != "1,2,3,4,5,6,7,8" {
		t.Fatalf("order %v", seen)
	}
}

func TestRun_ExecutorsRunConcurrently(t *testing.T) {
	// Each of a and b waits for the other within one superstep: this only
	// finishes if they run at the same time.
	aReady, bReady := make(chan struct{}), make(chan struct{})
	meet := func(id string, mine, theirs chan struct{}) workflow.Executor {
		return workflow.Func(id, func(c *workflow.Context, v string) error {
			close(mine)
			select {
			case <-theirs:
				return nil
			case <-c.Context().Done():
				return c.Context().Err()
			}
		})
	}
	start := pass[string]("start")
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(start).
		AddFanOut(start, []workflow.Executor{meet("a", aReady, bReady), meet("b", bReady, aReady)}))
	run, _ := wf.NewRun("r", "x")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := run.Run(ctx, (&recorder{}).commit, nil); err != nil {
		t.Fatalf("executors did not run concurrently: %v", err)
	}
}

func TestRun_RetryRerunsOnlyThatExecutor(t *testing.T) {
	var flakyCalls, steadyCalls atomic.Int32
	flaky := workflow.Func("flaky", func(c *workflow.Context, v string) error {
		n := flakyCalls.Add(1)
		_ = c.Set("flaky-attempt", c.Attempt())
		if err := c.Yield(fmt.Sprintf("attempt %d", c.Attempt())); err != nil {
			return err
		}
		if n < 3 {
			return fmt.Errorf("transient %d", n)
		}
		return nil
	}, workflow.WithRetry(2, time.Millisecond))
	steady := workflow.Func("steady", func(c *workflow.Context, v string) error {
		steadyCalls.Add(1)
		return nil
	})
	start := pass[string]("start")
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(start).
		AddFanOut(start, []workflow.Executor{flaky, steady}).Outputs(flaky))
	run, rec, err := runAll(t, wf, "x")
	if err != nil {
		t.Fatal(err)
	}
	if flakyCalls.Load() != 3 || steadyCalls.Load() != 1 {
		t.Fatalf("calls flaky=%d steady=%d", flakyCalls.Load(), steadyCalls.Load())
	}
	// Only the successful attempt's yields and writes count.
	if got := rec.outputs(); !reflect.DeepEqual(got, []any{"attempt 3"}) {
		t.Fatalf("outputs %v", got)
	}
	parts, _ := run.Checkpoint()
	if len(parts) != 2 || parts[1].Name != "state/flaky-attempt" || string(parts[1].Data) != "int\n3" {
		t.Fatalf("state after retries: %v %s", parts, parts[len(parts)-1].Data)
	}
	failed := eventsOf[workflow.ExecutorFailed](rec)
	if len(failed) != 2 || failed[0].Final || failed[1].Attempt != 2 || rec.steps[1].Number != 2 {
		t.Fatalf("failed events %+v", failed)
	}
}

func TestRun_FailureAfterRetries(t *testing.T) {
	boom := errors.New("boom")
	var calls atomic.Int32
	bad := workflow.Func("bad", func(c *workflow.Context, v string) error {
		calls.Add(1)
		_ = c.Yield("never published")
		return boom
	}, workflow.WithRetry(1, 0))
	start := pass[string]("start")
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(start).AddEdge(start, bad).Outputs(bad))
	run, rec, err := runAll(t, wf, "x")
	if !errors.Is(err, boom) || !errors.Is(err, workflow.ErrExecutorFailed) || !errors.Is(err, workflow.ErrRunFailed) {
		t.Fatalf("err = %v", err)
	}
	last := rec.steps[len(rec.steps)-1]
	if last.Status != workflow.Failed || !errors.Is(last.Err, boom) || last.Number != 2 || calls.Load() != 2 {
		t.Fatalf("last step %+v calls %d", last, calls.Load())
	}
	if len(rec.outputs()) != 0 {
		t.Fatalf("a failed superstep published %v", rec.outputs())
	}
	if run.Status() != workflow.Failed || !errors.Is(run.Run(t.Context(), rec.commit, nil), workflow.ErrRunFailed) {
		t.Fatal("a failed run ran again")
	}
	// The failure survives a checkpoint.
	parts, _ := run.Checkpoint()
	restored, err := wf.Restore("r", parts)
	if err != nil || restored.Status() != workflow.Failed || !strings.Contains(restored.Err().Error(), "boom") {
		t.Fatalf("restored %v %v", restored, err)
	}
}

func TestRun_PanicIsAnExecutorFailure(t *testing.T) {
	start := workflow.Func("start", func(c *workflow.Context, v string) error { panic("oops") })
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(start))
	_, _, err := runAll(t, wf, "x")
	if !errors.Is(err, workflow.ErrExecutorFailed) || !strings.Contains(err.Error(), "panicked: oops") {
		t.Fatalf("err = %v", err)
	}
}

func TestRun_MaxSupersteps(t *testing.T) {
	loop := workflow.Func("loop", func(c *workflow.Context, n int) error { return c.Send(n + 1) })
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(loop).AddEdge(loop, loop))
	run, _ := wf.NewRun("r", 0)
	rec := &recorder{}
	err := run.Run(t.Context(), rec.commit, &workflow.RunOptions{MaxSupersteps: 5})
	if !errors.Is(err, workflow.ErrMaxSupersteps) || !strings.Contains(err.Error(), "limit 5") {
		t.Fatalf("err = %v", err)
	}
	if len(rec.steps) != 6 || rec.steps[5].Number != 6 || rec.steps[5].Status != workflow.Failed || rec.steps[4].Status != workflow.Running {
		t.Fatalf("steps: %d, last %+v", len(rec.steps), rec.steps[len(rec.steps)-1])
	}
	// The failing step carries a checkpoint that restores as failed at step 6.
	restored, err := wf.Restore("r", rec.steps[5].Checkpoint)
	if err != nil || restored.Status() != workflow.Failed || restored.StepNumber() != 6 || !errors.Is(restored.Err(), workflow.ErrRunFailed) {
		t.Fatalf("restore of the failed step: %v %v", restored, err)
	}
}

func TestRun_SilentSuperstepsAreCommitted(t *testing.T) {
	a, b := pass[string]("a"), workflow.Func("b", func(*workflow.Context, string) error { return nil })
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(a).AddEdge(a, b))
	_, rec, err := runAll(t, wf, "x")
	if err != nil || len(rec.steps) != 2 {
		t.Fatalf("err %v, %d commits", err, len(rec.steps))
	}
	for i, s := range rec.steps {
		if s.Number != int64(i+1) || len(s.Checkpoint) == 0 {
			t.Fatalf("step %d: %+v", i, s)
		}
	}
	if rec.steps[1].Status != workflow.Completed {
		t.Fatalf("final status %s", rec.steps[1].Status)
	}
}

func TestRun_CommitErrorStopsAndRewinds(t *testing.T) {
	var calls atomic.Int32
	a := workflow.Func("a", func(c *workflow.Context, n int) error {
		calls.Add(1)
		if n < 3 {
			return c.Send(n + 1)
		}
		return c.Yield(n)
	})
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(a).AddEdge(a, a).Outputs(a))
	run, _ := wf.NewRun("r", 1)
	diskFull := errors.New("disk full")
	fail := func(_ context.Context, s *workflow.Step) error {
		if s.Number == 2 {
			return diskFull
		}
		return nil
	}
	if err := run.Run(t.Context(), fail, nil); !errors.Is(err, diskFull) {
		t.Fatalf("err = %v", err)
	}
	if run.StepNumber() != 1 || calls.Load() != 2 {
		t.Fatalf("after failed commit: step %d, calls %d", run.StepNumber(), calls.Load())
	}
	rec := &recorder{}
	if err := run.Run(t.Context(), rec.commit, nil); err != nil {
		t.Fatal(err)
	}
	if rec.steps[0].Number != 2 || !reflect.DeepEqual(rec.outputs(), []any{3}) {
		t.Fatalf("resumed at %d with outputs %v", rec.steps[0].Number, rec.outputs())
	}
}

type ctxKey struct{}

func TestRun_ContextValuesAndIdempotencyKey(t *testing.T) {
	var keys []string
	a := workflow.Func("a", func(c *workflow.Context, n int) error {
		keys = append(keys, c.IdempotencyKey())
		if c.Attempt() == 1 {
			return errors.New("retry me")
		}
		return c.Yield(fmt.Sprintf("%v %s %s %d", c.Context().Value(ctxKey{}), c.RunID(), c.ExecutorID(), c.Step()))
	}, workflow.WithRetry(1, 0))
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(a).Outputs(a))
	run, _ := wf.NewRun("run-9", 1)
	rec := &recorder{}
	ctx := context.WithValue(t.Context(), ctxKey{}, "carried")
	if err := run.Run(ctx, rec.commit, nil); err != nil {
		t.Fatal(err)
	}
	if got := rec.outputs(); !reflect.DeepEqual(got, []any{"carried run-9 a 1"}) {
		t.Fatalf("outputs %v", got)
	}
	if len(keys) != 2 || keys[0] != keys[1] || keys[0] != "run-9:1:a" {
		t.Fatalf("keys %v", keys)
	}
}

func TestRun_Cancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	started := make(chan struct{})
	slow := workflow.Func("slow", func(c *workflow.Context, n int) error {
		if n == 2 {
			close(started)
			<-c.Context().Done()
			return c.Context().Err()
		}
		return c.Send(n + 1)
	})
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(slow).AddEdge(slow, slow))
	run, _ := wf.NewRun("r", 1)
	rec := &recorder{}
	go func() { <-started; cancel() }()
	err := run.Run(ctx, rec.commit, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if len(rec.steps) != 1 || run.StepNumber() != 1 || run.Status() != workflow.Running {
		t.Fatalf("commits %d, step %d, status %s", len(rec.steps), run.StepNumber(), run.Status())
	}
	// Cancelled before starting: nothing runs.
	if err := run.Run(ctx, rec.commit, nil); !errors.Is(err, context.Canceled) || len(rec.steps) != 1 {
		t.Fatalf("second Run: %v", err)
	}
}

func TestRun_TypeErrors(t *testing.T) {
	t.Run("send to a target that cannot handle it", func(t *testing.T) {
		a := workflow.Func("a", func(c *workflow.Context, s string) error {
			_ = c.Send(42) // ignored error still fails the attempt
			return nil
		})
		wf := mustBuild(t, workflow.NewBuilder("t").SetStart(a).AddEdge(a, pass[string]("b")))
		if _, _, err := runAll(t, wf, "x"); !errors.Is(err, workflow.ErrMessageType) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("send an unregistered type", func(t *testing.T) {
		type secret struct{ A int }
		a := workflow.Func("a", func(c *workflow.Context, s string) error { return c.Send(secret{}) })
		b := workflow.Func("b", func(c *workflow.Context, v any) error { return nil })
		wf := mustBuild(t, workflow.NewBuilder("t").SetStart(a).AddEdge(a, b))
		if _, _, err := runAll(t, wf, "x"); !errors.Is(err, workflow.ErrUnregisteredType) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("yield from an undeclared executor", func(t *testing.T) {
		a := workflow.Func("a", func(c *workflow.Context, s string) error { return c.Yield(s) })
		wf := mustBuild(t, workflow.NewBuilder("t").SetStart(a))
		if _, _, err := runAll(t, wf, "x"); err == nil || !strings.Contains(err.Error(), "neither output nor intermediate") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("send with no edges", func(t *testing.T) {
		a := workflow.Func("a", func(c *workflow.Context, s string) error { return c.Send(s) })
		wf := mustBuild(t, workflow.NewBuilder("t").SetStart(a))
		if _, _, err := runAll(t, wf, "x"); !errors.Is(err, workflow.ErrNoRoute) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestRun_IntermediateAndEventOrder(t *testing.T) {
	a := workflow.Func("a", func(c *workflow.Context, s string) error {
		_ = c.Yield("progress")
		return c.Send(s)
	})
	b := tagged("b")
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(a).AddEdge(a, b).Intermediate(a).Outputs(b))
	_, rec, err := runAll(t, wf, "x")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range rec.steps[0].Events {
		kinds = append(kinds, strings.TrimPrefix(fmt.Sprintf("%T", e), "workflow."))
	}
	want := "SuperstepStarted ExecutorInvoked Intermediate ExecutorCompleted SuperstepCompleted Status"
	if strings.Join(kinds, " ") != want {
		t.Fatalf("events %v", kinds)
	}
	if im := eventsOf[workflow.Intermediate](rec); len(im) != 1 || im[0].Value != "progress" || im[0].Step != 1 {
		t.Fatalf("intermediate %+v", im)
	}
}

func TestRun_EventsIterator(t *testing.T) {
	a := workflow.Func("a", func(c *workflow.Context, n int) error {
		if err := c.Yield(n); err != nil {
			return err
		}
		if n < 5 {
			return c.Send(n + 1)
		}
		return nil
	})
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(a).AddEdge(a, a).Outputs(a))
	run, _ := wf.NewRun("r", 1)
	committed := 0
	var outs []any
	for ev, err := range run.Events(t.Context(), func(context.Context, *workflow.Step) error { committed++; return nil }, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := ev.(workflow.Output); ok {
			if int64(committed) != o.Step {
				t.Fatalf("output of step %d seen before its commit (%d commits)", o.Step, committed)
			}
			outs = append(outs, o.Value)
			if o.Value == 3 {
				break
			}
		}
	}
	if !reflect.DeepEqual(outs, []any{1, 2, 3}) || run.StepNumber() != 3 || committed != 3 {
		t.Fatalf("outs %v step %d commits %d", outs, run.StepNumber(), committed)
	}
	// A commit error comes out of the iterator.
	bad := errors.New("nope")
	for ev, err := range run.Events(t.Context(), func(context.Context, *workflow.Step) error { return bad }, nil) {
		if ev != nil || !errors.Is(err, bad) {
			t.Fatalf("got %v, %v", ev, err)
		}
	}
}

func TestRun_SendAfterCompletion(t *testing.T) {
	a := workflow.Func("a", func(c *workflow.Context, s string) error {
		n, _, _ := workflow.GetState[int](c, "turns")
		if err := c.Set("turns", n+1); err != nil {
			return err
		}
		return c.Yield(fmt.Sprintf("%s #%d", s, n+1))
	})
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(a).Outputs(a))
	run, rec, err := runAll(t, wf, "hi")
	if err != nil || run.Status() != workflow.Completed {
		t.Fatal(err, run.Status())
	}
	if err := run.Send(3); !errors.Is(err, workflow.ErrMessageType) {
		t.Fatalf("Send(int) = %v", err)
	}
	if err := run.Send("again"); err != nil || run.Status() != workflow.Running {
		t.Fatalf("Send: %v, status %s", err, run.Status())
	}
	if err := run.Run(t.Context(), rec.commit, nil); err != nil {
		t.Fatal(err)
	}
	if got := rec.outputs(); !reflect.DeepEqual(got, []any{"hi #1", "again #2"}) || run.StepNumber() != 2 {
		t.Fatalf("outputs %v step %d", got, run.StepNumber())
	}
}

func TestRun_PanicErrorKeepsStackOutOfMessage(t *testing.T) {
	start := workflow.Func("start", func(c *workflow.Context, v string) error { panic("kaboom") })
	_, rec, err := runAll(t, mustBuild(t, workflow.NewBuilder("t").SetStart(start)), "x")
	var pe *workflow.PanicError
	if !errors.As(err, &pe) || pe.ExecutorID != "start" || len(pe.Stack) == 0 || strings.Contains(err.Error(), "goroutine") {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(string(rec.steps[0].Checkpoint[0].Data), "goroutine") {
		t.Fatal("stack trace stored in the checkpoint")
	}
}

func TestRun_CancelDuringRetryBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var calls atomic.Int32
	bad := workflow.Func("bad", func(c *workflow.Context, n int) error {
		if calls.Add(1) == 1 {
			cancel() // cancelled while the runner waits to retry
		}
		return errors.New("fails")
	}, workflow.WithRetry(5, time.Hour))
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(bad))
	run, _ := wf.NewRun("r", 1)
	rec := &recorder{}
	if err := run.Run(ctx, rec.commit, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if len(rec.steps) != 0 || calls.Load() != 1 || run.Status() != workflow.Running {
		t.Fatalf("commits %d calls %d status %s", len(rec.steps), calls.Load(), run.Status())
	}
}

func TestRun_SameKeySetByTwoExecutors(t *testing.T) {
	setter := func(id string) workflow.Executor {
		return workflow.Func(id, func(c *workflow.Context, s string) error { return c.Set("k", id) })
	}
	for range 20 { // executors finish in varying order; the result must not
		start := pass[string]("start")
		wf := mustBuild(t, workflow.NewBuilder("t").SetStart(start).
			AddFanOut(start, []workflow.Executor{setter("first"), setter("second"), setter("third")}))
		run, _, err := runAll(t, wf, "x")
		if err != nil {
			t.Fatal(err)
		}
		parts, _ := run.Checkpoint()
		if string(parts[1].Data) != "string\n\"third\"" {
			t.Fatalf("k = %s, want the executor added last", parts[1].Data)
		}
	}
}
