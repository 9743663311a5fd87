package agent_test

import (
	"context"
	"errors"
	"iter"
	"reflect"
	"strings"
	"testing"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/workflow"
)

// collect runs one turn and returns its updates.
func collect(t *testing.T, a agent.Agent, s *agent.Session, in ...agent.Message) ([]agent.Update, error) {
	t.Helper()
	var out []agent.Update
	for u, err := range a.Run(t.Context(), s, in) {
		if err != nil {
			return out, err
		}
		out = append(out, u)
	}
	return out, nil
}

func user(text string) agent.Message { return agent.Message{Role: agent.RoleUser, Text: text} }

// approvalWorkflow echoes its input upper-cased, then asks whether to
// continue (a bool) and says what it was told.
func approvalWorkflow(t *testing.T) *workflow.Workflow {
	t.Helper()
	echo := workflow.Func("echo", func(c *workflow.Context, s string) error {
		if err := c.Yield(strings.ToUpper(s)); err != nil {
			return err
		}
		return c.Send(s)
	})
	ask := workflow.Handlers("ask", []workflow.Handler{
		workflow.On(func(c *workflow.Context, s string) error {
			_, err := workflow.RequestInput[bool](c, "", agent.FunctionCall{Name: "confirm", Arguments: `{"topic":"` + s + `"}`})
			return err
		}),
		workflow.On(func(c *workflow.Context, a workflow.Answer[bool]) error {
			if a.Value {
				return c.Yield("confirmed")
			}
			return c.Yield("declined")
		}),
	})
	wf, err := workflow.NewBuilder("approval").SetStart(echo).AddEdge(echo, ask).Outputs(echo, ask).Build()
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

func TestWorkflowAgent_MultiTurn(t *testing.T) {
	wf := approvalWorkflow(t)
	a := agent.FromWorkflow(wf)
	if a.Workflow() != wf || a.Name() != "approval" {
		t.Fatal("adapter does not expose its workflow")
	}
	s := agent.NewSession("sess-1")
	got, err := collect(t, a, s, user("tea"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Kind != agent.UpdateText || got[0].Text != "TEA" || got[1].Kind != agent.UpdateFunctionCall ||
		got[1].Name != "confirm" || got[1].Arguments != `{"topic":"tea"}` || got[1].CallID == "" {
		t.Fatalf("first turn %+v", got)
	}
	if run := s.State().(*workflow.Run); run.StepNumber() != 2 {
		t.Fatalf("first turn ran to step %d, want 2", run.StepNumber())
	}
	// A turn that answers nothing is refused.
	if _, err := collect(t, a, s, user("well?")); !errors.Is(err, agent.ErrPendingInput) {
		t.Fatalf("unanswered turn: %v", err)
	}
	// A wrong-typed answer (not JSON bool) is refused, the right one works.
	call := got[1].CallID
	if _, err := collect(t, a, s, agent.Message{Role: agent.RoleTool, CallID: call, Text: "maybe"}); !errors.Is(err, workflow.ErrAnswerType) {
		t.Fatalf("bad answer: %v", err)
	}
	got, err = collect(t, a, s, agent.Message{Role: agent.RoleTool, CallID: call, Text: "true"})
	if err != nil || len(got) != 1 || got[0].Text != "confirmed" {
		t.Fatalf("second turn %+v, %v", got, err)
	}
	// The run completed: a new message continues the same run.
	got, err = collect(t, a, s, user("coffee"))
	if err != nil || len(got) != 2 || got[0].Text != "COFFEE" {
		t.Fatalf("third turn %+v, %v", got, err)
	}
	if run := s.State().(*workflow.Run); run.StepNumber() != 5 || run.ID() != "sess-1" {
		t.Fatalf("run %s at step %d", run.ID(), run.StepNumber())
	}
}

func TestWorkflowAgent_NilSessionAndStop(t *testing.T) {
	a := agent.FromWorkflow(approvalWorkflow(t))
	for u, err := range a.Run(t.Context(), nil, []agent.Message{user("x")}) {
		if err != nil || u.Text != "X" {
			t.Fatalf("%+v %v", u, err)
		}
		break // stopping early must not leak or panic
	}
}

func TestWorkflowInput(t *testing.T) {
	msgs := []agent.Message{{Role: agent.RoleSystem, Text: "sys"}, user("a"), user("b")}
	wf := approvalWorkflow(t)
	in, err := agent.WorkflowInput(wf, msgs)
	if err != nil || in != "a\nb" {
		t.Fatalf("string start: %q %v", in, err)
	}
	takesMsgs := workflow.Func("m", func(c *workflow.Context, ms []agent.Message) error { return nil })
	wf2, _ := workflow.NewBuilder("m").SetStart(takesMsgs).Build()
	if in, err := agent.WorkflowInput(wf2, msgs); err != nil || !reflect.DeepEqual(in, msgs) {
		t.Fatalf("messages start: %v %v", in, err)
	}
	takesInt := workflow.Func("i", func(c *workflow.Context, n int) error { return nil })
	wf3, _ := workflow.NewBuilder("i").SetStart(takesInt).Build()
	if _, err := agent.WorkflowInput(wf3, msgs); !errors.Is(err, workflow.ErrMessageType) {
		t.Fatalf("int start: %v", err)
	}
	// A workflow over []agent.Message runs and checkpoints its input.
	run, err := wf2.NewRun("r", msgs)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := run.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wf2.Restore("r", parts); err != nil {
		t.Fatal(err)
	}
}

type verdict struct {
	OK bool `json:"ok"`
}

type label string

func TestAnswerValue(t *testing.T) {
	req := func(rt reflect.Type) workflow.Request { return workflow.Request{ID: "c1", ResponseType: rt} }
	tests := []struct {
		rt      reflect.Type
		out     string
		want    any
		wantErr bool
	}{
		{reflect.TypeFor[string](), "plain", "plain", false},
		{reflect.TypeFor[any](), "anything", "anything", false},
		{reflect.TypeFor[label](), "x", label("x"), false},
		{reflect.TypeFor[bool](), "true", true, false},
		{reflect.TypeFor[int](), "42", 42, false},
		{reflect.TypeFor[verdict](), `{"ok":true}`, verdict{OK: true}, false},
		{reflect.TypeFor[verdict](), `not json`, nil, true},
	}
	for _, tt := range tests {
		got, err := agent.AnswerValue(req(tt.rt), tt.out)
		if (err != nil) != tt.wantErr || (!tt.wantErr && !reflect.DeepEqual(got, tt.want)) {
			t.Errorf("AnswerValue(%v, %q) = %#v, %v", tt.rt, tt.out, got, err)
		}
	}
}

func TestUpdateFromEvent(t *testing.T) {
	u, ok := agent.UpdateFromEvent(workflow.Output{ExecutorID: "e", Value: map[string]any{"a": 1}})
	if !ok || u.Kind != agent.UpdateText || u.Text != `{"a":1}` || u.Source != "e" {
		t.Fatalf("%+v", u)
	}
	u, ok = agent.UpdateFromEvent(workflow.RequestInfo{Request: workflow.Request{ID: "c", ExecutorID: "e", Payload: "why?"}})
	if !ok || u.Kind != agent.UpdateFunctionCall || u.Name != "e" || u.Arguments != `"why?"` || u.CallID != "c" {
		t.Fatalf("%+v", u)
	}
	if _, ok := agent.UpdateFromEvent(workflow.SuperstepStarted{Step: 1}); ok {
		t.Fatal("superstep event became an update")
	}
}

func TestAgentFunc(t *testing.T) {
	var a agent.Agent = agent.AgentFunc(func(ctx context.Context, s *agent.Session, in []agent.Message) iter.Seq2[agent.Update, error] {
		return func(yield func(agent.Update, error) bool) {
			n, _ := s.State().(int)
			s.SetState(n + 1)
			yield(agent.Update{Kind: agent.UpdateText, Text: strings.Repeat(in[0].Text, n+1)}, nil)
		}
	})
	s := agent.NewSession("s")
	collect(t, a, s, user("a"))
	got, _ := collect(t, a, s, user("b"))
	if len(got) != 1 || got[0].Text != "bb" {
		t.Fatalf("%+v", got)
	}
}

func TestWorkflowAgent_SessionBusy(t *testing.T) {
	a := agent.FromWorkflow(approvalWorkflow(t))
	s := agent.NewSession("s")
	for u, err := range a.Run(t.Context(), s, []agent.Message{user("x")}) {
		if err != nil {
			t.Fatal(err)
		}
		_ = u
		// A second turn while the first is being consumed is refused.
		if _, err := collect(t, a, s, user("y")); !errors.Is(err, agent.ErrSessionBusy) {
			t.Fatalf("concurrent turn: %v", err)
		}
	}
	if _, err := collect(t, a, s, agent.Message{Role: agent.RoleTool, CallID: "nope", Text: "true"}); !errors.Is(err, workflow.ErrUnknownRequest) {
		t.Fatalf("after the turn: %v", err)
	}
}
