package agent

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/superstep/superstep/workflow"
)

func init() {
	workflow.RegisterType[Transfer]("agent.Transfer")
	workflow.RegisterType[Usage]("agent.Usage")
	workflow.RegisterType[Update]("agent.Update")
}

// Transfer is the message a handoff sends: the conversation so far, for
// the agent To.
type Transfer struct {
	To       string    `json:"to"`
	Messages []Message `json:"messages"`
}

// UsageKey is the shared-state key under which an agent executor keeps the
// tokens its agent used in the run so far (a Usage).
func UsageKey(executorID string) string { return "agent/usage/" + executorID }

// IncompleteKey is the shared-state key an agent executor sets to the
// reason (ReasonMaxOutputTokens, ReasonContentFilter) when its agent's
// reply was cut short.
const IncompleteKey = "agent/incomplete"

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

// agentExecutor runs an agent as a workflow executor; see Executor.
type agentExecutor struct {
	id          string
	a           Agent
	handoffs    []HandoffTarget
	handoffMode bool
	sendConv    bool
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
// conversation with WithConversation, or a Transfer after a handoff). The
// turn's usage is added to the shared state UsageKey(id); an incomplete
// reply sets IncompleteKey. A turn that fails fails the executor (see
// WithExecutorRetry). An agent that asks for outside input (an
// UpdateFunctionCall) fails it too: use a workflow executor for that.
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
			texts = append(texts, ValueText(v))
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
}

// Handle runs one turn of the agent for msg.
func (e *agentExecutor) Handle(c *workflow.Context, msg any) error {
	in, err := inputMessages(msg)
	if err != nil {
		return err
	}
	res, err := e.turn(c, in)
	if err != nil {
		return err
	}
	if err := e.record(c, res); err != nil {
		return err
	}
	reply := strings.Join(res.texts, "\n\n")
	if c.CanYield() && (reply != "" || res.handoff == "") {
		if err := c.Yield(reply); err != nil {
			return err
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
	ctx := WithIdempotencyKey(c.Context(), c.IdempotencyKey())
	if e.handoffMode {
		ctx = withHandoffs(ctx, e.handoffs)
	}
	res := &turnResult{}
	for u, err := range e.a.Run(ctx, nil, in) {
		if err != nil {
			return nil, fmt.Errorf("agent: executor %q: %w", e.id, err)
		}
		u.Source = e.id
		switch u.Kind {
		case UpdateText:
			res.texts = append(res.texts, u.Text)
		case UpdateHandoff:
			res.handoff = u.Name
		case UpdateDone:
			if u.Usage != nil {
				res.usage.Add(*u.Usage)
			}
			res.reason = u.Reason
		case UpdateFunctionCall:
			return nil, fmt.Errorf("agent: executor %q: the agent asked for input (call %s %s), which an agent executor cannot answer", e.id, u.CallID, u.Name)
		default:
			if err := c.EmitLive(u); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// record adds the turn's usage and incomplete reason to shared state.
func (e *agentExecutor) record(c *workflow.Context, res *turnResult) error {
	if res.reason != "" {
		if err := c.Set(IncompleteKey, res.reason); err != nil {
			return err
		}
	}
	if res.usage == (Usage{}) {
		return nil
	}
	total, _, err := workflow.GetState[Usage](c, UsageKey(e.id))
	if err != nil {
		return err
	}
	total.Add(res.usage)
	return c.Set(UsageKey(e.id), total)
}
