// Package agent defines the Agent interface (messages in, a stream of
// updates out, multi-turn through a Session), a model-backed Agent
// (ChatAgent) and the executor that makes an agent a step of a workflow.
//
//	writer, err := agent.NewChatAgent(&agent.Options{Name: "writer",
//		Instructions: "Write one short paragraph on the topic.", Tools: []*agent.Tool{lookup}})
//	...
//	draft := agent.Executor("writer", writer) // its reply is sent on as text
//	words := workflow.Map("words", func(c *workflow.Context, text string) (int, error) {
//		return len(strings.Fields(text)), nil
//	})
//	wf, err := workflow.NewBuilder("paragraph").SetStart(draft).AddEdge(draft, words).
//		Outputs(draft, words).Build()
//	// Host it: h.RegisterWorkflow("paragraph", wf); or the agent alone: h.RegisterAgent("writer", writer).
//
// # Model-backed agents
//
// ChatAgent talks to any OpenAI-compatible server (Chat Completions or the
// Responses API, through openai-go): it streams the reply's tokens as
// UpdateTextDelta, runs Go function tools (NewTool derives their JSON
// schema from the argument type, see Schema) in a loop bounded by
// Options.MaxToolCalls, retries failed model calls with backoff (ErrModel
// when it gives up), and ends each turn with UpdateText (the whole reply)
// and UpdateDone (usage; Reason ReasonMaxOutputTokens or
// ReasonContentFilter when the reply was cut short). Tools get
// IdempotencyKey and ToolCallID through their ctx. A caller's per-request
// settings (ModelParams, among them function tools the caller runs itself)
// reach a ChatAgent as the Params of the workflow.Invocation in its ctx;
// ChatAgent.CheckParams says which it cannot honour. For tests and offline
// demos, package localmodel is a deterministic OpenAI-compatible server.
//
// # Agents in workflows
//
// Executor makes a workflow executor of any Agent: each message is a turn,
// streamed through Context.EmitLive (live events, see workflow.RunOptions)
// and yielded/sent when it ends; the superstep's idempotency key reaches
// the tools. Sequential, Concurrent and Handoff build the usual
// orchestrations from Participants.
//
// # Hosting
//
// There is one way to host each thing: a host serves an Agent with
// host.RegisterAgent (each turn one durable step of a conversation kept in
// the run, see WithMemory) and a workflow, agent executors in it or not,
// with host.RegisterWorkflow (every superstep durable). FromWorkflow is for
// running a workflow as an Agent without a host, in memory (tests, small
// programs); a host refuses it. The helpers WorkflowInput, AnswerValue and
// UpdateFromEvent are the mapping FromWorkflow uses between
// messages/updates and workflow inputs/events; a host uses them too, so
// both paths agree.
package agent

import (
	"context"
	"errors"
	"iter"
	"sync"
	"sync/atomic"
)

// Role is the author of a message.
type Role string

// Message roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system"
	RoleDeveloper Role = "developer"
	RoleTool      Role = "tool"
)

// Message is one input item. With CallID set it is the output of a function
// call, i.e. the answer to a request for input, and Text is that output;
// with CallID and Name set (Role RoleAssistant) it is the function call
// itself, as an earlier turn made it (a client replaying the conversation
// sends it back), with its Arguments.
type Message struct {
	Role      Role   `json:"role"`
	Text      string `json:"text"`
	CallID    string `json:"call_id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	// Parts are a user message's content in order when it holds more than
	// text (images, files); Text still holds its text. Nil for text only.
	Parts []Part `json:"parts,omitempty"`
}

// Part kinds.
const (
	PartText  = "text"
	PartImage = "image"
	PartFile  = "file"
)

// Part is one piece of a message's content: text, an image (URL: an
// http(s) or data: URL; Detail "low", "high" or "auto") or a file (URL: a
// data: URL or an http(s) URL; Filename).
type Part struct {
	Kind     string `json:"kind"`
	Text     string `json:"text,omitempty"`
	URL      string `json:"url,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Filename string `json:"filename,omitempty"`
}

// IsCall reports whether m is a function call an assistant made.
func (m Message) IsCall() bool { return m.Name != "" && m.CallID != "" }

// UpdateKind says what an Update carries.
type UpdateKind string

// Update kinds.
const (
	// UpdateText is a piece of output text (a whole output of a workflow).
	UpdateText UpdateKind = "text"
	// UpdateFunctionCall is a request for input or a tool call: the caller
	// answers it in the next turn with a Message whose CallID is CallID.
	UpdateFunctionCall UpdateKind = "function_call"
	// UpdateTextDelta is a piece of a message being streamed (a token or a
	// few). The message's deltas are followed by one UpdateText with its
	// whole text, so a consumer that ignores deltas loses nothing.
	UpdateTextDelta UpdateKind = "text_delta"
	// UpdateRetry says the model call that streamed the preceding deltas
	// failed and is retried: the deltas since the last UpdateText are void
	// and the message streams again from its start.
	UpdateRetry UpdateKind = "retry"
	// UpdateToolCall reports a call of one of the agent's own tools (CallID,
	// Name, Arguments); the agent runs it itself, the caller must not answer.
	UpdateToolCall UpdateKind = "tool_call"
	// UpdateToolResult is the output (Text) of the tool call CallID.
	UpdateToolResult UpdateKind = "tool_result"
	// UpdateHandoff asks to hand the conversation to the agent Name (see
	// Handoff); it ends the turn.
	UpdateHandoff UpdateKind = "handoff"
	// UpdateDone ends a turn of a model-backed agent: Usage is the turn's
	// token usage and Reason, when not empty, says why the reply is
	// incomplete (ReasonMaxOutputTokens or ReasonContentFilter).
	UpdateDone UpdateKind = "done"
)

// Reasons an agent's reply is incomplete (Update.Reason), named as the
// Responses API's incomplete_details.reason.
const (
	ReasonMaxOutputTokens = "max_output_tokens"
	ReasonContentFilter   = "content_filter"
)

// Usage counts the tokens of model calls.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
	// CachedInputTokens are the input tokens served from the server's
	// prompt cache (part of InputTokens), when the server reports them.
	CachedInputTokens int64 `json:"cached_input_tokens,omitempty"`
	// ReasoningTokens are the output tokens spent on reasoning (part of
	// OutputTokens), when the server reports them.
	ReasoningTokens int64 `json:"reasoning_tokens,omitempty"`
}

// Add adds o to u.
func (u *Usage) Add(o Usage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.TotalTokens += o.TotalTokens
	u.CachedInputTokens += o.CachedInputTokens
	u.ReasoningTokens += o.ReasoningTokens
}

// Sub returns u minus o (the tokens used since o was taken).
func (u Usage) Sub(o Usage) Usage {
	return Usage{
		InputTokens:       u.InputTokens - o.InputTokens,
		OutputTokens:      u.OutputTokens - o.OutputTokens,
		TotalTokens:       u.TotalTokens - o.TotalTokens,
		CachedInputTokens: u.CachedInputTokens - o.CachedInputTokens,
		ReasoningTokens:   u.ReasoningTokens - o.ReasoningTokens,
	}
}

// Update is one item of an agent's output stream.
type Update struct {
	Kind UpdateKind
	// Text is set for UpdateText, UpdateTextDelta (the delta) and
	// UpdateToolResult; an agent executor's yielded UpdateToolCall carries
	// the call's output in it.
	Text string
	// CallID, Name and Arguments (JSON) are set for UpdateFunctionCall and
	// UpdateToolCall; CallID for UpdateToolResult; Name (the target) for
	// UpdateHandoff.
	CallID    string
	Name      string
	Arguments string
	// Source is the id of what produced the update (an executor), if known.
	Source string
	// Usage is set for UpdateDone.
	Usage *Usage
	// Reason is set for an incomplete UpdateDone (ReasonMaxOutputTokens,
	// ReasonContentFilter).
	Reason string
}

// Session carries an agent's state from one turn to the next (the
// continuation). It is safe for concurrent use, but an agent runs one turn
// of a session at a time.
type Session struct {
	// ID identifies the conversation; workflow agents use it as run id.
	ID string

	mu    sync.Mutex
	state any
	busy  atomic.Bool // a turn is running
}

// ErrSessionBusy is returned when a turn starts while another turn of the
// same session is still running.
var ErrSessionBusy = errors.New("agent: session is running another turn")

// Begin marks the start of a turn; it fails with ErrSessionBusy while
// another turn runs. Agents call it and defer End.
func (s *Session) Begin() error {
	if !s.busy.CompareAndSwap(false, true) {
		return ErrSessionBusy
	}
	return nil
}

// End marks the end of the turn started by Begin.
func (s *Session) End() { s.busy.Store(false) }

// NewSession returns an empty session.
func NewSession(id string) *Session { return &Session{ID: id} }

// State returns the agent-specific state stored by the last turn.
func (s *Session) State() any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// SetState stores agent-specific state for the next turn.
func (s *Session) SetState(v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = v
}

// Agent answers input messages with a stream of updates. A nil Session
// means a one-turn conversation. The stream ends after the turn's last
// update; an error ends it early and is yielded as (Update{}, err).
type Agent interface {
	Run(ctx context.Context, s *Session, input []Message) iter.Seq2[Update, error]
}

// AgentFunc adapts a function to Agent.
type AgentFunc func(ctx context.Context, s *Session, input []Message) iter.Seq2[Update, error]

// Run calls f.
func (f AgentFunc) Run(ctx context.Context, s *Session, input []Message) iter.Seq2[Update, error] {
	return f(ctx, s, input)
}
