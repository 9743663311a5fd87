package protocol

import (
	"encoding/json"
	"fmt"
)

// ModelParams are the fields of a create request meant for the model that
// answers it. ParseCreate checks them; ReadModelParams reads them from a
// stored request; a host decides which its model honours.
type ModelParams struct {
	Instructions *string
	// Tools are the request's function tools, in order.
	Tools []FunctionTool
	// OtherTools are the types of its other tools (hosted tools such as
	// "web_search"), in order.
	OtherTools []string
	// ToolChoice is ToolChoice{Mode: "auto"} when the request has none.
	ToolChoice        ToolChoice
	ParallelToolCalls *bool
	MaxOutputTokens   *int64
	// MaxToolCalls caps the calls of the model's own (server-run) tools
	// in the response; nil: no cap.
	MaxToolCalls *int64
	Temperature  *float64
	// PresencePenalty and FrequencyPenalty are those fields, in [-2, 2].
	PresencePenalty, FrequencyPenalty *float64
	TopP                              *float64
	// TextFormat is text.format unless it is absent or {"type":"text"}.
	TextFormat *TextFormat
	// Verbosity is text.verbosity unless it is absent, null or the
	// default "medium".
	Verbosity *string
	// ReasoningEffort is reasoning.effort (nil: absent or null), as sent:
	// the set of efforts grows, and the model server knows its own.
	ReasoningEffort *string
	// ReasoningSummary is reasoning.summary, or the deprecated
	// reasoning.generate_summary (nil: both absent or null).
	ReasoningSummary *string
	// ServiceTier, User, SafetyIdentifier, PromptCacheKey and
	// PromptCacheRetention are those fields (nil: absent or null):
	// identifiers and hints for the model server, not settings of the
	// reply (Changed leaves them out).
	ServiceTier, User, SafetyIdentifier, PromptCacheKey, PromptCacheRetention *string
	// TruncateAuto: truncation is "auto" (drop the conversation's oldest
	// items when it does not fit the model's context window), not
	// "disabled" (the default: such a request fails).
	TruncateAuto bool
}

// FunctionTool is a function tool of a request.
type FunctionTool struct {
	Name        string
	Description string
	Parameters  json.RawMessage // a JSON schema object, or nil
	Strict      *bool
}

// ToolChoice is a request's tool_choice: Mode "none", "auto" or
// "required" (the string forms), "function" with Name, or the type of
// another object form ("allowed_tools", a hosted tool's type, ...).
type ToolChoice struct {
	Mode string
	Name string
}

// TextFormat is a request's text.format of type json_object or
// json_schema (Name, Description, Schema and Strict for the latter).
type TextFormat struct {
	Type        string
	Name        string
	Description string
	Schema      json.RawMessage
	Strict      *bool
}

// Changed returns the parameters whose value in p is not the API's
// default ("tools", "tool_choice", "parallel_tool_calls",
// "max_output_tokens", "max_tool_calls", "temperature", "top_p",
// "text.format", "text.verbosity", "reasoning.effort", "reasoning.summary", "truncation",
// "presence_penalty", "frequency_penalty"), in that
// order: what a model that takes no settings cannot honour. Instructions
// are not among them.
func (p *ModelParams) Changed() []string {
	var out []string
	add := func(cond bool, name string) {
		if cond {
			out = append(out, name)
		}
	}
	add(len(p.Tools)+len(p.OtherTools) > 0, "tools")
	add(p.ToolChoice.Mode != "auto", "tool_choice")
	add(p.ParallelToolCalls != nil && !*p.ParallelToolCalls, "parallel_tool_calls")
	add(p.MaxOutputTokens != nil, "max_output_tokens")
	add(p.MaxToolCalls != nil, "max_tool_calls")
	add(p.Temperature != nil && *p.Temperature != 1, "temperature")
	add(p.TopP != nil && *p.TopP != 1, "top_p")
	add(p.TextFormat != nil, "text.format")
	add(p.Verbosity != nil, "text.verbosity")
	add(p.ReasoningEffort != nil, "reasoning.effort")
	add(p.ReasoningSummary != nil, "reasoning.summary")
	add(p.TruncateAuto, "truncation")
	add(p.PresencePenalty != nil && *p.PresencePenalty != 0, "presence_penalty")
	add(p.FrequencyPenalty != nil && *p.FrequencyPenalty != 0, "frequency_penalty")
	return out
}

// ReadModelParams reads the model parameters of a create request, checked
// as ParseCreate checks them (a *RequestError when they are not valid).
func ReadModelParams(request []byte) (*ModelParams, error) {
	fields, err := decodeRequest(request)
	if err != nil {
		return nil, err
	}
	return readModelParams(fields)
}

func readModelParams(fields map[string]json.RawMessage) (*ModelParams, error) {
	p := &ModelParams{}
	var err error
	if p.Instructions, err = optString(fields["instructions"], "instructions"); err != nil {
		return nil, err
	}
	if p.Tools, p.OtherTools, err = readTools(fields["tools"]); err != nil {
		return nil, err
	}
	if p.ToolChoice, err = readToolChoice(fields["tool_choice"]); err != nil {
		return nil, err
	}
	if !IsNull(fields["parallel_tool_calls"]) {
		v, err := boolField(fields, "parallel_tool_calls", true)
		if err != nil {
			return nil, err
		}
		p.ParallelToolCalls = &v
	}
	if p.MaxOutputTokens, err = optInt(fields["max_output_tokens"], "max_output_tokens", 1); err != nil {
		return nil, err
	}
	if p.MaxToolCalls, err = optInt(fields["max_tool_calls"], "max_tool_calls", 0); err != nil {
		return nil, err
	}
	if p.Temperature, err = optNumber(fields["temperature"], "temperature", 0, 2); err != nil {
		return nil, err
	}
	if p.TopP, err = optNumber(fields["top_p"], "top_p", 0, 1); err != nil {
		return nil, err
	}
	if p.PresencePenalty, err = optNumber(fields["presence_penalty"], "presence_penalty", -2, 2); err != nil {
		return nil, err
	}
	if p.FrequencyPenalty, err = optNumber(fields["frequency_penalty"], "frequency_penalty", -2, 2); err != nil {
		return nil, err
	}
	if p.TextFormat, p.Verbosity, err = readText(fields["text"]); err != nil {
		return nil, err
	}
	if p.ReasoningEffort, p.ReasoningSummary, err = readReasoning(fields["reasoning"]); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		dst  **string
	}{{"service_tier", &p.ServiceTier}, {"user", &p.User}, {"safety_identifier", &p.SafetyIdentifier}, {"prompt_cache_key", &p.PromptCacheKey},
		{"prompt_cache_retention", &p.PromptCacheRetention}} {
		if *f.dst, err = optString(fields[f.name], f.name); err != nil {
			return nil, err
		}
	}
	if v, err := optString(fields["truncation"], "truncation"); err != nil {
		return nil, err
	} else if v != nil && *v != "auto" && *v != "disabled" {
		return nil, requestErr("truncation", CodeInvalidValue,
			"Invalid value: '%s'. Supported values are: 'auto' and 'disabled'.", truncate(*v, 64))
	} else {
		p.TruncateAuto = v != nil && *v == "auto"
	}
	return p, nil
}

// reasoningKeys are the fields of reasoning.
var reasoningKeys = []string{"effort", "summary", "generate_summary", "context"}

// readReasoning reads reasoning: an object whose effort and summary (or
// generate_summary) are strings or null. Other fields are tolerated.
func readReasoning(raw json.RawMessage) (effort, summary *string, err error) {
	if IsNull(raw) {
		return nil, nil, nil
	}
	if JSONKind(raw) != "an object" {
		return nil, nil, typeError("reasoning", "an object", raw)
	}
	fields, err := decodeObject(raw, "reasoning", reasoningKeys)
	if err != nil {
		return nil, nil, err
	}
	if effort, err = optString(fields["effort"], "reasoning.effort"); err != nil {
		return nil, nil, err
	}
	if summary, err = optString(fields["summary"], "reasoning.summary"); err != nil {
		return nil, nil, err
	}
	if summary == nil {
		if summary, err = optString(fields["generate_summary"], "reasoning.generate_summary"); err != nil {
			return nil, nil, err
		}
	}
	return effort, summary, nil
}

// functionToolKeys are the fields of a function tool.
var functionToolKeys = []string{"type", "name", "description", "parameters", "strict"}

// readTools reads tools, refusing what the API would refuse: not an
// array, an element that is not an object with a string type, or a
// function tool without a name or with a field of the wrong type
// (parameters must be a JSON schema object). Other tools are checked for
// their type only.
func readTools(raw json.RawMessage) ([]FunctionTool, []string, error) {
	if IsNull(raw) {
		return nil, nil, nil
	}
	var (
		tools []json.RawMessage
		fns   []FunctionTool
		other []string
	)
	if JSONKind(raw) != "an array" || json.Unmarshal(raw, &tools) != nil {
		return nil, nil, typeError("tools", "an array", raw)
	}
	for i, t := range tools {
		param := fmt.Sprintf("tools[%d]", i)
		if JSONKind(t) != "an object" {
			return nil, nil, typeError(param, "an object", t)
		}
		fields, err := decodeObject(t, param, functionToolKeys)
		if err != nil {
			return nil, nil, err
		}
		typ, err := optString(fields["type"], param+".type")
		if err != nil {
			return nil, nil, err
		}
		if typ == nil || *typ == "" {
			return nil, nil, requestErr(param+".type", CodeMissingParam, "Missing required parameter: '%s.type'.", param)
		}
		if *typ != "function" {
			other = append(other, *typ)
			continue
		}
		fn, err := readFunctionTool(fields, param)
		if err != nil {
			return nil, nil, err
		}
		fns = append(fns, *fn)
	}
	return fns, other, nil
}

func readFunctionTool(fields map[string]json.RawMessage, param string) (*FunctionTool, error) {
	name, err := optString(fields["name"], param+".name")
	if err != nil {
		return nil, err
	}
	if name == nil || *name == "" {
		return nil, requestErr(param+".name", CodeMissingParam, "Missing required parameter: '%s.name'.", param)
	}
	fn := &FunctionTool{Name: *name}
	if p := fields["parameters"]; !IsNull(p) {
		if JSONKind(p) != "an object" {
			return nil, typeError(param+".parameters", "an object (a JSON schema)", p)
		}
		fn.Parameters = p
	}
	desc, err := optString(fields["description"], param+".description")
	if err != nil {
		return nil, err
	}
	if desc != nil {
		fn.Description = *desc
	}
	if s := fields["strict"]; !IsNull(s) {
		var v bool
		if json.Unmarshal(s, &v) != nil {
			return nil, typeError(param+".strict", "a boolean", s)
		}
		fn.Strict = &v
	}
	return fn, nil
}

// readToolChoice reads tool_choice: "none", "auto", "required", or an
// object with a string type ({"type":"function","name":...} needs the name).
func readToolChoice(raw json.RawMessage) (ToolChoice, error) {
	if IsNull(raw) {
		return ToolChoice{Mode: "auto"}, nil
	}
	switch JSONKind(raw) {
	case "a string":
		var s string
		_ = json.Unmarshal(raw, &s)
		if s != "none" && s != "auto" && s != "required" {
			return ToolChoice{}, requestErr("tool_choice", CodeInvalidValue,
				"Invalid value: '%s'. Supported values are: 'none', 'auto' and 'required', or an object.", truncate(s, 64))
		}
		return ToolChoice{Mode: s}, nil
	case "an object":
	default:
		return ToolChoice{}, typeError("tool_choice", "a string or an object", raw)
	}
	fields, err := decodeObject(raw, "tool_choice", []string{"type", "name"})
	if err != nil {
		return ToolChoice{}, err
	}
	typ, err := optString(fields["type"], "tool_choice.type")
	if err != nil {
		return ToolChoice{}, err
	}
	if typ == nil || *typ == "" {
		return ToolChoice{}, requestErr("tool_choice.type", CodeMissingParam, "Missing required parameter: 'tool_choice.type'.")
	}
	c := ToolChoice{Mode: *typ}
	if c.Mode == "function" {
		name, err := optString(fields["name"], "tool_choice.name")
		if err != nil {
			return ToolChoice{}, err
		}
		if name == nil || *name == "" {
			return ToolChoice{}, requestErr("tool_choice.name", CodeMissingParam, "Missing required parameter: 'tool_choice.name'.")
		}
		c.Name = *name
	}
	return c, nil
}

// readText reads text, decoded once: its format (readTextFormat) and its
// verbosity (readVerbosity).
func readText(raw json.RawMessage) (*TextFormat, *string, error) {
	if IsNull(raw) {
		return nil, nil, nil
	}
	if JSONKind(raw) != "an object" {
		return nil, nil, typeError("text", "an object", raw)
	}
	text, err := decodeObject(raw, "text", []string{"format", "verbosity"})
	if err != nil {
		return nil, nil, err
	}
	f, err := readTextFormat(text["format"])
	if err != nil {
		return nil, nil, err
	}
	v, err := readVerbosity(text["verbosity"])
	if err != nil {
		return nil, nil, err
	}
	return f, v, nil
}

// readVerbosity reads text.verbosity ("low", "medium" or "high"); nil
// for absent, null or "medium", the default.
func readVerbosity(raw json.RawMessage) (*string, error) {
	v, err := optString(raw, "text.verbosity")
	switch {
	case err != nil:
		return nil, err
	case v == nil || *v == "medium":
		return nil, nil
	case *v != "low" && *v != "high":
		return nil, requestErr("text.verbosity", CodeInvalidValue,
			"Invalid value: '%s'. Supported values are: 'low', 'medium', and 'high'.", truncate(*v, 64))
	}
	return v, nil
}

// readTextFormat reads text.format (f); nil for absent or type "text".
func readTextFormat(f json.RawMessage) (*TextFormat, error) {
	if IsNull(f) {
		return nil, nil
	}
	if JSONKind(f) != "an object" {
		return nil, typeError("text.format", "an object", f)
	}
	fields, err := decodeObject(f, "text.format", []string{"type", "name", "description", "schema", "strict"})
	if err != nil {
		return nil, err
	}
	typ, err := optString(fields["type"], "text.format.type")
	if err != nil {
		return nil, err
	}
	switch {
	case typ == nil || *typ == "":
		return nil, requestErr("text.format.type", CodeMissingParam, "Missing required parameter: 'text.format.type'.")
	case *typ == "text":
		return nil, nil
	case *typ != "json_object" && *typ != "json_schema":
		return nil, requestErr("text.format.type", CodeInvalidValue,
			"Invalid value: '%s'. Supported values are: 'text', 'json_object' and 'json_schema'.", truncate(*typ, 64))
	}
	tf := &TextFormat{Type: *typ}
	if *typ == "json_object" {
		return tf, nil
	}
	name, err := optString(fields["name"], "text.format.name")
	if err != nil {
		return nil, err
	}
	if name == nil || *name == "" {
		return nil, requestErr("text.format.name", CodeMissingParam, "Missing required parameter: 'text.format.name'.")
	}
	tf.Name = *name
	if s := fields["schema"]; JSONKind(s) != "an object" {
		if IsNull(s) {
			return nil, requestErr("text.format.schema", CodeMissingParam, "Missing required parameter: 'text.format.schema'.")
		}
		return nil, typeError("text.format.schema", "an object (a JSON schema)", s)
	}
	tf.Schema = fields["schema"]
	desc, err := optString(fields["description"], "text.format.description")
	if err != nil {
		return nil, err
	}
	if desc != nil {
		tf.Description = *desc
	}
	if s := fields["strict"]; !IsNull(s) {
		var v bool
		if json.Unmarshal(s, &v) != nil {
			return nil, typeError("text.format.strict", "a boolean", s)
		}
		tf.Strict = &v
	}
	return tf, nil
}

// optInt reads an optional integer of at least lo; absent or null gives nil.
func optInt(raw json.RawMessage, param string, lo int64) (*int64, error) {
	if IsNull(raw) {
		return nil, nil
	}
	var v int64
	if JSONKind(raw) != "a number" || json.Unmarshal(raw, &v) != nil {
		return nil, typeError(param, "an integer", raw)
	}
	if v < lo {
		return nil, requestErr(param, CodeInvalidValue, "Invalid '%s': integer below minimum value. Expected a value >= %d, but got %d instead.", param, lo, v)
	}
	return &v, nil
}

// optNumber reads an optional number in [lo, hi]; absent or null gives nil.
func optNumber(raw json.RawMessage, param string, lo, hi float64) (*float64, error) {
	if IsNull(raw) {
		return nil, nil
	}
	var v float64
	if JSONKind(raw) != "a number" || json.Unmarshal(raw, &v) != nil {
		return nil, typeError(param, "a number", raw)
	}
	if v < lo || v > hi {
		return nil, requestErr(param, CodeInvalidValue, "Invalid '%s': expected a value between %g and %g, but got %g instead.", param, lo, hi, v)
	}
	return &v, nil
}
