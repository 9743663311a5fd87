package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/superstep/superstep/workflow"
)

// A ChatAgent journals its model calls and its own tools' calls
// (workflow.Journaled) when it runs in an executor of a run with a journal
// (a host gives its runs one): a call that finished before a crash is
// answered from the journal when the superstep runs again, so it is not
// paid for or executed twice. A model call's entry holds its whole reply
// and the text deltas it streamed, which are emitted again as they came,
// so a live stream after recovery shows the same deltas.

// journaledReply is a model call's journal entry.
type journaledReply struct {
	Text   string     `json:"text,omitempty"`
	Calls  []toolCall `json:"calls,omitempty"`
	Reason string     `json:"reason,omitempty"`
	Usage  Usage      `json:"usage"`
	Deltas []string   `json:"deltas,omitempty"`
}

// journalRequest is what identifies a model call's request: everything
// the request sends.
type journalRequest struct {
	Model        string            `json:"model"`
	Instructions string            `json:"instructions,omitempty"`
	Conv         []journalItem     `json:"conv"`
	Tools        []toolDef         `json:"tools,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	MaxTokens    int               `json:"max_tokens,omitempty"`
	ToolChoice   ToolChoice        `json:"tool_choice"`
	Parallel     *bool             `json:"parallel,omitempty"`
	Temperature  *float64          `json:"temperature,omitempty"`
	TopP         *float64          `json:"top_p,omitempty"`
	Format       *TextFormat       `json:"format,omitempty"`
	Reasoning    string            `json:"reasoning,omitempty"`
	Verbosity    string            `json:"verbosity,omitempty"`
	Presence     *float64          `json:"presence_penalty,omitempty"`
	Frequency    *float64          `json:"frequency_penalty,omitempty"`
	ServiceTier  string            `json:"service_tier,omitempty"`
	User         string            `json:"user,omitempty"`
	SafetyID     string            `json:"safety_identifier,omitempty"`
	CacheKey     string            `json:"prompt_cache_key,omitempty"`
	CacheRetain  string            `json:"prompt_cache_retention,omitempty"`
}

type journalItem struct {
	Role   Role       `json:"role"`
	Text   string     `json:"text,omitempty"`
	Parts  []Part     `json:"parts,omitempty"`
	Calls  []toolCall `json:"calls,omitempty"`
	CallID string     `json:"call_id,omitempty"`
}

// encode returns the request as journalRequest JSON.
func (req *modelRequest) encode() []byte {
	j := journalRequest{Model: req.model, Instructions: req.instructions, Tools: req.tools, Metadata: req.metadata,
		MaxTokens: req.maxTokens, ToolChoice: req.toolChoice, Parallel: req.parallel, Temperature: req.temperature,
		TopP: req.topP, Format: req.format, Reasoning: req.reasoning, Verbosity: req.verbosity, Presence: req.presence, Frequency: req.frequency,
		ServiceTier: req.serviceTier, User: req.user, SafetyID: req.safetyID, CacheKey: req.cacheKey, CacheRetain: req.cacheRetention, Conv: make([]journalItem, len(req.conv))}
	for i, c := range req.conv {
		j.Conv[i] = journalItem{Role: c.role, Text: c.text, Parts: c.parts, Calls: c.calls, CallID: c.callID}
	}
	b, err := json.Marshal(j)
	if err != nil { // a tool schema that does not encode: never matches
		return fmt.Appendf(nil, "unencodable request: %v", err)
	}
	return b
}

// journaledModelCall makes the model call through the journal: a
// recorded reply is replayed (its deltas emitted again), else call makes
// it and its reply is recorded before it is used.
func (t *chatTurn) journaledModelCall(req *modelRequest, call func() (*modelReply, []string, error)) (*modelReply, error) {
	if !workflow.Journaling(t.ctx) {
		rep, _, err := call()
		return rep, err
	}
	var rep *modelReply
	data, replayed, err := workflow.Journaled(t.ctx, "model", t.a.opts.Model, req.encode(), func(context.Context) ([]byte, error) {
		r, deltas, err := call()
		if err != nil {
			return nil, err
		}
		rep = r
		return json.Marshal(journaledReply{Text: r.text, Calls: r.calls, Reason: r.reason, Usage: r.usage, Deltas: deltas})
	})
	if err != nil {
		return nil, err
	}
	if !replayed {
		return rep, nil
	}
	var jr journaledReply
	if err := json.Unmarshal(data, &jr); err != nil {
		return nil, fmt.Errorf("agent: journaled model reply: %w", err)
	}
	for _, d := range jr.Deltas {
		if err := t.emit(Update{Kind: UpdateTextDelta, Text: d}); err != nil {
			return nil, err
		}
	}
	return &modelReply{text: jr.Text, calls: jr.Calls, reason: jr.Reason, usage: jr.Usage}, nil
}

// journaledTool runs one of the agent's tools through the journal: a
// recorded output is returned, else run runs the tool and its output is
// recorded before it is used.
func (t *chatTurn) journaledTool(c toolCall, run func() (string, error)) (string, error) {
	if !workflow.Journaling(t.ctx) {
		return run()
	}
	data, _, err := workflow.Journaled(t.ctx, "tool", c.Name, []byte(c.ID+"\x00"+c.Args), func(context.Context) ([]byte, error) {
		out, err := run()
		return []byte(out), err
	})
	return string(data), err
}

// JournalCompletion makes an agent executor's completion inside a
// superstep journaled (workflow.CompletionJournaler): in a superstep of
// several executors, an agent that finished before a crash is not run
// again when the superstep re-runs; its reply is re-applied.
func (e *agentExecutor) JournalCompletion() bool { return true }

// JournalCompletionAlone (workflow.SoloCompletionJournaler) is false for
// a ChatAgent: alone in its superstep (every hosted conversation's turn)
// it writes no completion record. Its model and tool calls are journaled
// one by one, so a re-run after a crash before the commit makes none of
// them again; the record would only add a write per turn that holds the
// agent's whole memory. Another Agent's calls may not be journaled: its
// completion is.
func (e *agentExecutor) JournalCompletionAlone() bool {
	_, chat := e.a.(*ChatAgent)
	return !chat
}
