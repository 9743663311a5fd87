package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/protocol"
)

// modelParams reads the model settings of request (tools, tool_choice,
// parallel_tool_calls, instructions, text.format, max_output_tokens,
// max_tool_calls, temperature, top_p, presence_penalty, frequency_penalty,
// text.verbosity, reasoning.effort, truncation) for m. A model that honours them (a plain agent that
// is an agent.ParamsChecker, such as a ChatAgent) gets them as the Params
// of its workflow.Invocation; any other model takes none but
// instructions, which it echoes. What m cannot honour is an *InputError,
// before anything is stored: never a setting silently ignored.
func modelParams(m *model, request []byte) (*agent.ModelParams, error) {
	mp, err := protocol.ReadModelParams(request)
	if err != nil {
		if re, ok := errors.AsType[*protocol.RequestError](err); ok {
			return nil, &InputError{Param: re.Param, Code: re.Code, Message: re.Message}
		}
		return nil, fmt.Errorf("host: read the model settings: %w", err)
	}
	if m.params == nil {
		if changed := mp.Changed(); len(changed) > 0 {
			return nil, &InputError{Param: changed[0], Code: protocol.CodeUnsupportedValue, Message: fmt.Sprintf(
				"Model '%s' does not take %s: it is a %s whose own code makes its model calls. "+
					"Only a model hosting one chat agent (a plain ChatAgent, or a model proxied with --proxy-models) takes the request's model settings.",
				m.ID, strings.Join(changed, ", "), m.Kind)}
		}
		return nil, nil
	}
	if mp.ReasoningSummary != nil {
		return nil, &InputError{Param: "reasoning.summary", Code: protocol.CodeUnsupportedValue, Message: fmt.Sprintf(
			"Model '%s' returns no reasoning summaries: superstep passes reasoning.effort on to the model server, and keeps no reasoning items.", m.ID)}
	}
	if len(mp.OtherTools) > 0 {
		return nil, &InputError{Param: "tools", Code: protocol.CodeUnsupportedValue, Message: fmt.Sprintf(
			"Tools of type '%s' are not supported: superstep runs no hosted tools; offer function tools and run them yourself.",
			mp.OtherTools[0])}
	}
	p, err := toAgentParams(mp)
	if err != nil {
		return nil, err
	}
	if err := m.params.CheckParams(p); err != nil {
		if pe, ok := errors.AsType[*agent.ParamError](err); ok {
			return nil, &InputError{Param: pe.Param, Code: protocol.CodeInvalidValue, Message: pe.Message}
		}
		return nil, &InputError{Param: "tools", Code: protocol.CodeInvalidValue, Message: err.Error()}
	}
	return p, nil
}

// orEmpty is *s, or "" for nil: an agent's setting not given is empty.
func orEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// toAgentParams converts the read settings to the agent's.
func toAgentParams(mp *protocol.ModelParams) (*agent.ModelParams, error) {
	p := &agent.ModelParams{ToolChoice: agent.ToolChoice{Mode: mp.ToolChoice.Mode, Name: mp.ToolChoice.Name},
		ParallelToolCalls: mp.ParallelToolCalls, Temperature: mp.Temperature, TopP: mp.TopP,
		PresencePenalty: mp.PresencePenalty, FrequencyPenalty: mp.FrequencyPenalty, TruncateAuto: mp.TruncateAuto,
		Instructions: orEmpty(mp.Instructions), Verbosity: orEmpty(mp.Verbosity), ReasoningEffort: orEmpty(mp.ReasoningEffort),
		ServiceTier: orEmpty(mp.ServiceTier), User: orEmpty(mp.User), SafetyIdentifier: orEmpty(mp.SafetyIdentifier),
		PromptCacheKey: orEmpty(mp.PromptCacheKey), PromptCacheRetention: orEmpty(mp.PromptCacheRetention)}
	if mp.MaxOutputTokens != nil {
		p.MaxOutputTokens = int(*mp.MaxOutputTokens)
	}
	if mp.MaxToolCalls != nil {
		n := int(min(*mp.MaxToolCalls, math.MaxInt32))
		p.MaxToolCalls = &n
	}
	for i, t := range mp.Tools {
		schema, err := schemaOf(t.Parameters, fmt.Sprintf("tools[%d].parameters", i))
		if err != nil {
			return nil, err
		}
		p.Tools = append(p.Tools, agent.FunctionTool{Name: t.Name, Description: t.Description, Parameters: schema, Strict: t.Strict})
	}
	if f := mp.TextFormat; f != nil {
		schema, err := schemaOf(f.Schema, "text.format.schema")
		if err != nil {
			return nil, err
		}
		p.TextFormat = &agent.TextFormat{Type: f.Type, Name: f.Name, Description: f.Description, Schema: schema, Strict: f.Strict}
	}
	return p, nil
}

// schemaOf decodes a JSON schema object (nil when raw is).
func schemaOf(raw json.RawMessage, param string) (map[string]any, error) {
	if raw == nil {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, &InputError{Param: param, Code: protocol.CodeInvalidValue, Message: "not a JSON schema object: " + err.Error()}
	}
	return m, nil
}
