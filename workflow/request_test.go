package workflow_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/superstep/superstep/workflow"
)

// Approval is the answer type of the approval tests.
type Approval struct {
	OK     bool   `json:"ok"`
	Reason string `json:"reason"`
}

func init() { workflow.RegisterType[Approval]("workflow_test.Approval") }

// approver asks for an Approval for each input and yields the verdict.
func approver(id string) workflow.Executor {
	return workflow.Handlers(id, []workflow.Handler{
		workflow.On(func(c *workflow.Context, doc string) error {
			_, err := workflow.RequestInput[Approval](c, "", "approve "+doc+"?")
			return err
		}),
		workflow.On(func(c *workflow.Context, a workflow.Answer[Approval]) error {
			return c.Yield(fmt.Sprintf("%v: ok=%v (%s)", a.Payload, a.Value.OK, a.Value.Reason))
		}),
	})
}

func TestRequest_RoundTripThroughCheckpoint(t *testing.T) {
	build := func() *workflow.Workflow {
		start := pass[string]("start")
		ask := approver("ask")
		return mustBuild(t, workflow.NewBuilder("hitl").SetStart(start).AddEdge(start, ask).Outputs(ask))
	}
	run, rec, err := runAll(t, build(), "doc1")
	if err != nil {
		t.Fatal(err)
	}
	if run.Status() != workflow.Idle || rec.steps[len(rec.steps)-1].Status != workflow.Idle {
		t.Fatalf("status %s", run.Status())
	}
	pending := run.Pending()
	if len(pending) != 1 || pending[0].ExecutorID != "ask" || pending[0].Payload != "approve doc1?" ||
		pending[0].ResponseType != reflect.TypeFor[Approval]() {
		t.Fatalf("pending %+v", pending)
	}
	infos := eventsOf[workflow.RequestInfo](rec)
	if len(infos) != 1 || infos[0].Request.ID != pending[0].ID {
		t.Fatalf("request events %+v", infos)
	}
	// Idle: Run does nothing until answered.
	if err := run.Run(t.Context(), rec.commit, nil); err != nil || len(rec.steps) != 2 {
		t.Fatalf("Run on idle: %v, %d steps", err, len(rec.steps))
	}
	parts, err := run.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	restored, err := build().Restore("run-1", workflow.MustSplit(t, workflow.JoinParts(parts)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(restored.Pending(), pending) {
		t.Fatalf("pending after restore %+v, want %+v", restored.Pending(), pending)
	}
	id := pending[0].ID
	if err := restored.Respond("nope", Approval{}); !errors.Is(err, workflow.ErrUnknownRequest) {
		t.Fatalf("unknown id: %v", err)
	}
	if err := restored.Respond(id, "yes"); !errors.Is(err, workflow.ErrAnswerType) {
		t.Fatalf("wrong type: %v", err)
	}
	if err := restored.Respond(id, Approval{OK: true, Reason: "fine"}); err != nil {
		t.Fatal(err)
	}
	if err := restored.Respond(id, Approval{}); !errors.Is(err, workflow.ErrUnknownRequest) {
		t.Fatalf("second answer: %v", err)
	}
	rec2 := &recorder{}
	if err := restored.Run(t.Context(), rec2.commit, nil); err != nil {
		t.Fatal(err)
	}
	if got := rec2.outputs(); !reflect.DeepEqual(got, []any{"approve doc1?: ok=true (fine)"}) || rec2.steps[0].Number != 3 {
		t.Fatalf("outputs %v", got)
	}
	if restored.Status() != workflow.Completed {
		t.Fatalf("status %s", restored.Status())
	}
}

func TestRequest_IDsAreStableAndExplicitIDsChecked(t *testing.T) {
	ask := workflow.Handlers("ask", []workflow.Handler{
		workflow.On(func(c *workflow.Context, s string) error {
			if _, err := workflow.RequestInput[string](c, "fixed", s); err != nil {
				return err
			}
			_, err := workflow.RequestInput[string](c, "fixed", s)
			return err
		}),
		workflow.On(func(*workflow.Context, workflow.Answer[any]) error { return nil }),
	})
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(ask))
	if _, _, err := runAll(t, wf, "x"); err == nil {
		t.Fatal("duplicate request id accepted")
	}
	// Generated ids depend only on run, step, executor and order.
	a1, _, _ := runAll(t, mustBuild(t, workflow.NewBuilder("t").SetStart(approver("ask"))), "d")
	a2, _, _ := runAll(t, mustBuild(t, workflow.NewBuilder("t").SetStart(approver("ask"))), "d")
	if a1.Pending()[0].ID != a2.Pending()[0].ID {
		t.Fatalf("ids differ: %s %s", a1.Pending()[0].ID, a2.Pending()[0].ID)
	}
}

func TestRequest_ExecutorMustHandleAnswer(t *testing.T) {
	ask := workflow.Func("ask", func(c *workflow.Context, s string) error {
		_, err := workflow.RequestInput[string](c, "", s)
		return err
	})
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(ask))
	if _, _, err := runAll(t, wf, "x"); err == nil {
		t.Fatal("request from an executor that cannot receive the answer was accepted")
	}
}

// An executor with a handler per answer type gets each answer in the
// handler of its type, and cannot ask for a type it has no handler of.
func TestRequest_TypedAnswers(t *testing.T) {
	ex := workflow.Handlers("ask", []workflow.Handler{
		workflow.On(func(c *workflow.Context, in string) error {
			if in == "float" {
				_, err := workflow.RequestInput[float64](c, "f", nil)
				return err
			}
			_, err1 := workflow.RequestInput[int](c, "n", nil)
			_, err2 := workflow.RequestInput[Approval](c, "a", "approve?")
			return errors.Join(err1, err2)
		}),
		workflow.On(func(c *workflow.Context, a workflow.Answer[int]) error {
			return c.Yield(fmt.Sprintf("%s: int %d", a.RequestID, a.Value+1))
		}),
		workflow.On(func(c *workflow.Context, a workflow.Answer[Approval]) error {
			return c.Yield(fmt.Sprintf("%s: %v %s", a.RequestID, a.Value.OK, a.Payload))
		}),
	})
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(ex).Outputs(ex))
	run, rec, err := runAll(t, wf, "x")
	if err != nil || len(run.Pending()) != 2 {
		t.Fatalf("%v, pending %v", err, run.Pending())
	}
	if err := errors.Join(run.Respond("a", Approval{OK: true}), run.Respond("n", 41)); err != nil {
		t.Fatal(err)
	}
	if err := run.Run(t.Context(), rec.commit, nil); err != nil {
		t.Fatal(err)
	}
	if got := rec.outputs(); !slices.Equal(got, []any{"a: true approve?", "n: int 42"}) {
		t.Fatalf("outputs %q", got)
	}
	run, _, err = runAll(t, wf, "float")
	if !errors.Is(err, workflow.ErrExecutorFailed) || !strings.Contains(err.Error(), "no handler for its answer") {
		t.Fatalf("request for a float64 without a handler: %v", err)
	}
}

func TestSubWorkflow(t *testing.T) {
	build := func() *workflow.Workflow {
		innerStart := workflow.Func("double", func(c *workflow.Context, s string) error { return c.Send(s + s) })
		ask := approver("ask")
		inner := mustBuild(t, workflow.NewBuilder("inner").SetStart(innerStart).
			AddEdge(innerStart, ask).Outputs(ask))
		sub := inner.AsExecutor("sub")
		start, after := pass[string]("start"), tagged("after")
		return mustBuild(t, workflow.NewBuilder("outer").SetStart(start).
			AddEdge(start, sub).AddEdge(sub, after).Outputs(after))
	}
	run, rec, err := runAll(t, build(), "ab")
	if err != nil {
		t.Fatal(err)
	}
	pending := run.Pending()
	if run.Status() != workflow.Idle || len(pending) != 1 || pending[0].ExecutorID != "sub" || pending[0].Payload != "approve abab?" {
		t.Fatalf("status %s pending %+v", run.Status(), pending)
	}
	parts, err := run.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if parts[len(parts)-1].Name != "executor/sub" {
		t.Fatalf("no sub-workflow part: %v", parts)
	}
	other := build()
	restored, err := other.Restore("run-1", parts)
	if err != nil {
		t.Fatal(err)
	}
	if err := restored.Respond(pending[0].ID, "wrong type"); !errors.Is(err, workflow.ErrAnswerType) {
		t.Fatalf("wrong type: %v", err)
	}
	if err := restored.Respond(pending[0].ID, Approval{OK: false, Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	rec2 := &recorder{}
	if err := restored.Run(t.Context(), rec2.commit, nil); err != nil {
		t.Fatal(err)
	}
	want := []any{"after:approve abab?: ok=false (no)"}
	if got := rec2.outputs(); !reflect.DeepEqual(got, want) || restored.Status() != workflow.Completed {
		t.Fatalf("outputs %v status %s", got, restored.Status())
	}
	_ = rec
	// The run's inner state is per run: a second run of the same workflow starts fresh.
	run2, _, err := runAll(t, build(), "c")
	if err != nil || run2.Pending()[0].Payload != "approve cc?" {
		t.Fatalf("second run: %v %+v", err, run2.Pending())
	}
}

func TestRequest_SameExplicitIDFromTwoExecutors(t *testing.T) {
	asker := func(id string) workflow.Executor {
		return workflow.Handlers(id, []workflow.Handler{
			workflow.On(func(c *workflow.Context, s string) error {
				_, err := workflow.RequestInput[string](c, "same", s)
				return err
			}),
			workflow.On(func(*workflow.Context, workflow.Answer[any]) error { return nil }),
		})
	}
	start := pass[string]("start")
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(start).AddFanOut(start, []workflow.Executor{asker("a"), asker("b")}))
	run, rec, err := runAll(t, wf, "x")
	if !errors.Is(err, workflow.ErrRunFailed) || !strings.Contains(err.Error(), `request id "same" is already pending`) || run.Status() != workflow.Failed {
		t.Fatalf("err = %v", err)
	}
	// The failed step's checkpoint is still restorable.
	if _, err := wf.Restore("run-1", rec.steps[len(rec.steps)-1].Checkpoint); err != nil {
		t.Fatal(err)
	}
}

func TestSubWorkflow_InnerFailureFailsParentExecutor(t *testing.T) {
	var calls int
	bad := workflow.Func("bad", func(c *workflow.Context, s string) error {
		calls++
		return errors.New("inner broke")
	})
	inner := mustBuild(t, workflow.NewBuilder("inner").SetStart(bad))
	sub := inner.AsExecutor("sub", workflow.WithRetry(1, 0))
	start := pass[string]("start")
	wf := mustBuild(t, workflow.NewBuilder("outer").SetStart(start).AddEdge(start, sub))
	run, _, err := runAll(t, wf, "x")
	if !errors.Is(err, workflow.ErrExecutorFailed) || !strings.Contains(err.Error(), `sub-workflow "sub"`) ||
		!strings.Contains(err.Error(), "inner broke") || run.Status() != workflow.Failed {
		t.Fatalf("err = %v", err)
	}
	if calls != 2 { // the parent retried the sub-workflow once, from its snapshot
		t.Fatalf("inner calls %d", calls)
	}
}

func TestSubWorkflow_FingerprintFollowsInnerGraph(t *testing.T) {
	outer := func(inner *workflow.Workflow) *workflow.Workflow {
		start := pass[string]("start")
		return mustBuild(t, workflow.NewBuilder("outer").SetStart(start).AddEdge(start, inner.AsExecutor("sub")))
	}
	a := pass[string]("a")
	b := tagged("b")
	in1 := mustBuild(t, workflow.NewBuilder("inner").SetStart(a).AddEdge(a, b).Outputs(b))
	cEx := tagged("c")
	in2 := mustBuild(t, workflow.NewBuilder("inner").SetStart(a).AddEdge(a, cEx).Outputs(cEx))
	if outer(in1).Fingerprint() == outer(in2).Fingerprint() {
		t.Fatal("parent fingerprint ignores the sub-workflow's graph")
	}
	if outer(in1).Fingerprint() != outer(in1).Fingerprint() {
		t.Fatal("parent fingerprint is not stable")
	}
}
