package agent

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"strings"

	"github.com/superstep/superstep/workflow"
)

func init() {
	workflow.RegisterType[Message]("agent.Message")
	workflow.RegisterType[[]Message]("[]agent.Message")
	workflow.RegisterType[FunctionCall]("agent.FunctionCall")
}

// FunctionCall is a request payload that names the function call it stands
// for; requests with other payloads are named after their executor and
// carry the payload as JSON arguments.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// WorkflowOption configures FromWorkflow.
type WorkflowOption func(*WorkflowAgent)

// WithRunOptions sets the run options used by standalone Run.
func WithRunOptions(o *workflow.RunOptions) WorkflowOption {
	return func(a *WorkflowAgent) { a.runOpts = o }
}

// WorkflowAgent is an Agent backed by a workflow, run in memory: for tests
// and programs that use a workflow as an agent without a host. A host
// serves the workflow itself (host.RegisterWorkflow), durably.
type WorkflowAgent struct {
	wf      *workflow.Workflow
	runOpts *workflow.RunOptions
}

var _ Agent = (*WorkflowAgent)(nil)

// FromWorkflow adapts wf to Agent.
func FromWorkflow(wf *workflow.Workflow, opts ...WorkflowOption) *WorkflowAgent {
	a := &WorkflowAgent{wf: wf}
	for _, o := range opts {
		if o != nil {
			o(a)
		}
	}
	return a
}

// Workflow returns the underlying workflow.
func (a *WorkflowAgent) Workflow() *workflow.Workflow { return a.wf }

// Name returns the workflow's name.
func (a *WorkflowAgent) Name() string { return a.wf.Name() }

// ErrPendingInput is returned when a turn continues a run that waits for
// answers but the input answers none of them.
var ErrPendingInput = errors.New("agent: run is waiting for function call outputs")

// Run runs one turn in memory: the first turn of a session starts a run
// with the input (see WorkflowInput); a later turn answers the run's
// pending requests with the messages that carry a CallID (see AnswerValue),
// or, when the run completed, sends the input to the same run (its shared
// state carries over; a failed run is replaced by a new one). It streams
// outputs as text updates and requests as function-call updates. The
// session holds the *workflow.Run; a session must not run two turns at once.
func (a *WorkflowAgent) Run(ctx context.Context, s *Session, input []Message) iter.Seq2[Update, error] {
	return func(yield func(Update, error) bool) {
		if s == nil {
			s = NewSession("session")
		}
		if err := s.Begin(); err != nil {
			yield(Update{}, err)
			return
		}
		defer s.End()
		run, err := a.prepare(s, input)
		if err != nil {
			yield(Update{}, err)
			return
		}
		for ev, err := range run.Events(ctx, nil, a.runOpts) {
			if err != nil {
				yield(Update{}, err)
				return
			}
			if u, ok := UpdateFromEvent(ev); ok && !yield(u, nil) {
				return
			}
		}
	}
}

// prepare returns the session's run, continued with input.
func (a *WorkflowAgent) prepare(s *Session, input []Message) (*workflow.Run, error) {
	run, _ := s.State().(*workflow.Run)
	if run != nil && run.Status() == workflow.Idle {
		if err := respond(run, input); err != nil {
			return nil, err
		}
		return run, nil
	}
	in, err := WorkflowInput(a.wf, input)
	if err != nil {
		return nil, err
	}
	if run != nil && run.Status() == workflow.Completed {
		if err := run.Send(in); err != nil {
			return nil, fmt.Errorf("agent: continue %q: %w", a.wf.Name(), err)
		}
		return run, nil
	}
	id := s.ID
	if run != nil { // the previous run failed: start over under a new id
		id = fmt.Sprintf("%s.%d", s.ID, run.StepNumber())
	}
	run, err = a.wf.NewRun(id, in)
	if err != nil {
		return nil, fmt.Errorf("agent: start %q: %w", a.wf.Name(), err)
	}
	s.SetState(run)
	return run, nil
}

// respond answers run's pending requests with the messages that carry a
// CallID. Every answer is checked before any is applied, so on error the
// run is unchanged. It fails with ErrPendingInput when no message answers.
func respond(run *workflow.Run, input []Message) error {
	pending := map[string]workflow.Request{}
	for _, p := range run.Pending() {
		pending[p.ID] = p
	}
	type answer struct {
		id    string
		value any
	}
	var answers []answer
	for _, m := range input {
		if m.CallID == "" {
			continue
		}
		req, ok := pending[m.CallID]
		if !ok {
			return fmt.Errorf("agent: call_id %q: %w", m.CallID, workflow.ErrUnknownRequest)
		}
		delete(pending, m.CallID) // a second answer to one call is unknown
		v, err := AnswerValue(req, m.Text)
		if err != nil {
			return err
		}
		answers = append(answers, answer{m.CallID, v})
	}
	if len(answers) == 0 {
		return ErrPendingInput
	}
	for _, a := range answers {
		if err := run.Respond(a.id, a.value); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	return nil
}

// WorkflowInput converts input messages to the start executor's input: the
// messages themselves when it handles []Message, else the text of the
// messages joined by newlines when it handles string.
func WorkflowInput(wf *workflow.Workflow, input []Message) (any, error) {
	types := wf.StartInputTypes()
	if types != nil && acceptsType(types, reflect.TypeFor[[]Message]()) {
		return input, nil
	}
	if types == nil || acceptsType(types, reflect.TypeFor[string]()) {
		texts := make([]string, 0, len(input))
		for _, m := range input {
			if m.Parts != nil {
				// Never dropped silently: the workflow takes text only.
				return nil, fmt.Errorf("agent: workflow %q takes text only; its input holds an image or a file: %w", wf.Name(), workflow.ErrMessageType)
			}
			if m.CallID == "" && m.Role != RoleSystem && m.Role != RoleDeveloper {
				texts = append(texts, m.Text)
			}
		}
		return strings.Join(texts, "\n"), nil
	}
	return nil, fmt.Errorf("agent: workflow %q: start executor takes %v, neither string nor []agent.Message: %w", wf.Name(), types, workflow.ErrMessageType)
}

func acceptsType(types []reflect.Type, t reflect.Type) bool {
	for _, want := range types {
		if want != nil && t.AssignableTo(want) {
			return true
		}
	}
	return false
}
