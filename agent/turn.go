package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/superstep/superstep/internal/wait"
	"github.com/superstep/superstep/workflow"
)

// errStopped ends a turn whose consumer stopped iterating.
var errStopped = errors.New("agent: consumer stopped")

// convItem is one entry of a ChatAgent conversation.
type convItem struct {
	role   Role
	text   string
	parts  []Part     // a user message's content, when more than text
	calls  []toolCall // an assistant's tool calls
	callID string     // a tool result: the call it answers
}

// toolCall is a function call the model made.
type toolCall struct{ ID, Name, Args string }

// toolDef is a function offered to the model.
type toolDef struct {
	Name, Description string
	Parameters        map[string]any
	Strict            *bool // nil: the API's default
}

// modelRequest is one model call, independent of the API.
type modelRequest struct {
	model        string
	instructions string
	conv         []convItem
	tools        []toolDef
	metadata     map[string]string
	maxTokens    int
	// The caller's settings (ModelParams); zero values are not sent.
	toolChoice  ToolChoice
	parallel    *bool
	temperature *float64
	topP        *float64
	format      *TextFormat
	presence    *float64
	frequency   *float64
	reasoning   string // reasoning effort
	verbosity   string
	// Sent as they are when set (ModelParams).
	serviceTier, user, safetyID, cacheKey, cacheRetention string
	// dropped is how many of the conversation's oldest items this call
	// leaves out (truncation auto); 0 for the whole conversation.
	dropped int
}

// modelReply is a model's answer, independent of the API.
type modelReply struct {
	text   string
	calls  []toolCall
	reason string // "", ReasonMaxOutputTokens or ReasonContentFilter
	usage  Usage
}

// fromMessages converts input messages to conversation items. A function
// call an assistant made (a replayed conversation) joins the assistant item
// before it, as the model API pairs calls with their outputs; the output of
// such a call is a tool result. Outputs of function calls the model did
// not make in this conversation become user text, since the model has no
// call to pair them with.
//
// known holds the ids of calls made earlier in the conversation (a
// Session's history), whose outputs are tool results too.
func fromMessages(known map[string]bool, in []Message) []convItem {
	out := make([]convItem, 0, len(in))
	calls := map[string]bool{}
	for id := range known {
		calls[id] = true
	}
	for _, m := range in {
		role := m.Role
		switch {
		case m.IsCall():
			calls[m.CallID] = true
			c := toolCall{ID: m.CallID, Name: m.Name, Args: m.Arguments}
			if n := len(out); n > 0 && out[n-1].role == RoleAssistant {
				out[n-1].calls = append(out[n-1].calls, c)
			} else {
				out = append(out, convItem{role: RoleAssistant, calls: []toolCall{c}})
			}
			continue
		case m.CallID != "" && calls[m.CallID]:
			out = append(out, convItem{role: RoleTool, callID: m.CallID, text: m.Text})
			continue
		case m.CallID != "":
			out = append(out, convItem{role: RoleUser, text: "Output of call " + m.CallID + ": " + m.Text})
			continue
		case role == "" || role == RoleTool:
			role = RoleUser
		}
		out = append(out, convItem{role: role, text: m.Text, parts: m.Parts})
	}
	return out
}

// chatTurn is one turn of a ChatAgent in progress.
type chatTurn struct {
	a     *ChatAgent
	ctx   context.Context
	yield func(Update, error) bool
	conv  []convItem
	usage Usage
	calls int // tool calls run so far
	// params are the caller's settings (nil: none); ranTools is set once
	// the agent ran tools of its own, which ends a forced tool choice.
	params   *ModelParams
	ranTools bool
}

// emit passes u to the consumer.
func (t *chatTurn) emit(u Update) error {
	u.Source = t.a.opts.Name
	if !t.yield(u, nil) {
		return errStopped
	}
	return nil
}

// run calls the model and the tools until the model answers in text.
func (t *chatTurn) run() error {
	handoffs := handoffsFrom(t.ctx)
	for {
		rep, err := t.callModel(handoffs)
		if err != nil {
			return err
		}
		t.usage.Add(rep.usage)
		t.conv = append(t.conv, convItem{role: RoleAssistant, text: rep.text, calls: rep.calls})
		if rep.text != "" {
			if err := t.emit(Update{Kind: UpdateText, Text: rep.text}); err != nil {
				return err
			}
		}
		if target := handoffCalled(rep.calls, handoffs); target != "" {
			for _, c := range rep.calls { // keep the conversation well formed
				t.conv = append(t.conv, convItem{role: RoleTool, callID: c.ID, text: "handed off to " + target})
			}
			if err := t.emit(Update{Kind: UpdateHandoff, Name: target}); err != nil {
				return err
			}
			return t.done("")
		}
		if len(rep.calls) == 0 || rep.reason != "" {
			return t.done(rep.reason)
		}
		var asked []toolCall // calls of the caller's tools
		for _, c := range rep.calls {
			if t.clientTool(c.Name) {
				asked = append(asked, c)
				continue
			}
			if err := t.runTool(c); err != nil {
				return err
			}
		}
		t.ranTools = true
		if len(asked) > 0 {
			// The caller runs these: the turn ends, and its next input
			// answers them (a Message with the call's CallID).
			for _, c := range asked {
				if err := t.emit(Update{Kind: UpdateFunctionCall, CallID: c.ID, Name: c.Name, Arguments: c.Args}); err != nil {
					return err
				}
			}
			return t.done("")
		}
	}
}

// clientTool reports whether name is one of the caller's tools
// (ModelParams.Tools) rather than the agent's own.
func (t *chatTurn) clientTool(name string) bool {
	if t.params == nil || t.a.tools[name] != nil {
		return false
	}
	for _, ct := range t.params.Tools {
		if ct.Name == name {
			return true
		}
	}
	return false
}

// done ends the turn with its usage and incomplete reason.
func (t *chatTurn) done(reason string) error {
	u := t.usage
	return t.emit(Update{Kind: UpdateDone, Usage: &u, Reason: reason})
}

// toolsSpent reports whether the turn ran as many of the agent's tools as
// the caller allows (ModelParams.MaxToolCalls).
func (t *chatTurn) toolsSpent() bool {
	return t.params != nil && t.params.MaxToolCalls != nil && t.calls >= *t.params.MaxToolCalls
}

// runTool runs one tool call and appends its result to the conversation.
// A tool's error is told to the model (it may recover); only the turn's
// cancellation fails the turn. A call past the caller's cap is not run:
// the model is told so, and nothing is emitted.
func (t *chatTurn) runTool(c toolCall) error {
	if t.toolsSpent() {
		t.conv = append(t.conv, convItem{role: RoleTool, callID: c.ID,
			text: fmt.Sprintf("not run: this response's max_tool_calls (%d) was reached; answer without it", *t.params.MaxToolCalls)})
		return nil
	}
	if t.calls >= t.a.opts.MaxToolCalls {
		return fmt.Errorf("%w: the model asked for call %d (%s), limit %d", ErrToolCallLimit, t.calls+1, c.Name, t.a.opts.MaxToolCalls)
	}
	t.calls++
	if err := t.emit(Update{Kind: UpdateToolCall, CallID: c.ID, Name: c.Name, Arguments: c.Args}); err != nil {
		return err
	}
	out, err := t.journaledTool(c, func() (string, error) {
		tool := t.a.tools[c.Name]
		if tool == nil {
			return "error: unknown tool " + c.Name, nil
		}
		tctx, span := t.startToolSpan(c)
		res, err := tool.Call(context.WithValue(tctx, keyCallID, c.ID), c.Args)
		endToolSpan(span, err)
		switch {
		case t.ctx.Err() != nil:
			return "", fmt.Errorf("agent: tool %q: %w", c.Name, context.Cause(t.ctx))
		case err != nil:
			return "error: " + err.Error(), nil
		}
		return res, nil
	})
	if err != nil {
		return err
	}
	t.conv = append(t.conv, convItem{role: RoleTool, callID: c.ID, text: out})
	return t.emit(Update{Kind: UpdateToolResult, CallID: c.ID, Name: c.Name, Text: out})
}

// request builds the next model call.
func (t *chatTurn) request(handoffs []HandoffTarget) *modelRequest {
	o := &t.a.opts
	md := map[string]string{}
	for k, v := range o.Metadata {
		md[k] = v
	}
	if o.MetadataFrom != nil {
		for k, v := range o.MetadataFrom(t.ctx) {
			md[k] = v
		}
	}
	for k, v := range metadataFrom(t.ctx) {
		md[k] = v
	}
	req := &modelRequest{model: o.Model, instructions: o.Instructions, conv: t.conv, metadata: md, maxTokens: o.MaxOutputTokens}
	for _, tool := range o.Tools {
		req.tools = append(req.tools, toolDef{Name: tool.Name, Description: tool.Description, Parameters: tool.Parameters})
	}
	for _, h := range handoffs {
		req.tools = append(req.tools, h.tool())
	}
	if p := t.params; p != nil {
		t.applyParams(req, p)
	}
	return req
}

// applyParams adds the caller's settings p to req.
func (t *chatTurn) applyParams(req *modelRequest, p *ModelParams) {
	if p.Instructions != "" {
		req.instructions = joinNonEmpty("\n\n", req.instructions, p.Instructions)
	}
	for _, ct := range p.Tools {
		req.tools = append(req.tools, toolDef{Name: ct.Name, Description: ct.Description, Parameters: ct.Parameters, Strict: ct.Strict})
	}
	if m := p.MaxOutputTokens; m > 0 && (req.maxTokens <= 0 || m < req.maxTokens) {
		req.maxTokens = m
	}
	req.toolChoice = p.ToolChoice
	if t.ranTools && req.toolChoice.forced() {
		req.toolChoice = ToolChoice{}
	}
	if t.toolsSpent() && len(req.tools) > 0 {
		req.toolChoice = ToolChoice{Mode: ToolChoiceNone} // the model is to answer now
	}
	if len(req.tools) > 0 {
		req.parallel = p.ParallelToolCalls
	}
	req.temperature, req.topP, req.format, req.reasoning = p.Temperature, p.TopP, p.TextFormat, p.ReasoningEffort
	req.serviceTier, req.user, req.safetyID, req.cacheKey = p.ServiceTier, p.User, p.SafetyIdentifier, p.PromptCacheKey
	req.cacheRetention = p.PromptCacheRetention
	req.presence, req.frequency, req.verbosity = p.PresencePenalty, p.FrequencyPenalty, p.Verbosity
}

// joinNonEmpty joins the non-empty strings of parts with sep.
func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

// callModel makes one model call, through the run's journal (see
// journaledModelCall): a call the journal answers makes no request and no
// model span.
func (t *chatTurn) callModel(handoffs []HandoffTarget) (*modelReply, error) {
	req := t.request(handoffs)
	return t.journaledModelCall(req, func() (*modelReply, []string, error) { return t.callModelFitting(req) })
}

// callModelFitting is callModelLive, and with ModelParams.TruncateAuto,
// again on a shorter conversation while the model server refuses it as
// longer than its context window. It runs inside the journaled call: the
// journal records the reply under the whole request, so a re-run after a
// crash replays it without asking again.
func (t *chatTurn) callModelFitting(req *modelRequest) (*modelReply, []string, error) {
	for {
		rep, deltas, err := t.callModelLive(req)
		if err == nil || t.params == nil || !t.params.TruncateAuto || !contextOverflow(err) {
			return rep, deltas, err
		}
		conv, ok := dropOlderHalf(req.conv)
		if !ok {
			return nil, nil, err
		}
		shorter := *req
		shorter.conv, shorter.dropped = conv, req.dropped+len(req.conv)-len(conv)
		req = &shorter
	}
}

// serverError wraps a failed call of api, adding the model server's own
// message and code, which openai-go's error leaves out ("400 Bad
// Request" alone does not say what the server refused).
func serverError(api string, err error) error {
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.Message == "" {
		return fmt.Errorf("%s: %w", api, err)
	}
	msg := apiErr.Message
	if len(msg) > 500 {
		msg = msg[:500] + "..."
	}
	if apiErr.Code != "" {
		msg += " (code " + apiErr.Code + ")"
	}
	return fmt.Errorf("%s: %w: %s", api, err, strings.ToValidUTF8(msg, ""))
}

// contextOverflow reports whether err is a model server's refusal of a
// request longer than the model's context window: OpenAI's error code
// context_length_exceeded (also in a streamed failure), or a 400 whose
// message says so as vLLM and llama.cpp's server do.
func contextOverflow(err error) bool {
	if strings.Contains(err.Error(), "context_length_exceeded") {
		return true
	}
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		return false
	}
	if apiErr.StatusCode != 400 {
		return false
	}
	msg := strings.ToLower(apiErr.Message)
	for _, s := range []string{"maximum context length", "context length exceeded", "context window", "exceeds the available context size"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// dropOlderHalf returns conv without the older half of the exchanges
// before the last (an exchange begins at a user message, so a tool call
// keeps its result), and false when there is only one exchange.
func dropOlderHalf(conv []convItem) ([]convItem, bool) {
	var starts []int
	for i, it := range conv {
		if it.role == RoleUser {
			starts = append(starts, i)
		}
	}
	if len(starts) < 2 {
		return conv, false
	}
	return conv[starts[max(1, len(starts)/2)]:], true
}

// callModelLive makes one model call, retrying per the policy, and
// returns the reply with the deltas the successful attempt streamed.
// Deltas streamed by a failed attempt are voided with an UpdateRetry.
func (t *chatTurn) callModelLive(req *modelRequest) (rep *modelReply, _ []string, err error) {
	pol := t.a.retryPolicy()
	ctx, span := t.startModelSpan(req)
	attempts := 0
	defer func() { endModelSpan(span, rep, attempts, err) }()
	keep := workflow.Journaling(t.ctx) // the deltas go into the journal
	for attempt := 0; ; attempt++ {
		attempts++
		var deltas []string
		streamed := false
		emit := func(delta string) error {
			streamed = true
			if keep {
				deltas = append(deltas, delta)
			}
			return t.emit(Update{Kind: UpdateTextDelta, Text: delta})
		}
		actx, cancel := context.WithTimeout(ctx, t.a.opts.CallTimeout)
		rep, err := t.a.call(actx, req, emit)
		cancel()
		if err == nil {
			return rep, deltas, nil
		}
		if errors.Is(err, errStopped) {
			return nil, nil, err
		}
		if t.ctx.Err() != nil {
			return nil, nil, fmt.Errorf("agent: model call: %w", context.Cause(t.ctx))
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("timed out after %v: %w", t.a.opts.CallTimeout, err)
		}
		if !retryable(err) || attempt >= pol.Retries {
			return nil, nil, fmt.Errorf("%w (model %s, %d attempt(s)): %w", ErrModel, t.a.opts.Model, attempt+1, err)
		}
		if streamed {
			if err := t.emit(Update{Kind: UpdateRetry}); err != nil {
				return nil, nil, err
			}
		}
		if !wait.Sleep(t.ctx, pol.backoff(attempt)) {
			return nil, nil, fmt.Errorf("agent: model call: %w", context.Cause(t.ctx))
		}
	}
}

// retryPolicy is the policy with defaults filled in.
func (a *ChatAgent) retryPolicy() RetryPolicy {
	p := a.opts.Retry
	switch {
	case p.Retries < 0:
		p.Retries = 0
	case p.Retries == 0 && p.Backoff == 0 && p.MaxBackoff == 0:
		p.Retries = DefaultRetries
	}
	if p.Backoff <= 0 {
		p.Backoff = DefaultBackoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = max(DefaultMaxBackoff, p.Backoff)
	}
	return p
}

// backoff is the wait before retry number attempt+1.
func (p RetryPolicy) backoff(attempt int) time.Duration {
	d := p.Backoff
	for range attempt {
		d *= 2
		if d >= p.MaxBackoff {
			return p.MaxBackoff
		}
	}
	return min(d, p.MaxBackoff)
}

// retryable reports whether a failed model call may succeed when repeated.
func retryable(err error) bool {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		s := apiErr.StatusCode
		return s == 408 || s == 409 || s == 429 || s >= 500
	}
	// Network errors, timeouts, broken or truncated streams, error events.
	return true
}

// call dispatches to the configured API.
func (a *ChatAgent) call(ctx context.Context, req *modelRequest, emit func(string) error) (*modelReply, error) {
	if a.opts.API == APIResponses {
		return a.callResponses(ctx, req, emit)
	}
	return a.callChat(ctx, req, emit)
}

// normalizeReason maps a finish reason to an incomplete reason.
func normalizeReason(finish string) string {
	switch strings.ToLower(finish) {
	case "length", "max_output_tokens", "max_tokens":
		return ReasonMaxOutputTokens
	case "content_filter":
		return ReasonContentFilter
	}
	return ""
}
