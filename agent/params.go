package agent

import (
	"context"
	"fmt"

	"github.com/superstep/superstep/workflow"
)

// ModelParams are a caller's settings for the model calls of one request
// (for a host, the Responses API create request's tools, tool_choice,
// sampling and format fields). The caller puts them in the Params of the
// workflow.Invocation the agent works for; a ChatAgent reads them from its
// ctx (workflow.InvocationFrom) for every model call of the turn. The zero
// value changes nothing. Check them with ChatAgent.CheckParams first.
type ModelParams struct {
	// Instructions are sent after the agent's own (Options.Instructions),
	// in the same system prompt.
	Instructions string
	// Tools are the caller's function tools ("client tools"), offered to
	// the model next to the agent's own. The agent does not run them: when
	// the model calls one, the turn ends with an UpdateFunctionCall for
	// each such call (after running the agent's own tools called in the
	// same reply), and the caller answers in its next input with a Message
	// whose CallID is the call's.
	Tools []FunctionTool
	// ToolChoice constrains the model's tool calls (zero: auto). It applies
	// until the agent has run tools of its own in the turn; later model
	// calls of the turn use auto, so a forced call is not repeated forever.
	ToolChoice ToolChoice
	// ParallelToolCalls, when set, allows or forbids several tool calls in
	// one reply (sent only when tools are offered).
	ParallelToolCalls *bool
	// MaxOutputTokens caps each model reply; with Options.MaxOutputTokens
	// also set, the smaller cap holds. 0: no cap of the caller's.
	MaxOutputTokens int
	// MaxToolCalls, when set, caps the calls of the agent's own tools in
	// the turn (the Responses API's max_tool_calls: the tools the server
	// runs). Once that many ran, the model is called with tool choice
	// none, so that it answers; a call of the agent's tools past the cap
	// in one reply is not run (the model is told so), and shows nowhere.
	// Options.MaxToolCalls still fails a turn that reaches it.
	MaxToolCalls *int
	// Temperature and TopP, when set, are sent as they are.
	Temperature, TopP *float64
	// PresencePenalty and FrequencyPenalty, when set, are sent as they
	// are; only Chat Completions takes them (CheckParams refuses them
	// for an agent on the Responses API).
	PresencePenalty, FrequencyPenalty *float64
	// TextFormat, when set, asks for JSON output (nil: text).
	TextFormat *TextFormat
	// Verbosity, when set ("low" or "high"), asks for terser or longer
	// replies (Chat Completions verbosity, Responses text.verbosity).
	Verbosity string
	// ReasoningEffort, when set, is sent as the reasoning effort of a
	// reasoning model (Chat Completions reasoning_effort, Responses
	// reasoning.effort), as it is: the model server checks it.
	ReasoningEffort string
	// TruncateAuto (the Responses API's truncation "auto"): a model call
	// the model server refuses because the conversation exceeds its
	// context window is made again without the older half of the earlier
	// exchanges (each begins at a user message), until it fits or only
	// the newest exchange is left. The agent's memory keeps them all.
	TruncateAuto bool
	// ServiceTier, User, SafetyIdentifier, PromptCacheKey and
	// PromptCacheRetention, when set, are sent as they are: the caller's
	// processing tier, end-user identifiers and prompt cache hints, for
	// the model server.
	ServiceTier, User, SafetyIdentifier, PromptCacheKey, PromptCacheRetention string
}

// FunctionTool is a function the caller offers the model and runs itself.
type FunctionTool struct {
	Name        string
	Description string
	// Parameters is the JSON schema of the arguments (nil: none given).
	Parameters map[string]any
	// Strict asks the server to enforce the schema (nil: its default).
	Strict *bool
}

// Tool choice modes (ToolChoice.Mode).
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceNone     = "none"
	ToolChoiceRequired = "required"
	ToolChoiceFunction = "function"
)

// ToolChoice says whether the model must call a tool: Mode is
// ToolChoiceAuto (also ""), ToolChoiceNone, ToolChoiceRequired, or
// ToolChoiceFunction with Name the tool it must call.
type ToolChoice struct {
	Mode string
	Name string
}

// forced reports whether c makes the model call a tool.
func (c ToolChoice) forced() bool {
	return c.Mode == ToolChoiceRequired || c.Mode == ToolChoiceFunction
}

// Text formats (TextFormat.Type).
const (
	TextFormatJSONObject = "json_object"
	TextFormatJSONSchema = "json_schema"
)

// TextFormat asks the model for JSON output: any JSON object
// (TextFormatJSONObject), or one valid for Schema (TextFormatJSONSchema,
// which needs Name and Schema). The server enforces it.
type TextFormat struct {
	Type        string
	Name        string
	Description string
	Schema      map[string]any
	Strict      *bool
}

// ParamError is a ModelParams field an agent cannot honour: Param names it
// as the Responses API does ("tools[1].name", "tool_choice").
type ParamError struct {
	Param   string
	Message string
}

func (e *ParamError) Error() string { return fmt.Sprintf("agent: %s: %s", e.Param, e.Message) }

// ParamsChecker is implemented by agents that honour ModelParams (ChatAgent
// does). CheckParams returns a *ParamError for the first field the agent
// cannot honour; a host refuses such a request before it stores anything.
type ParamsChecker interface {
	CheckParams(p *ModelParams) error
}

var _ ParamsChecker = (*ChatAgent)(nil)

// CheckParams reports the first field of p the agent cannot honour, as a
// *ParamError: a client tool without a name, named twice, or named as one
// of the agent's own tools; a tool_choice of an unknown mode, naming no
// tool offered, or "required" with no tool offered; a text format that is
// neither json_object nor json_schema, or a json_schema without name or
// schema. Values in range (temperature, top_p) are the caller's to check.
func (a *ChatAgent) CheckParams(p *ModelParams) error {
	if p == nil {
		return nil
	}
	client := map[string]bool{}
	for i, t := range p.Tools {
		param := fmt.Sprintf("tools[%d].name", i)
		switch {
		case t.Name == "":
			return &ParamError{Param: param, Message: "a function tool needs a name"}
		case a.tools[t.Name] != nil:
			return &ParamError{Param: param, Message: fmt.Sprintf("tool %q is one of the model's own tools; name yours otherwise", t.Name)}
		case client[t.Name]:
			return &ParamError{Param: param, Message: fmt.Sprintf("tool %q is offered twice", t.Name)}
		}
		client[t.Name] = true
	}
	switch c := p.ToolChoice; c.Mode {
	case "", ToolChoiceAuto, ToolChoiceNone:
	case ToolChoiceRequired:
		if len(client)+len(a.tools) == 0 {
			return &ParamError{Param: "tool_choice", Message: `"required" needs at least one tool`}
		}
	case ToolChoiceFunction:
		if !client[c.Name] && a.tools[c.Name] == nil {
			return &ParamError{Param: "tool_choice", Message: fmt.Sprintf("tool_choice names function %q, which is not offered", c.Name)}
		}
	default:
		return &ParamError{Param: "tool_choice", Message: fmt.Sprintf("tool_choice of type %q is not supported; use none, auto, required or a function", c.Mode)}
	}
	if a.opts.API == APIResponses {
		for _, pen := range []struct {
			name string
			v    *float64
		}{{"presence_penalty", p.PresencePenalty}, {"frequency_penalty", p.FrequencyPenalty}} {
			if pen.v != nil && *pen.v != 0 {
				return &ParamError{Param: pen.name, Message: fmt.Sprintf("this model's server is called through the Responses API, which takes no %s", pen.name)}
			}
		}
	}
	if p.MaxToolCalls != nil && *p.MaxToolCalls < 0 {
		return &ParamError{Param: "max_tool_calls", Message: fmt.Sprintf("max_tool_calls must be 0 or more, not %d", *p.MaxToolCalls)}
	}
	if f := p.TextFormat; f != nil {
		switch {
		case f.Type != TextFormatJSONObject && f.Type != TextFormatJSONSchema:
			return &ParamError{Param: "text.format.type", Message: fmt.Sprintf("text format %q is not supported; use text, json_object or json_schema", f.Type)}
		case f.Type == TextFormatJSONSchema && f.Name == "":
			return &ParamError{Param: "text.format.name", Message: "a json_schema format needs a name"}
		case f.Type == TextFormatJSONSchema && f.Schema == nil:
			return &ParamError{Param: "text.format.schema", Message: "a json_schema format needs a schema"}
		}
	}
	return nil
}

// paramsFrom returns the ModelParams of the invocation in ctx, or nil.
func paramsFrom(ctx context.Context) *ModelParams {
	p, _ := workflow.InvocationFrom(ctx).Params.(*ModelParams)
	return p
}
