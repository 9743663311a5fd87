package responses

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/superstep/superstep/host"
)

// Input item types the server accepts.
const (
	itemMessage            = "message"
	itemFunctionCallOutput = "function_call_output"
)

// parseInput reads input: a string (one user message) or an array of
// items. Absent or null gives no input.
func parseInput(raw json.RawMessage) ([]host.InputItem, error) {
	if isNull(raw) {
		return nil, nil
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return []host.InputItem{{Type: itemMessage, Role: "user", Text: text}}, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, typeError("input", "a string or an array of input items", raw)
	}
	items := make([]host.InputItem, 0, len(elems))
	for i, e := range elems {
		it, err := parseInputItem(e, fmt.Sprintf("input[%d]", i))
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	return items, nil
}

// parseInputItem reads one input item: a message (the type may be left out
// when a role is given) or a function_call_output.
func parseInputItem(raw json.RawMessage, param string) (host.InputItem, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return host.InputItem{}, typeError(param, "an object", raw)
	}
	typ, err := optString(fields["type"], param+".type")
	if err != nil {
		return host.InputItem{}, err
	}
	kind := itemMessage
	if typ != nil {
		kind = *typ
	}
	switch kind {
	case itemMessage:
		return parseMessage(fields, param)
	case itemFunctionCallOutput:
		return parseFunctionCallOutput(fields, param)
	}
	return host.InputItem{}, badRequest(param+".type", codeUnsupportedIn,
		"Invalid value for '%s.type': '%s' is not supported; supported input item types are 'message' and 'function_call_output'.",
		param, truncate(kind, 64))
}

// validRoles are the message roles the Responses API defines.
var validRoles = map[string]bool{"user": true, "assistant": true, "system": true, "developer": true}

func parseMessage(fields map[string]json.RawMessage, param string) (host.InputItem, error) {
	role, err := optString(fields["role"], param+".role")
	if err != nil {
		return host.InputItem{}, err
	}
	if role == nil {
		return host.InputItem{}, badRequest(param+".role", codeMissingParam, "Missing required parameter: '%s.role'.", param)
	}
	if !validRoles[*role] {
		return host.InputItem{}, badRequest(param+".role", codeInvalidValue,
			"Invalid value for '%s.role': '%s'; supported values are 'user', 'assistant', 'system' and 'developer'.",
			param, truncate(*role, 64))
	}
	text, err := parseContent(fields["content"], param+".content")
	if err != nil {
		return host.InputItem{}, err
	}
	return host.InputItem{Type: itemMessage, Role: *role, Text: text}, nil
}

func parseFunctionCallOutput(fields map[string]json.RawMessage, param string) (host.InputItem, error) {
	callID, err := optString(fields["call_id"], param+".call_id")
	if err != nil {
		return host.InputItem{}, err
	}
	if callID == nil || *callID == "" {
		return host.InputItem{}, badRequest(param+".call_id", codeMissingParam, "Missing required parameter: '%s.call_id'.", param)
	}
	raw := fields["output"]
	if isNull(raw) {
		return host.InputItem{}, badRequest(param+".output", codeMissingParam, "Missing required parameter: '%s.output'.", param)
	}
	out, err := parseContent(raw, param+".output")
	if err != nil {
		return host.InputItem{}, err
	}
	return host.InputItem{Type: itemFunctionCallOutput, CallID: *callID, Output: out}, nil
}

// textPartTypes are the content part types whose text the server reads.
var textPartTypes = map[string]bool{"input_text": true, "output_text": true, "text": true}

// parseContent reads a message's content (or a function_call_output's
// output): a string, or an array of text parts joined with newlines.
func parseContent(raw json.RawMessage, param string) (string, error) {
	if isNull(raw) {
		return "", badRequest(param, codeMissingParam, "Missing required parameter: '%s'.", param)
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return text, nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", typeError(param, "a string or an array of content parts", raw)
	}
	texts := make([]string, 0, len(parts))
	for j, part := range parts {
		t, err := parseTextPart(part, fmt.Sprintf("%s[%d]", param, j))
		if err != nil {
			return "", err
		}
		texts = append(texts, t)
	}
	return strings.Join(texts, "\n"), nil
}

func parseTextPart(raw json.RawMessage, param string) (string, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return "", typeError(param, "an object", raw)
	}
	typ, err := optString(fields["type"], param+".type")
	if err != nil {
		return "", err
	}
	if typ == nil || !textPartTypes[*typ] {
		got := "nothing"
		if typ != nil {
			got = "'" + truncate(*typ, 64) + "'"
		}
		return "", badRequest(param+".type", codeUnsupportedIn,
			"Invalid value for '%s.type': got %s; only text content ('input_text', 'output_text') is supported.", param, got)
	}
	text, err := optString(fields["text"], param+".text")
	if err != nil {
		return "", err
	}
	if text == nil {
		return "", badRequest(param+".text", codeMissingParam, "Missing required parameter: '%s.text'.", param)
	}
	return *text, nil
}
