package localmodel

import (
	"encoding/json"
	"net/http"
)

// respRequest is the part of a Responses API request the script reads.
type respRequest struct {
	Model           string            `json:"model"`
	Input           json.RawMessage   `json:"input"`
	Instructions    *string           `json:"instructions"`
	Tools           []respTool        `json:"tools"`
	ToolChoice      json.RawMessage   `json:"tool_choice"`
	Stream          bool              `json:"stream"`
	MaxOutputTokens int               `json:"max_output_tokens"`
	Metadata        map[string]string `json:"metadata"`
}

type respTool struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
}

type respItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// normalise converts a Responses API request for the script.
func (b *respRequest) normalise() (*request, error) {
	req := &request{model: b.Model, metadata: b.Metadata, stream: b.Stream, maxTokens: b.MaxOutputTokens}
	if b.Instructions != nil {
		req.turns = append(req.turns, turn{role: "system", text: *b.Instructions})
	}
	var s string
	if json.Unmarshal(b.Input, &s) == nil {
		req.turns = append(req.turns, turn{role: "user", text: s})
	} else {
		var items []respItem
		_ = json.Unmarshal(b.Input, &items)
		names := map[string]string{}
		for _, it := range items {
			switch it.Type {
			case "function_call":
				names[it.CallID] = it.Name
				req.turns = append(req.turns, turn{role: "assistant", callID: it.CallID, toolName: it.Name, args: it.Arguments})
			case "function_call_output":
				req.turns = append(req.turns, turn{role: "tool", callID: it.CallID, toolName: names[it.CallID], text: contentText(it.Output)})
			case "", "message":
				req.turns = append(req.turns, turn{role: it.Role, text: contentText(it.Content)})
			}
		}
	}
	for _, t := range b.Tools {
		if (t.Type == "function" || t.Type == "") && t.Name != "" {
			req.tools = append(req.tools, tool{name: t.Name, params: t.Parameters})
		}
	}
	var err error
	req.choice, err = parseToolChoice(b.ToolChoice, req.tools)
	return req, err
}

// responses serves POST /v1/responses.
func (h *handler) responses(w http.ResponseWriter, r *http.Request) {
	var body respRequest
	if !decode(w, r, &body) {
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
	rs := &respState{id: h.nextID("resp_local"), req: req, rep: rep, toolChoice: body.ToolChoice}
	if !body.Stream {
		writeJSON(w, http.StatusOK, rs.response(rs.finalStatus(), []any{rs.item(rs.itemStatus(), rep.text())}))
		return
	}
	h.respStream(r, newSSE(w), rs)
}

// respState builds the Response objects and events of one reply.
type respState struct {
	id         string
	req        *request
	rep        *reply
	toolChoice json.RawMessage // the request's, echoed in the Response
	seq        int
}

func (rs *respState) itemID() string {
	if rs.rep.toolName != "" {
		return "fc_" + rs.id
	}
	return "msg_" + rs.id
}

// finalStatus is the response's terminal status.
func (rs *respState) finalStatus() string {
	if rs.rep.finish == finishLength || rs.rep.finish == finishContentFilter {
		return "incomplete"
	}
	return "completed"
}

func (rs *respState) itemStatus() string {
	if rs.finalStatus() == "incomplete" {
		return "incomplete"
	}
	return "completed"
}

// textPart is an output_text content part.
func textPart(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

// item is the reply's output item with the given status and text.
func (rs *respState) item(status, text string) map[string]any {
	if rs.rep.toolName != "" {
		return map[string]any{"type": "function_call", "id": rs.itemID(), "call_id": rs.rep.callID,
			"name": rs.rep.toolName, "arguments": text, "status": status}
	}
	content := []any{}
	if status != "in_progress" {
		content = append(content, textPart(text))
	}
	return map[string]any{"type": "message", "id": rs.itemID(), "role": "assistant", "status": status, "content": content}
}

// response is the Response object with status and output.
func (rs *respState) response(status string, output []any) map[string]any {
	md := rs.req.metadata
	if md == nil {
		md = map[string]string{}
	}
	r := map[string]any{
		"id": rs.id, "object": "response", "created_at": 0, "status": status, "model": rs.req.model,
		"output": output, "error": nil, "incomplete_details": nil, "instructions": nil, "metadata": md,
		"tools": []any{}, "tool_choice": "auto", "parallel_tool_calls": true, "temperature": 1, "top_p": 1,
		"usage": nil,
	}
	if rs.req.choice.mode != "auto" {
		r["tool_choice"] = rs.toolChoice
	}
	switch status {
	case "incomplete":
		reason := "max_output_tokens"
		if rs.rep.finish == finishContentFilter {
			reason = "content_filter"
		}
		r["incomplete_details"] = map[string]any{"reason": reason}
		fallthrough
	case "completed":
		u := rs.rep.usage()
		r["usage"] = map[string]any{
			"input_tokens": u.prompt, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": u.completion, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens": u.prompt + u.completion,
		}
	}
	return r
}

// emit sends one event with its sequence number.
func (rs *respState) emit(s *sse, typ string, fields map[string]any) error {
	fields["type"], fields["sequence_number"] = typ, rs.seq
	rs.seq++
	return s.send(typ, fields)
}
