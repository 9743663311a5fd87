package localmodel

import "net/http"

// respStream streams the reply as Responses API events, one token per delay.
func (h *handler) respStream(r *http.Request, s *sse, rs *respState) {
	if rs.emit(s, "response.created", map[string]any{"response": rs.response("in_progress", []any{})}) != nil ||
		rs.emit(s, "response.in_progress", map[string]any{"response": rs.response("in_progress", []any{})}) != nil ||
		rs.emit(s, "response.output_item.added", map[string]any{"output_index": 0, "item": rs.item("in_progress", "")}) != nil {
		return
	}
	itemID := rs.itemID()
	with := func(kv ...any) map[string]any {
		m := map[string]any{"item_id": itemID, "output_index": 0}
		if rs.rep.toolName == "" {
			m["content_index"] = 0
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	if rs.rep.toolName == "" && rs.emit(s, "response.content_part.added", with("part", textPart(""))) != nil {
		return
	}
	delta := "response.output_text.delta"
	if rs.rep.toolName != "" {
		delta = "response.function_call_arguments.delta"
	}
	delay := h.opts.tokenDelay(rs.req)
	for _, tok := range rs.rep.tokens {
		if pause(r.Context(), delay) != nil {
			return
		}
		ev := with("delta", tok)
		if rs.rep.toolName == "" {
			ev["logprobs"] = []any{}
		}
		if rs.emit(s, delta, ev) != nil {
			return
		}
	}
	h.respFinish(s, rs, with)
}

// respFinish sends the done events and the terminal event.
func (h *handler) respFinish(s *sse, rs *respState, with func(kv ...any) map[string]any) {
	text := rs.rep.text()
	var err error
	if rs.rep.toolName != "" {
		err = rs.emit(s, "response.function_call_arguments.done", with("name", rs.rep.toolName, "arguments", text))
	} else {
		err = rs.emit(s, "response.output_text.done", with("text", text, "logprobs", []any{}))
		if err == nil {
			err = rs.emit(s, "response.content_part.done", with("part", textPart(text)))
		}
	}
	item := rs.item(rs.itemStatus(), text)
	if err != nil || rs.emit(s, "response.output_item.done", map[string]any{"output_index": 0, "item": item}) != nil {
		return
	}
	status := rs.finalStatus()
	if rs.emit(s, "response."+status, map[string]any{"response": rs.response(status, []any{item})}) != nil {
		return
	}
	_ = s.raw("data: [DONE]\n\n")
}
