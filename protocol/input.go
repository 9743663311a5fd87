package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/superstep/superstep/internal/jsonstr"
)

// Input item types a create request may hold. A client that keeps the
// conversation itself (stateless replay) sends earlier output items back:
// assistant messages, function_call items and reasoning items.
const (
	InputMessage            = "message"
	InputFunctionCallOutput = "function_call_output"
	InputFunctionCall       = "function_call"
	InputReasoning          = "reasoning"
	// InputToolCall is a server-run tool call an earlier response made
	// (ItemToolCall, mcp_call), replayed with its output.
	InputToolCall = ItemToolCall
	// InputItemReference names an output item of a stored response by its
	// id (ID), in place of the item itself: the AI SDK sends earlier
	// output items so when store is true. The host resolves it, at create,
	// to the item it names.
	InputItemReference = "item_reference"
)

// InputItem is one input item of a create request, normalised: a message
// (Role, Text), a function_call_output (CallID, Output), a function_call
// an earlier response made (CallID, Name, Arguments), a server-run tool
// call an earlier response made (CallID, Name, Arguments, Output), a
// reasoning item (kept only as a place in the conversation: its content is
// the model's, and no hosted model reads it back), or a reference to an
// output item of a stored response (ID), which the host resolves to one of
// the others before anything reads the input.
type InputItem struct {
	Type      string `json:"type"`                // one of the Input* item types
	ID        string `json:"id,omitempty"`        // item_reference: the referenced output item's id
	Role      string `json:"role,omitempty"`      // message: "user", "system", "developer", "assistant"
	Text      string `json:"text,omitempty"`      // message text
	CallID    string `json:"call_id,omitempty"`   // function_call_output, function_call
	Output    string `json:"output,omitempty"`    // function_call_output (JSON text or plain string)
	Name      string `json:"name,omitempty"`      // function_call
	Arguments string `json:"arguments,omitempty"` // function_call (JSON text)
	// Parts are a message's content parts in order, when it has any that
	// is not text (an image, a file); Text still holds its text parts
	// joined. Nil for a text-only message.
	Parts []Part `json:"parts,omitempty"`
}

// Content part types of an input message.
const (
	PartText  = "input_text"
	PartImage = "input_image"
	PartFile  = "input_file"
)

// Part is one content part of an input message: text, an image (ImageURL:
// an http(s) URL or a data: URL; Detail "low", "high" or "auto"), or a file
// (FileData: a data: URL, or FileURL; Filename). The server keeps no
// files, so a part naming a file_id is refused.
type Part struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
	Detail   string `json:"detail,omitempty"`
	FileData string `json:"file_data,omitempty"`
	FileURL  string `json:"file_url,omitempty"`
	Filename string `json:"filename,omitempty"`
}

// itemKeys are the fields of the input items the API defines; partKeys
// those of their content parts. A case variant of one is refused.
var (
	itemKeys = []string{"type", "id", "status", "role", "content", "call_id", "output", "name", "arguments",
		"summary", "encrypted_content", "server_label", "error", "approval_request_id"}
	partKeys = []string{"type", "text", "annotations", "logprobs", "image_url", "file_id", "file_url",
		"file_data", "filename", "detail"}
)

// ReadInput returns the input items of a stored create request, read by
// the same code as ParseCreate read them when the request was accepted.
// A request it cannot read is an error (a *RequestError when the request
// breaks a rule), never a guess.
func ReadInput(request []byte) ([]InputItem, error) {
	var items []InputItem
	if _, err := ScanInput(request, nil, func(_ int, it InputItem) error {
		items = append(items, it)
		return nil
	}); err != nil {
		return nil, err
	}
	return items, nil
}

// ScanInput walks a stored create request and returns its number of input
// items, n. Once n is known, before any visit, it calls plan(n) for the
// predicate of the item indexes to parse (a nil plan: every item; a nil
// predicate: none), parses those and passes them to visit in order. The
// others are skipped without being decoded or copied, so a caller that
// wants a few items of a large request allocates for those items only.
// The request's keys are checked as ParseCreate checks them. A nil visit
// only counts.
func ScanInput(request []byte, plan func(n int) func(i int) bool, visit func(i int, it InputItem) error) (int, error) {
	if !json.Valid(request) {
		return 0, errors.New("protocol: the request is not valid JSON")
	}
	if kind := JSONKind(request); kind != "an object" {
		return 0, fmt.Errorf("protocol: the request is %s, not an object", kind)
	}
	var (
		input []byte
		seen  = map[string]bool{}
	)
	err := eachMember(request, func(key string, val []byte) error {
		if err := checkKey(key, seen[key], requestKeys, ""); err != nil {
			return err
		}
		seen[key] = true
		if key == "input" {
			input = val
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var n int
	switch JSONKind(input) {
	case "nothing", "null":
	case "a string":
		n = 1
	case "an array":
		if n, err = countElements(input); err != nil {
			return 0, err
		}
	default:
		return scanInput(input, nil, visit) // the type error ParseCreate gives
	}
	var want func(int) bool
	if plan != nil {
		want = plan(n)
	}
	if visit == nil || plan != nil && want == nil {
		return n, nil
	}
	return scanInput(input, want, visit)
}

func countElements(raw []byte) (int, error) {
	n := 0
	err := eachElement(raw, func(i int, _ []byte) error { n = i + 1; return nil })
	return n, err
}

// parseInput reads the value of "input" of a request being created: all
// its items, at most max of them when max > 0.
func parseInput(raw []byte, max int) ([]InputItem, error) {
	if max > 0 && JSONKind(raw) == "an array" {
		n, err := countElements(raw)
		if err != nil {
			return nil, err
		}
		if n > max {
			return nil, requestErr("input", CodeArrayTooLong,
				"Invalid 'input': array too long. Expected an array with maximum length %d, but got an array with length %d instead.", max, n)
		}
	}
	var items []InputItem
	if _, err := scanInput(raw, nil, func(_ int, it InputItem) error {
		items = append(items, it)
		return nil
	}); err != nil {
		return nil, err
	}
	return items, nil
}

// scanInput reads raw, the value of "input" (valid JSON): absent or null
// (no items), a string (one user message) or an array of items, and
// returns the number of items. It parses the items want accepts (all when
// want is nil) and passes them to visit.
func scanInput(raw []byte, want func(int) bool, visit func(int, InputItem) error) (int, error) {
	switch JSONKind(raw) {
	case "nothing", "null":
		return 0, nil
	case "a string":
		if want == nil || want(0) {
			// One allocation for the text (json.Unmarshal makes two).
			text, ok := jsonstr.Unquote(raw)
			if !ok {
				return 0, fmt.Errorf("protocol: read input: not a JSON string")
			}
			if err := visit(0, InputItem{Type: InputMessage, Role: "user", Text: text}); err != nil {
				return 0, err
			}
		}
		return 1, nil
	case "an array":
	default:
		return 0, typeError("input", "a string or an array of input items", raw)
	}
	n := 0
	err := eachElement(raw, func(i int, val []byte) error {
		n = i + 1
		if want != nil && !want(i) {
			return nil
		}
		it, err := parseInputItem(val, fmt.Sprintf("input[%d]", i))
		if err != nil {
			return err
		}
		return visit(i, it)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// parseInputItem reads one input item: a message (the type may be left out
// when a role is given), a function_call_output, a function_call, a
// reasoning item, an mcp_call or an item_reference (its id required).
func parseInputItem(raw []byte, param string) (InputItem, error) {
	if JSONKind(raw) != "an object" {
		return InputItem{}, typeError(param, "an object", raw)
	}
	fields, err := decodeObject(raw, param, itemKeys)
	if err != nil {
		return InputItem{}, err
	}
	typ, err := optString(fields["type"], param+".type")
	if err != nil {
		return InputItem{}, err
	}
	kind := InputMessage
	if typ != nil {
		kind = *typ
	}
	switch kind {
	case InputMessage:
		return parseMessage(fields, param)
	case InputFunctionCallOutput:
		return parseFunctionCallOutput(fields, param)
	case InputFunctionCall:
		return parseFunctionCall(fields, param)
	case InputReasoning:
		return InputItem{Type: InputReasoning}, nil
	case InputToolCall:
		return parseToolCall(fields, param)
	case InputItemReference:
		id, err := optString(fields["id"], param+".id")
		if err != nil {
			return InputItem{}, err
		}
		if id == nil || *id == "" {
			return InputItem{}, requestErr(param+".id", CodeMissingParam, "Missing required parameter: '%s.id'.", param)
		}
		return InputItem{Type: InputItemReference, ID: *id}, nil
	}
	return InputItem{}, requestErr(param+".type", CodeUnsupportedValue,
		"Invalid value for '%s.type': '%s' is not supported; supported input item types are 'message', 'function_call', 'function_call_output', 'reasoning', 'mcp_call' and 'item_reference'.",
		param, truncate(kind, 64))
}

// parseToolCall reads a server-run tool call an earlier response made (an
// mcp_call item) replayed by a client: its id stands for the call id, to
// pair the call with its output.
func parseToolCall(fields map[string]json.RawMessage, param string) (InputItem, error) {
	it := InputItem{Type: InputToolCall}
	for _, f := range []struct {
		key      string
		dst      *string
		required bool
	}{{"id", &it.CallID, true}, {"name", &it.Name, true}, {"arguments", &it.Arguments, false}, {"output", &it.Output, false}} {
		v, err := optString(fields[f.key], param+"."+f.key)
		if err != nil {
			return InputItem{}, err
		}
		if f.required && (v == nil || *v == "") {
			return InputItem{}, requestErr(param+"."+f.key, CodeMissingParam, "Missing required parameter: '%s.%s'.", param, f.key)
		}
		if v != nil {
			*f.dst = *v
		}
	}
	return it, nil
}

// parseFunctionCall reads a function_call item an earlier response made,
// sent back by a client that replays the conversation.
func parseFunctionCall(fields map[string]json.RawMessage, param string) (InputItem, error) {
	it := InputItem{Type: InputFunctionCall}
	for _, f := range []struct {
		key string
		dst *string
	}{{"call_id", &it.CallID}, {"name", &it.Name}, {"arguments", &it.Arguments}} {
		v, err := optString(fields[f.key], param+"."+f.key)
		if err != nil {
			return InputItem{}, err
		}
		if v == nil || (*v == "" && f.key != "arguments") {
			return InputItem{}, requestErr(param+"."+f.key, CodeMissingParam, "Missing required parameter: '%s.%s'.", param, f.key)
		}
		*f.dst = *v
	}
	return it, nil
}

// validRoles are the message roles the Responses API defines.
var validRoles = map[string]bool{"user": true, "assistant": true, "system": true, "developer": true}

func parseMessage(fields map[string]json.RawMessage, param string) (InputItem, error) {
	role, err := optString(fields["role"], param+".role")
	if err != nil {
		return InputItem{}, err
	}
	if role == nil {
		return InputItem{}, requestErr(param+".role", CodeMissingParam, "Missing required parameter: '%s.role'.", param)
	}
	if !validRoles[*role] {
		return InputItem{}, requestErr(param+".role", CodeInvalidValue,
			"Invalid value for '%s.role': '%s'; supported values are 'user', 'assistant', 'system' and 'developer'.",
			param, truncate(*role, 64))
	}
	text, parts, err := parseContent(fields["content"], param+".content")
	if err != nil {
		return InputItem{}, err
	}
	if parts != nil && *role != "user" {
		return InputItem{}, requestErr(param+".content", CodeInvalidValue,
			"Invalid value for '%s.content': images and files are input of 'user' messages only.", param)
	}
	return InputItem{Type: InputMessage, Role: *role, Text: text, Parts: parts}, nil
}

func parseFunctionCallOutput(fields map[string]json.RawMessage, param string) (InputItem, error) {
	callID, err := optString(fields["call_id"], param+".call_id")
	if err != nil {
		return InputItem{}, err
	}
	if callID == nil || *callID == "" {
		return InputItem{}, requestErr(param+".call_id", CodeMissingParam, "Missing required parameter: '%s.call_id'.", param)
	}
	raw := fields["output"]
	if IsNull(raw) {
		return InputItem{}, requestErr(param+".output", CodeMissingParam, "Missing required parameter: '%s.output'.", param)
	}
	out, parts, err := parseContent(raw, param+".output")
	if err != nil {
		return InputItem{}, err
	}
	if parts != nil {
		return InputItem{}, requestErr(param+".output", CodeUnsupportedValue,
			"Invalid value for '%s.output': only text is supported in a function_call_output.", param)
	}
	return InputItem{Type: InputFunctionCallOutput, CallID: *callID, Output: out}, nil
}

// textPartTypes are the content part types whose text the server reads.
var textPartTypes = map[string]bool{"input_text": true, "output_text": true, "text": true}

// parseContent reads a message's content (or a function_call_output's
// output): a string, or an array of content parts, whose text parts are
// joined with newlines. parts is nil unless a part is not text; then it
// holds every part in order.
func parseContent(raw json.RawMessage, param string) (text string, parts []Part, err error) {
	if IsNull(raw) {
		return "", nil, requestErr(param, CodeMissingParam, "Missing required parameter: '%s'.", param)
	}
	switch JSONKind(raw) {
	case "a string":
		if err := json.Unmarshal(raw, &text); err != nil {
			return "", nil, fmt.Errorf("protocol: read %s: %w", param, err)
		}
		return text, nil, nil
	case "an array":
	default:
		return "", nil, typeError(param, "a string or an array of content parts", raw)
	}
	var (
		texts []string
		all   []Part
		other bool
	)
	err = eachElement(raw, func(j int, part []byte) error {
		p, err := parsePart(part, fmt.Sprintf("%s[%d]", param, j))
		if err != nil {
			return err
		}
		if p.Type == PartText {
			texts = append(texts, p.Text)
		} else {
			other = true
		}
		all = append(all, p)
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	if !other {
		all = nil
	}
	return strings.Join(texts, "\n"), all, nil
}

// parsePart reads one content part: a text part (input_text, output_text,
// text), an input_image or an input_file.
func parsePart(raw json.RawMessage, param string) (Part, error) {
	if JSONKind(raw) != "an object" {
		return Part{}, typeError(param, "an object", raw)
	}
	fields, err := decodeObject(raw, param, partKeys)
	if err != nil {
		return Part{}, err
	}
	typ, err := optString(fields["type"], param+".type")
	if err != nil {
		return Part{}, err
	}
	if typ != nil && (*typ == PartImage || *typ == PartFile) {
		return parseMediaPart(fields, *typ, param)
	}
	text, err := parseTextPart(raw, param)
	return Part{Type: PartText, Text: text}, err
}

// parseMediaPart reads an input_image or input_file part.
func parseMediaPart(fields map[string]json.RawMessage, typ, param string) (Part, error) {
	p := Part{Type: typ}
	for _, f := range []struct {
		key string
		dst *string
	}{{"image_url", &p.ImageURL}, {"detail", &p.Detail}, {"file_data", &p.FileData}, {"file_url", &p.FileURL},
		{"filename", &p.Filename}} {
		v, err := optString(fields[f.key], param+"."+f.key)
		if err != nil {
			return Part{}, err
		}
		if v != nil {
			*f.dst = *v
		}
	}
	if id, err := optString(fields["file_id"], param+".file_id"); err != nil {
		return Part{}, err
	} else if id != nil {
		return Part{}, requestErr(param+".file_id", CodeUnsupportedValue,
			"Invalid value for '%s.file_id': this server keeps no files; send the content inline (%s) or by URL.",
			param, map[string]string{PartImage: "image_url with a data: URL", PartFile: "file_data"}[typ])
	}
	switch {
	case typ == PartImage && p.ImageURL == "":
		return Part{}, requestErr(param+".image_url", CodeMissingParam, "Missing required parameter: '%s.image_url'.", param)
	case typ == PartFile && p.FileData == "" && p.FileURL == "":
		return Part{}, requestErr(param+".file_data", CodeMissingParam,
			"Missing required parameter: '%s.file_data' (or '%s.file_url').", param, param)
	case p.Detail != "" && p.Detail != "low" && p.Detail != "high" && p.Detail != "auto":
		return Part{}, requestErr(param+".detail", CodeInvalidValue,
			"Invalid value for '%s.detail': '%s'; supported values are 'low', 'high' and 'auto'.", param, truncate(p.Detail, 64))
	}
	return p, nil
}

func parseTextPart(raw json.RawMessage, param string) (string, error) {
	if JSONKind(raw) != "an object" {
		return "", typeError(param, "an object", raw)
	}
	fields, err := decodeObject(raw, param, partKeys)
	if err != nil {
		return "", err
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
		return "", requestErr(param+".type", CodeUnsupportedValue,
			"Invalid value for '%s.type': got %s; supported content part types are 'input_text', 'output_text', 'input_image' and 'input_file'.", param, got)
	}
	text, err := optString(fields["text"], param+".text")
	if err != nil {
		return "", err
	}
	if text == nil {
		return "", requestErr(param+".text", CodeMissingParam, "Missing required parameter: '%s.text'.", param)
	}
	return *text, nil
}
