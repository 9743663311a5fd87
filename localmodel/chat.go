package localmodel

import (
	"encoding/json"
	"net/http"
	"strings"
)

// chatRequest is the part of a Chat Completions request the script reads.
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools               []chatTool        `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	MaxTokens           int               `json:"max_tokens"`
	MaxCompletionTokens int               `json:"max_completion_tokens"`
	Metadata            map[string]string `json:"metadata"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	ToolCalls  []chatToolCall  `json:"tool_calls,omitempty"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type chatToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// contentText returns the text of a message content: a string, or an
// array of parts with "text" fields. An image or file part reads as
// "[image]" or "[file NAME]", so that a reply shows the model got it.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
		File struct {
			Filename string `json:"filename"`
		} `json:"file"`
		Filename string `json:"filename"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "image_url", "input_image":
			b.WriteString("[image]")
		case "file", "input_file":
			b.WriteString("[file " + p.File.Filename + p.Filename + "]")
		default:
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// normalise converts a Chat Completions request for the script.
func (c *chatRequest) normalise() (*request, error) {
	req := &request{model: c.Model, metadata: c.Metadata, stream: c.Stream, maxTokens: c.MaxCompletionTokens}
	if req.maxTokens == 0 {
		req.maxTokens = c.MaxTokens
	}
	names := map[string]string{} // call id -> tool name
	for _, m := range c.Messages {
		t := turn{role: m.Role, text: contentText(m.Content), callID: m.ToolCallID}
		if m.Role == "tool" {
			t.toolName = names[m.ToolCallID]
		}
		req.turns = append(req.turns, t)
		for _, tc := range m.ToolCalls {
			names[tc.ID] = tc.Function.Name
			req.turns = append(req.turns, turn{role: "assistant", callID: tc.ID, toolName: tc.Function.Name, args: tc.Function.Arguments})
		}
	}
	for _, t := range c.Tools {
		if (t.Type == "function" || t.Type == "") && t.Function.Name != "" {
			req.tools = append(req.tools, tool{name: t.Function.Name, params: t.Function.Parameters})
		}
	}
	var err error
	req.choice, err = parseToolChoice(c.ToolChoice, req.tools)
	return req, err
}

// chat serves POST /v1/chat/completions.
func (h *handler) chat(w http.ResponseWriter, r *http.Request) {
	var body chatRequest
	if !decode(w, r, &body) {
		return
	}
	if len(body.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "localmodel: messages must not be empty")
		return
	}
	req, err := body.normalise()
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	rep := h.opts.plan(req)
	if limit := h.opts.contextLimit(req); limit > 0 && rep.promptTokens > limit {
		writeOverflow(w, limit, rep.promptTokens)
		return
	}
	id := h.nextID("chatcmpl-local")
	if !body.Stream {
		writeJSON(w, http.StatusOK, chatCompletion(id, req.model, rep))
		return
	}
	h.chatStream(r, newSSE(w), id, req, rep, body.StreamOptions != nil && body.StreamOptions.IncludeUsage)
}

// chatCompletion is the non-streaming reply.
func chatCompletion(id, model string, rep *reply) map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil}
	if rep.toolName != "" {
		tc := chatToolCall{ID: rep.callID, Type: "function"}
		tc.Function.Name, tc.Function.Arguments = rep.toolName, rep.text()
		msg["tool_calls"] = []chatToolCall{tc}
	} else {
		msg["content"] = rep.text()
	}
	return map[string]any{
		"id": id, "object": "chat.completion", "created": 0, "model": model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": rep.finish}},
		"usage":   chatUsage(rep.usage()),
	}
}

func chatUsage(u usage) map[string]any {
	return map[string]any{"prompt_tokens": u.prompt, "completion_tokens": u.completion, "total_tokens": u.prompt + u.completion}
}

// chatChunk is one streamed chunk with one choice.
func chatChunk(id, model string, delta map[string]any, finish any) map[string]any {
	return map[string]any{
		"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	}
}

// chatStream streams rep as chunks, one token per delay.
func (h *handler) chatStream(r *http.Request, s *sse, id string, req *request, rep *reply, withUsage bool) {
	delay := h.opts.tokenDelay(req)
	if s.send("", chatChunk(id, req.model, map[string]any{"role": "assistant", "content": ""}, nil)) != nil {
		return
	}
	for i, tok := range rep.tokens {
		if pause(r.Context(), delay) != nil {
			return
		}
		delta := map[string]any{"content": tok}
		if rep.toolName != "" {
			tc := chatToolCall{Index: new(int)}
			if i == 0 {
				tc.ID, tc.Type, tc.Function.Name = rep.callID, "function", rep.toolName
			}
			tc.Function.Arguments = tok
			delta = map[string]any{"tool_calls": []chatToolCall{tc}}
		}
		if s.send("", chatChunk(id, req.model, delta, nil)) != nil {
			return
		}
	}
	if s.send("", chatChunk(id, req.model, map[string]any{}, rep.finish)) != nil {
		return
	}
	if withUsage {
		u := map[string]any{"id": id, "object": "chat.completion.chunk", "created": 0, "model": req.model,
			"choices": []any{}, "usage": chatUsage(rep.usage())}
		if s.send("", u) != nil {
			return
		}
	}
	_ = s.raw("data: [DONE]\n\n")
}
