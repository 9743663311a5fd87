package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"
)

// chatParams builds a Chat Completions request.
func chatParams(req *modelRequest) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{
		Model:         req.model,
		Metadata:      shared.Metadata(req.metadata),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	if req.maxTokens > 0 {
		p.MaxCompletionTokens = openai.Int(int64(req.maxTokens))
	}
	if req.instructions != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(req.instructions))
	}
	for _, it := range req.conv {
		p.Messages = append(p.Messages, chatMessage(it))
	}
	for _, t := range req.tools {
		def := shared.FunctionDefinitionParam{
			Name: t.Name, Description: openai.String(t.Description), Parameters: shared.FunctionParameters(t.Parameters),
		}
		if t.Strict != nil {
			def.Strict = openai.Bool(*t.Strict)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(def))
	}
	switch c := req.toolChoice; c.Mode {
	case ToolChoiceNone, ToolChoiceAuto, ToolChoiceRequired:
		p.ToolChoice.OfAuto = openai.String(c.Mode)
	case ToolChoiceFunction:
		p.ToolChoice.OfFunctionToolChoice = &openai.ChatCompletionNamedToolChoiceParam{
			Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: c.Name}}
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
	if req.presence != nil {
		p.PresencePenalty = openai.Float(*req.presence)
	}
	if req.frequency != nil {
		p.FrequencyPenalty = openai.Float(*req.frequency)
	}
	// Empty strings are not sent (omitzero, or an unset Opt).
	p.ReasoningEffort = shared.ReasoningEffort(req.reasoning)
	p.Verbosity = openai.ChatCompletionNewParamsVerbosity(req.verbosity)
	p.ServiceTier = openai.ChatCompletionNewParamsServiceTier(req.serviceTier)
	p.PromptCacheRetention = openai.ChatCompletionNewParamsPromptCacheRetention(req.cacheRetention)
	p.User, p.SafetyIdentifier, p.PromptCacheKey = optString(req.user), optString(req.safetyID), optString(req.cacheKey)
	if f := req.format; f != nil {
		switch f.Type {
		case TextFormatJSONObject:
			p.ResponseFormat.OfJSONObject = &shared.ResponseFormatJSONObjectParam{}
		case TextFormatJSONSchema:
			js := shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: f.Name, Schema: f.Schema}
			if f.Description != "" {
				js.Description = openai.String(f.Description)
			}
			if f.Strict != nil {
				js.Strict = openai.Bool(*f.Strict)
			}
			p.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{JSONSchema: js}
		}
	}
	return p
}

// optString is s as an optional field of a request: unset when empty.
func optString(s string) param.Opt[string] {
	if s == "" {
		return param.Opt[string]{}
	}
	return openai.String(s)
}

// chatMessage converts one conversation item.
func chatMessage(it convItem) openai.ChatCompletionMessageParamUnion {
	switch it.role {
	case RoleSystem:
		return openai.SystemMessage(it.text)
	case RoleDeveloper:
		return openai.DeveloperMessage(it.text)
	case RoleTool:
		return openai.ToolMessage(it.text, it.callID)
	case RoleAssistant:
		if len(it.calls) == 0 {
			return openai.AssistantMessage(it.text)
		}
		m := openai.ChatCompletionAssistantMessageParam{}
		if it.text != "" {
			m.Content.OfString = openai.String(it.text)
		}
		for _, c := range it.calls {
			m.ToolCalls = append(m.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID:       c.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: c.Args},
				},
			})
		}
		return openai.ChatCompletionMessageParamUnion{OfAssistant: &m}
	}
	if it.parts != nil {
		return openai.UserMessage(chatParts(it.parts))
	}
	return openai.UserMessage(it.text)
}

// chatParts converts a user message's parts to Chat Completions content
// parts.
func chatParts(parts []Part) []openai.ChatCompletionContentPartUnionParam {
	out := make([]openai.ChatCompletionContentPartUnionParam, 0, len(parts))
	for _, p := range parts {
		switch p.Kind {
		case PartImage:
			img := openai.ChatCompletionContentPartImageImageURLParam{URL: p.URL}
			if p.Detail != "" {
				img.Detail = p.Detail
			}
			out = append(out, openai.ImageContentPart(img))
		case PartFile:
			f := openai.ChatCompletionContentPartFileFileParam{FileData: openai.String(p.URL)}
			if p.Filename != "" {
				f.Filename = openai.String(p.Filename)
			}
			out = append(out, openai.FileContentPart(f))
		default:
			out = append(out, openai.TextContentPart(p.Text))
		}
	}
	return out
}

// callChat makes one streaming Chat Completions call.
func (a *ChatAgent) callChat(ctx context.Context, req *modelRequest, emit func(string) error) (*modelReply, error) {
	stream := a.client.Chat.Completions.NewStreaming(ctx, chatParams(req))
	defer stream.Close()
	var (
		text   strings.Builder
		calls  []*toolCall // by index
		rep    modelReply
		finish string
	)
	for stream.Next() {
		chunk := stream.Current()
		if chunk.Usage.TotalTokens > 0 || chunk.Usage.PromptTokens > 0 {
			u := chunk.Usage
			rep.usage = Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
				CachedInputTokens: u.PromptTokensDetails.CachedTokens, ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens}
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			if d := ch.Delta.Content; d != "" {
				text.WriteString(d)
				if err := emit(d); err != nil {
					return nil, err
				}
			}
			for _, tc := range ch.Delta.ToolCalls {
				for int(tc.Index) >= len(calls) {
					calls = append(calls, &toolCall{})
				}
				c := calls[tc.Index]
				c.ID, c.Name = orDefault(tc.ID, c.ID), orDefault(tc.Function.Name, c.Name)
				c.Args += tc.Function.Arguments
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, serverError("chat completions", err)
	}
	if finish == "" {
		return nil, fmt.Errorf("chat completions: stream ended without a finish reason")
	}
	rep.text, rep.reason = text.String(), normalizeReason(finish)
	for _, c := range calls {
		if c.Name != "" {
			rep.calls = append(rep.calls, *c)
		}
	}
	return &rep, nil
}
