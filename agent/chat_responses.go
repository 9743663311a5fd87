package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// responsesParams builds a Responses API request (stateless: the whole
// conversation is sent each time, store false).
func responsesParams(req *modelRequest) responses.ResponseNewParams {
	p := responses.ResponseNewParams{
		Model:    req.model,
		Metadata: shared.Metadata(req.metadata),
		Store:    openai.Bool(false),
	}
	if req.maxTokens > 0 {
		p.MaxOutputTokens = openai.Int(int64(req.maxTokens))
	}
	if req.instructions != "" {
		p.Instructions = openai.String(req.instructions)
	}
	var items responses.ResponseInputParam
	for _, it := range req.conv {
		items = append(items, responsesItems(it)...)
	}
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: items}
	for _, t := range req.tools {
		tool := responses.ToolParamOfFunction(t.Name, t.Parameters, false)
		tool.OfFunction.Description = openai.String(t.Description)
		if t.Strict != nil {
			tool.OfFunction.Strict = openai.Bool(*t.Strict)
		}
		p.Tools = append(p.Tools, tool)
	}
	switch c := req.toolChoice; c.Mode {
	case ToolChoiceNone, ToolChoiceAuto, ToolChoiceRequired:
		p.ToolChoice.OfToolChoiceMode = openai.Opt(responses.ToolChoiceOptions(c.Mode))
	case ToolChoiceFunction:
		p.ToolChoice.OfFunctionTool = &responses.ToolChoiceFunctionParam{Name: c.Name}
	}
	if req.parallel != nil {
		p.ParallelToolCalls = openai.Bool(*req.parallel)
	}
	if req.temperature != nil {
		p.Temperature = openai.Float(*req.temperature)
	}
	if req.topP != nil {
		p.TopP = openai.Float(*req.topP)
	}
	if req.reasoning != "" {
		p.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffort(req.reasoning)}
	}
	// Empty strings are not sent (omitzero, or an unset Opt).
	p.Text.Verbosity = responses.ResponseTextConfigVerbosity(req.verbosity)
	p.ServiceTier = responses.ResponseNewParamsServiceTier(req.serviceTier)
	p.PromptCacheRetention = responses.ResponseNewParamsPromptCacheRetention(req.cacheRetention)
	p.User, p.SafetyIdentifier, p.PromptCacheKey = optString(req.user), optString(req.safetyID), optString(req.cacheKey)
	if f := req.format; f != nil {
		switch f.Type {
		case TextFormatJSONObject:
			p.Text.Format.OfJSONObject = &shared.ResponseFormatJSONObjectParam{}
		case TextFormatJSONSchema:
			js := &responses.ResponseFormatTextJSONSchemaConfigParam{Name: f.Name, Schema: f.Schema}
			if f.Description != "" {
				js.Description = openai.String(f.Description)
			}
			if f.Strict != nil {
				js.Strict = openai.Bool(*f.Strict)
			}
			p.Text.Format.OfJSONSchema = js
		}
	}
	return p
}

// responsesItems converts one conversation item.
func responsesItems(it convItem) []responses.ResponseInputItemUnionParam {
	switch it.role {
	case RoleTool:
		return []responses.ResponseInputItemUnionParam{{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
			CallID: openai.String(it.callID),
			Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(it.text)},
		}}}
	case RoleAssistant:
		var out []responses.ResponseInputItemUnionParam
		if it.text != "" {
			out = append(out, responses.ResponseInputItemParamOfMessage(it.text, responses.EasyInputMessageRoleAssistant))
		}
		for _, c := range it.calls {
			out = append(out, responses.ResponseInputItemParamOfFunctionCall(c.Args, c.ID, c.Name))
		}
		return out
	}
	if it.parts != nil && it.role == RoleUser {
		return []responses.ResponseInputItemUnionParam{responses.ResponseInputItemParamOfMessage(responsesParts(it.parts), responses.EasyInputMessageRoleUser)}
	}
	role := responses.EasyInputMessageRoleUser
	switch it.role {
	case RoleSystem:
		role = responses.EasyInputMessageRoleSystem
	case RoleDeveloper:
		role = responses.EasyInputMessageRoleDeveloper
	}
	return []responses.ResponseInputItemUnionParam{responses.ResponseInputItemParamOfMessage(it.text, role)}
}

// callResponses makes one streaming Responses API call.
func (a *ChatAgent) callResponses(ctx context.Context, req *modelRequest, emit func(string) error) (*modelReply, error) {
	stream := a.client.Responses.NewStreaming(ctx, responsesParams(req))
	defer stream.Close()
	var final *responses.Response
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			if err := emit(ev.Delta); err != nil {
				return nil, err
			}
		case "response.completed", "response.incomplete":
			r := ev.Response
			final = &r
		case "response.failed":
			return nil, fmt.Errorf("responses: response failed: %s: %s", ev.Response.Error.Code, ev.Response.Error.Message)
		case "error":
			return nil, fmt.Errorf("responses: error event: %s: %s", ev.Code, ev.Message)
		}
	}
	if err := stream.Err(); err != nil {
		return nil, serverError("responses", err)
	}
	if final == nil {
		return nil, fmt.Errorf("responses: stream ended without a terminal event")
	}
	return replyOf(final), nil
}

// replyOf extracts text, calls, usage and reason from a final Response.
func replyOf(r *responses.Response) *modelReply {
	rep := &modelReply{
		text:   r.OutputText(),
		reason: normalizeReason(string(r.IncompleteDetails.Reason)),
		usage: Usage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens, TotalTokens: r.Usage.TotalTokens,
			CachedInputTokens: r.Usage.InputTokensDetails.CachedTokens, ReasoningTokens: r.Usage.OutputTokensDetails.ReasoningTokens},
	}
	for _, it := range r.Output {
		if it.Type == "function_call" {
			fc := it.AsFunctionCall()
			rep.calls = append(rep.calls, toolCall{ID: fc.CallID, Name: fc.Name, Args: fc.Arguments})
		}
	}
	return rep
}

// responsesParts converts a user message's parts to Responses API content.
func responsesParts(parts []Part) responses.ResponseInputMessageContentListParam {
	out := make(responses.ResponseInputMessageContentListParam, 0, len(parts))
	for _, p := range parts {
		switch p.Kind {
		case PartImage:
			detail := responses.ResponseInputImageDetailAuto
			if p.Detail != "" {
				detail = responses.ResponseInputImageDetail(p.Detail)
			}
			img := responses.ResponseInputContentParamOfInputImage(detail)
			img.OfInputImage.ImageURL = openai.String(p.URL)
			out = append(out, img)
		case PartFile:
			f := responses.ResponseInputFileParam{}
			if strings.HasPrefix(p.URL, "data:") {
				f.FileData = openai.String(p.URL)
			} else {
				f.FileURL = openai.String(p.URL)
			}
			if p.Filename != "" {
				f.Filename = openai.String(p.Filename)
			}
			out = append(out, responses.ResponseInputContentUnionParam{OfInputFile: &f})
		default:
			out = append(out, responses.ResponseInputContentParamOfInputText(p.Text))
		}
	}
	return out
}
