package agent

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/superstep/superstep/workflow"
)

func init() {
	workflow.RegisterType[Transfer]("agent.Transfer")
	workflow.RegisterType[Usage]("agent.Usage")
	workflow.RegisterType[Update]("agent.Update")
	workflow.RegisterType[Incomplete]("agent.Incomplete")
}

// Transfer is the message a handoff sends: the conversation so far, for
// the agent To.
type Transfer struct {
	To       string    `json:"to"`
	Messages []Message `json:"messages"`
}

// Incomplete says that an agent's reply was cut short: why
// (ReasonMaxOutputTokens, ReasonContentFilter), by which executor and in
// which superstep. An agent executor annotates its step with it (see
// StepUsage). Old checkpoints may hold one in their shared state, where
// executors kept it before annotations: the type stays registered so they
// restore.
type Incomplete struct {
	Reason     string `json:"reason"`
	ExecutorID string `json:"executor_id"`
	Step       int64  `json:"step"`
}

// ExecutorOption configures Executor.
type ExecutorOption func(*agentExecutor)

// WithHandoffs lets the agent hand the conversation to the targets (see
// HandoffTarget): a handoff is sent as a Transfer, and a reply without
// handoff is only yielded, not sent. Handoff sets it up.
func WithHandoffs(targets ...HandoffTarget) ExecutorOption {
	return func(e *agentExecutor) { e.handoffs, e.handoffMode = targets, true }
}

// WithConversation makes the executor send the conversation ([]Message:
// its input and the reply as an assistant message) instead of the reply text.
func WithConversation() ExecutorOption {
	return func(e *agentExecutor) { e.sendConv = true }
}

// WithExecutorRetry re-runs a failed turn up to n more times in the same
// superstep (on top of the agent's own model-call retries).
func WithExecutorRetry(n int, backoff time.Duration) ExecutorOption {
	return func(e *agentExecutor) { e.retry = workflow.RetryPolicy{Retries: max(n, 0), Backoff: backoff} }
}

// TurnError is the error that failed an agent executor's turn: Err is the
// agent's own (a model call that failed, a tool's error), Executor the
// executor it ran in. A host that hosts a plain agent shows Err, the
// agent's words, rather than the workflow's wrapping of it.
type TurnError struct {
	Executor string
	Err      error
}

func (e *TurnError) Error() string { return fmt.Sprintf("agent: executor %q: %v", e.Executor, e.Err) }

// Unwrap returns Err.
func (e *TurnError) Unwrap() error { return e.Err }

// WithMemory makes the executor remember the conversation: it keeps its
// inputs and the agent's replies in the run's shared state (key
// "agent/memory/<id>")
// and gives the agent the whole conversation at every turn, so an input
// sent to the run later (workflow.Run.Send) continues it. A function call
// the agent asks its caller to answer (UpdateFunctionCall, such as a
// ChatAgent's call of a client tool, see ModelParams) is then yielded as an
// Update, which a host shows as a function_call item, and kept in the
// conversation (a Message with CallID and Name); the answer comes back in a
// later input as a Message with its CallID. This is how a
// host runs a plain agent as a one-executor workflow.
func WithMemory() ExecutorOption {
	return func(e *agentExecutor) { e.memory = true }
}

// memoryKey is the shared-state key under which an executor with
// WithMemory keeps its conversation (a []Message).
func memoryKey(executorID string) string { return "agent/memory/" + executorID }

// agentExecutor runs an agent as a workflow executor; see Executor.
type agentExecutor struct {
	id          string
	a           Agent
	handoffs    []HandoffTarget
	handoffMode bool
	sendConv    bool
	memory      bool
	retry       workflow.RetryPolicy
}

// Executor makes a workflow executor of a: each message it receives (a
// string, a Message, a []Message, a Transfer, or the []any of a fan-in,
// whose values become one user message) is one turn of a, run with a fresh
// session and with ctx carrying the idempotency key of the superstep
// (Context.IdempotencyKey, see IdempotencyKey) for its tools.
//
// While the turn runs, its updates other than the final text (text deltas,
// retries, tool calls and results) are emitted as live events
// (Context.EmitLive, values of type Update, Source = id). When it ends, the
// reply's text is yielded if the executor is declared output or
// intermediate, and sent along its edges if it has any (the text, or the
// conversation with WithConversation, or a Transfer after a handoff). When
// the agent called its own tools, the yields follow the order of the turn:
// the text before each call, the call itself as an Update of kind
// UpdateToolCall carrying its output (which UpdateFromEvent maps back, so a host shows it as a
// server-run tool call item, never a function_call), and the text after it; the text sent along edges is
// still the whole reply. The turn's usage (a Usage) and an incomplete
// reply (an Incomplete) annotate the superstep (workflow.Context.Annotate),
// where a host reads them with StepUsage. A turn that fails
// fails the executor (see WithExecutorRetry). An agent that asks for
// outside input (an UpdateFunctionCall) fails it too: use a workflow
// executor for that.
func Executor(id string, a Agent, opts ...ExecutorOption) workflow.Executor {
	e := &agentExecutor{id: id, a: a}
	for _, o := range opts {
		if o != nil {
			o(e)
		}
	}
	return e
}

// ID returns the executor's id.
func (e *agentExecutor) ID() string { return e.id }

// Retry returns the policy set with WithExecutorRetry.
func (e *agentExecutor) Retry() workflow.RetryPolicy { return e.retry }

// InputTypes lists the messages the executor handles.
func (e *agentExecutor) InputTypes() []reflect.Type {
	return []reflect.Type{
		reflect.TypeFor[string](), reflect.TypeFor[Message](), reflect.TypeFor[[]Message](),
		reflect.TypeFor[Transfer](), reflect.TypeFor[[]any](),
	}
}

// inputMessages converts a received message to the turn's input.
func inputMessages(msg any) ([]Message, error) {
	switch m := msg.(type) {
	case string:
		return []Message{{Role: RoleUser, Text: m}}, nil
	case Message:
		return []Message{m}, nil
	case []Message:
		return m, nil
	case Transfer:
		return m.Messages, nil
	case []any:
		texts := make([]string, 0, len(m))
		for _, v := range m {
			texts = append(texts, valueText(v))
		}
		return []Message{{Role: RoleUser, Text: strings.Join(texts, "\n\n")}}, nil
	}
	return nil, fmt.Errorf("%w: agent executor got %T", workflow.ErrMessageType, msg)
}

// turnResult is what one turn produced.
type turnResult struct {
	texts   []string
	handoff string
	usage   Usage
	reason  string
	// segments are the texts and tool calls in the order they came.
	segments []Update
	calls    int // tool calls among segments
}

// yields returns what Handle yields for the turn: the whole reply when the
// agent called no tools (as always), else the texts between the calls
// (consecutive texts joined like the reply) and the calls themselves.
func (res *turnResult) yields(reply string, each bool) []any {
	if each { // one output per update, as the agent gave them
		out := make([]any, 0, len(res.segments))
		for _, u := range res.segments {
			if u.Kind == UpdateText {
				out = append(out, u.Text)
			} else {
				out = append(out, u)
			}
		}
		return out
	}
	if res.calls == 0 {
		return []any{reply}
	}
	var (
		out  []any
		text []string
	)
	flush := func() {
		if len(text) > 0 {
			out = append(out, strings.Join(text, "\n\n"))
			text = nil
		}
	}
	for _, u := range res.segments {
		if u.Kind == UpdateText {
			text = append(text, u.Text)
			continue
		}
		flush()
		out = append(out, u)
	}
	flush()
	return out
}

// Handle runs one turn of the agent for msg.
func (e *agentExecutor) Handle(c *workflow.Context, msg any) error {
	in, err := inputMessages(msg)
	if err != nil {
		return err
	}
	var before []Message
	if e.memory {
		if before, _, err = workflow.GetState[[]Message](c, memoryKey(e.id)); err != nil {
			return err
		}
	}
	res, err := e.turn(c, append(slices.Clip(before), in...))
	if err != nil {
		return err
	}
	if e.memory {
		// The replies, the agent's own tool calls with their results, and
		// the calls the caller is to answer, in their order: the next turn
		// sees what a client replaying the conversation would send, and a
		// model pairs the answers in the next input with the calls.
		conv := append(slices.Clip(before), in...)
		for _, u := range res.segments {
			switch u.Kind {
			case UpdateText:
				conv = append(conv, Message{Role: RoleAssistant, Text: u.Text})
			case UpdateToolCall:
				conv = append(conv, Message{Role: RoleAssistant, CallID: u.CallID, Name: u.Name, Arguments: u.Arguments},
					Message{Role: RoleTool, CallID: u.CallID, Text: u.Text})
			case UpdateFunctionCall:
				conv = append(conv, Message{Role: RoleAssistant, CallID: u.CallID, Name: u.Name, Arguments: u.Arguments})
			}
		}
		if err := c.Set(memoryKey(e.id), conv); err != nil {
			return err
		}
	}
	e.record(c, res)
	reply := strings.Join(res.texts, "\n\n")
	if c.CanYield() && (reply != "" || res.handoff == "" || res.calls > 0) {
		for _, v := range res.yields(reply, e.memory) {
			if err := c.Yield(v); err != nil {
				return err
			}
		}
	}
	conv := append([]Message(nil), in...)
	if reply != "" {
		conv = append(conv, Message{Role: RoleAssistant, Text: reply})
	}
	switch {
	case res.handoff != "":
		return c.Send(Transfer{To: res.handoff, Messages: conv})
	case e.handoffMode || !c.HasEdges():
		return nil
	case e.sendConv:
		return c.Send(conv)
	}
	return c.Send(reply)
}

// turn runs the agent, streaming its updates as live events.
func (e *agentExecutor) turn(c *workflow.Context, in []Message) (*turnResult, error) {
	ctx := withIdempotencyKey(c.Context(), c.IdempotencyKey())
	if e.handoffMode {
		ctx = withHandoffs(ctx, e.handoffs)
	}
	res := &turnResult{}
	for u, err := range e.a.Run(ctx, nil, in) {
		if err != nil {
			return nil, &TurnError{Executor: e.id, Err: err}
		}
		u.Source = e.id
		switch u.Kind {
		case UpdateText:
			res.texts = append(res.texts, u.Text)
			res.segments = append(res.segments, u)
		case UpdateToolCall:
			// Live for streaming hosts; yielded with the reply for the
			// committed output.
			res.segments = append(res.segments, u)
			res.calls++
			if err := c.EmitLive(u); err != nil {
				return nil, err
			}
		case UpdateToolResult:
			// The call's output goes with its yield (Text of the
			// UpdateToolCall), as well as live.
			for i := range res.segments {
				if res.segments[i].Kind == UpdateToolCall && res.segments[i].CallID == u.CallID {
					res.segments[i].Text = u.Text
				}
			}
			if err := c.EmitLive(u); err != nil {
				return nil, err
			}
		case UpdateHandoff:
			res.handoff = u.Name
		case UpdateDone:
			if u.Usage != nil {
				res.usage.Add(*u.Usage)
			}
			res.reason = u.Reason
		case UpdateFunctionCall:
			if !e.memory {
				return nil, fmt.Errorf("agent: executor %q: the agent asked for input (call %s %s), which an agent executor without WithMemory cannot answer", e.id, u.CallID, u.Name)
			}
			// Yielded in order for the caller, who answers in the next input.
			res.segments = append(res.segments, u)
			res.calls++
		default:
			if err := c.EmitLive(u); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// record annotates the step with the turn's usage and incomplete reason.
func (e *agentExecutor) record(c *workflow.Context, res *turnResult) {
	if res.usage != (Usage{}) {
		c.Annotate(res.usage)
	}
	if res.reason != "" {
		c.Annotate(Incomplete{Reason: res.reason, ExecutorID: e.id, Step: c.Step()})
	}
}

// StepUsage returns what the agent executors of a committed step s
// annotated (see Executor): the tokens they used in s, agents inside
// sub-workflows included, and the last reply cut short in s, or nil. The
// Incomplete is in terms of s: its ExecutorID is the executor of s's
// workflow whose outputs carry the reply (for an agent inside a
// sub-workflow, the sub-workflow executor), and its Step is s.Number. A host
// adds a response's steps' usage up; unlike a checkpoint's shared state,
// s holds nothing of earlier steps or responses.
func StepUsage(s *workflow.Step) (Usage, *Incomplete) {
	var (
		total Usage
		inc   *Incomplete
	)
	for _, a := range s.Annotations {
		switch v := a.Value.(type) {
		case Usage:
			total.Add(v)
		case Incomplete:
			inc = &Incomplete{Reason: v.Reason, ExecutorID: a.ExecutorID, Step: s.Number}
		}
	}
	return total, inc
}
