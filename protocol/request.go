package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/superstep/superstep/internal/jsonstr"
)

// This file and input.go are the one reader of create requests: the HTTP
// parser (ParseCreate), recovery (ReadInput) and input_items (ScanInput)
// all read a request through them, so they cannot disagree about what it
// says. The reader is strict where a lenient one would be ambiguous: a key
// that appears twice in an object, or that differs from a key the reader
// knows only in case ("Input" next to or instead of "input"), is refused,
// because encoding/json's struct decoding matches keys case-insensitively
// and lets the last one win, while a map lookup matches exactly.

// RequestError is a request the reader refuses, with what an OpenAI-format
// 400 says: the parameter at fault, an error code and a message.
type RequestError struct {
	Param   string
	Code    string
	Message string
}

func (e *RequestError) Error() string {
	if e.Param == "" {
		return "protocol: " + e.Message
	}
	return fmt.Sprintf("protocol: %s (param %s)", e.Message, e.Param)
}

func requestErr(param, code, format string, args ...any) *RequestError {
	return &RequestError{Param: param, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error codes of RequestError.
const (
	CodeInvalidJSON      = "invalid_json"
	CodeInvalidType      = "invalid_type"
	CodeInvalidValue     = "invalid_value"
	CodeMissingParam     = "missing_required_parameter"
	CodeUnsupportedValue = "unsupported_value"
	CodeUnknownParam     = "unknown_parameter"
	CodeDuplicateParam   = "duplicate_parameter"
	CodeArrayTooLong     = "array_above_max_length"
)

// Limits of the metadata field, as OpenAI documents them.
const (
	MetadataMaxKeys     = 16
	MetadataMaxKeyLen   = 64
	MetadataMaxValueLen = 512
)

// requestKeys are the fields of a create request the Responses API defines
// (the ones superstep reads and the ones it echoes or tolerates). A key
// equal to one of them but for case is refused; other unknown keys are
// tolerated, as SDKs add fields often.
var requestKeys = []string{
	"model", "input", "instructions", "stream", "stream_options", "background", "store",
	"previous_response_id", "conversation", "metadata", "tools", "tool_choice", "parallel_tool_calls",
	"max_output_tokens", "max_tool_calls", "temperature", "top_p", "top_logprobs", "presence_penalty",
	"frequency_penalty", "text", "reasoning", "truncation", "include", "service_tier", "user",
	"safety_identifier", "prompt_cache_key", "prompt_cache_retention", "prompt", "context_management",
	"moderation",
}

// CreateRequest is what superstep reads of a create request.
type CreateRequest struct {
	Model              string
	Input              []InputItem
	Instructions       *string
	Metadata           map[string]string
	Stream             bool
	Background         bool
	Store              bool
	PreviousResponseID string
	// Conversation is the conversation the response is a turn of ("" for
	// none): its items are the turn's context, and the turn's items are
	// appended to it. It cannot go with PreviousResponseID.
	Conversation string

	// body is the body ParseCreate read (InputOf).
	body []byte
}

// InputOf reports whether request and input are the body ParseCreate read
// r from and the Input it returned: the same bytes and the same items,
// not equal copies. ReadInput(request) then returns input (it reads the
// input with the code ParseCreate read it with, and refuses nothing
// ParseCreate accepts), so a caller holding both need not read the
// request again to know what recovery will read from it. A caller that
// changes request or input in place after ParseCreate breaks this.
func (r *CreateRequest) InputOf(request []byte, input []InputItem) bool {
	return r != nil && len(request) > 0 && len(request) == len(r.body) && &request[0] == &r.body[0] &&
		len(input) == len(r.Input) && (len(input) == 0 || &input[0] == &r.Input[0])
}

// ParseCreate parses the body of a create request (POST /v1/responses).
// Unknown fields are tolerated; a known field of the wrong type, a
// duplicate key or a case variant of a known key is a *RequestError
// naming the field, and so are model parameters out of range (see
// ReadModelParams). maxInputItems > 0 caps the number of input items.
func ParseCreate(body []byte, maxInputItems int) (*CreateRequest, error) {
	fields, err := decodeRequest(body)
	if err != nil {
		return nil, err
	}
	p := &CreateRequest{Store: true}
	if p.Model, err = stringField(fields, "model"); err != nil {
		return nil, err
	}
	if p.Model == "" {
		return nil, requestErr("model", CodeMissingParam, "Missing required parameter: 'model'.")
	}
	if err := parseFlags(fields, p); err != nil {
		return nil, err
	}
	if p.PreviousResponseID, err = stringField(fields, "previous_response_id"); err != nil {
		return nil, err
	}
	if p.Conversation, err = ParseConversationParam(fields["conversation"]); err != nil {
		return nil, err
	}
	if p.Conversation != "" && p.PreviousResponseID != "" {
		return nil, requestErr("previous_response_id", CodeInvalidValue,
			"Previous response cannot be used for this conversation: 'previous_response_id' and 'conversation' cannot be used together.")
	}
	if p.Metadata, err = parseMetadata(fields["metadata"]); err != nil {
		return nil, err
	}
	if p.Input, err = parseInput(fields["input"], maxInputItems); err != nil {
		return nil, err
	}
	mp, err := readModelParams(fields)
	if err != nil {
		return nil, err
	}
	if err := checkEchoed(fields); err != nil {
		return nil, err
	}
	p.Instructions = mp.Instructions
	p.body = body
	return p, nil
}

// noLogprobs is why a request for log probabilities is refused.
const noLogprobs = "Log probabilities are not supported: this server returns none. Leave top_logprobs at 0 and message.output_text.logprobs out of include."

// checkEchoed refuses, as the API does, a field the Response echoes (and
// no model reads; readModelParams checks those) that has the wrong type
// or is out of range: accepted,
// it would be echoed as its default, so the client would be told a value
// it did not send. Values whose set grows (service_tier, reasoning's
// effort, include's names) are checked for their type only.
func checkEchoed(fields map[string]json.RawMessage) error {
	if v, err := optInt(fields["top_logprobs"], "top_logprobs", 0); err != nil {
		return err
	} else if v != nil && *v > 20 {
		return requestErr("top_logprobs", CodeInvalidValue,
			"Invalid 'top_logprobs': integer above maximum value. Expected a value <= 20, but got %d instead.", *v)
	} else if v != nil && *v > 0 {
		return requestErr("top_logprobs", CodeUnsupportedValue, noLogprobs)
	}
	if raw := fields["prompt"]; !IsNull(raw) {
		return requestErr("prompt", CodeUnsupportedValue,
			"Prompt templates are not supported: this server stores no prompts. Send the prompt's instructions and input in the request instead.")
	}
	for _, name := range []string{"stream_options"} {
		if raw := fields[name]; !IsNull(raw) && JSONKind(raw) != "an object" {
			return typeError(name, "an object", raw)
		}
	}
	if raw := fields["include"]; !IsNull(raw) {
		var names []json.RawMessage
		if JSONKind(raw) != "an array" || json.Unmarshal(raw, &names) != nil {
			return typeError("include", "an array", raw)
		}
		for i, n := range names {
			if JSONKind(n) != "a string" {
				return typeError(fmt.Sprintf("include[%d]", i), "a string", n)
			}
			if s, _ := optString(n, ""); s != nil && *s == "message.output_text.logprobs" {
				return requestErr(fmt.Sprintf("include[%d]", i), CodeUnsupportedValue, noLogprobs)
			}
		}
	}
	return nil
}

// decodeRequest decodes body as one JSON object into its raw fields,
// refusing duplicate keys and case variants of the request's keys.
func decodeRequest(body []byte) (map[string]json.RawMessage, error) {
	if !json.Valid(body) {
		// Unmarshal checks validity before decoding anything: it only
		// says what is wrong.
		err := json.Unmarshal(body, &struct{}{})
		return nil, requestErr("", CodeInvalidJSON,
			"We could not parse the JSON body of your request: %s. The body must be a JSON object.", jsonProblem(err))
	}
	switch kind := JSONKind(body); kind {
	case "an object":
	case "null":
		return nil, requestErr("", CodeInvalidJSON, "The request body must be a JSON object, not null.")
	default:
		return nil, requestErr("", CodeInvalidJSON,
			"We could not parse the JSON body of your request: expected an object, got %s. The body must be a JSON object.", kind)
	}
	return decodeObject(body, "", requestKeys)
}

// decodeBody is decodeRequest for a body whose fields are known: a case
// variant of one of them is refused like a duplicate key.
func decodeBody(body []byte, known []string) (map[string]json.RawMessage, error) {
	if _, err := decodeRequest(body); err != nil {
		return nil, err
	}
	return decodeObject(body, "", known)
}

// decodeObject decodes raw, a valid JSON object, into its raw fields
// (sub-slices of raw). A key that appears twice, or that equals one of
// known but for case, is a *RequestError naming it (param is the object's
// own name, "" at the top).
func decodeObject(raw []byte, param string, known []string) (map[string]json.RawMessage, error) {
	fields := map[string]json.RawMessage{}
	err := eachMember(raw, func(key string, val []byte) error {
		_, dup := fields[key]
		if err := checkKey(key, dup, known, param); err != nil {
			return err
		}
		fields[key] = val
		return nil
	})
	if err != nil {
		return nil, err
	}
	return fields, nil
}

// checkKey refuses a duplicate key and a case variant of a known key.
func checkKey(key string, dup bool, known []string, param string) error {
	name := joinParam(param, truncate(key, 64))
	if dup {
		return requestErr(name, CodeDuplicateParam,
			"Duplicate parameter: '%s' appears more than once in the same object; each key may appear once.", name)
	}
	if len(known) == 0 || slices.Contains(known, key) {
		return nil
	}
	for _, k := range known {
		// EqualFold is the matching encoding/json uses for struct fields.
		if strings.EqualFold(key, k) {
			return requestErr(name, CodeUnknownParam,
				"Unknown parameter: '%s'. Parameter names are case-sensitive: did you mean '%s'?", name, joinParam(param, k))
		}
	}
	return nil
}

func joinParam(param, key string) string {
	if param == "" {
		return key
	}
	return param + "." + key
}

// jsonProblem describes a decode error without Go type names.
func jsonProblem(err error) string {
	if err == nil {
		return "invalid JSON"
	}
	if msg, ok := unmarshalTypeProblem(err); ok {
		return msg
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// parseFlags reads stream, background and store, and refuses the
// combinations the API forbids.
func parseFlags(fields map[string]json.RawMessage, p *CreateRequest) error {
	var err error
	if p.Stream, err = boolField(fields, "stream", false); err != nil {
		return err
	}
	if p.Background, err = boolField(fields, "background", false); err != nil {
		return err
	}
	if p.Store, err = boolField(fields, "store", true); err != nil {
		return err
	}
	if p.Background && !p.Store {
		return requestErr("background", CodeInvalidValue,
			"Background mode requires store=true: a background response must be stored to be retrieved.")
	}
	return nil
}

// IsNull reports whether raw is absent or JSON null.
func IsNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// JSONKind names the JSON type of raw for error messages ("a string",
// "an object", ...).
func JSONKind(raw []byte) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func typeError(param, want string, raw []byte) *RequestError {
	return typeErrorKind(param, want, JSONKind(raw))
}

func typeErrorKind(param, want, got string) *RequestError {
	return requestErr(param, CodeInvalidType, "Invalid type for '%s': expected %s, but got %s instead.", param, want, got)
}

// boolField reads an optional boolean; absent or null gives def.
func boolField(fields map[string]json.RawMessage, name string, def bool) (bool, error) {
	raw := fields[name]
	if IsNull(raw) {
		return def, nil
	}
	var v bool
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, typeError(name, "a boolean", raw)
	}
	return v, nil
}

// stringField reads an optional string; absent or null gives "".
func stringField(fields map[string]json.RawMessage, name string) (string, error) {
	s, err := optString(fields[name], name)
	if s == nil || err != nil {
		return "", err
	}
	return *s, nil
}

// optString reads an optional string; absent or null gives nil.
func optString(raw json.RawMessage, param string) (*string, error) {
	if IsNull(raw) {
		return nil, nil
	}
	v, ok := jsonstr.Unquote(raw) // one allocation, json.Unmarshal's two
	if !ok {
		return nil, typeError(param, "a string", raw)
	}
	return &v, nil
}

// parseMetadata reads metadata: at most 16 string values, keys at most 64
// and values at most 512 characters, no key twice.
func parseMetadata(raw json.RawMessage) (map[string]string, error) {
	if IsNull(raw) {
		return nil, nil
	}
	if JSONKind(raw) != "an object" {
		return nil, typeError("metadata", "an object", raw)
	}
	fields, err := decodeObject(raw, "metadata", nil)
	if err != nil {
		return nil, err
	}
	if len(fields) > MetadataMaxKeys {
		return nil, requestErr("metadata", CodeInvalidValue,
			"Invalid 'metadata': too many properties. Expected at most %d properties, but got %d instead.", MetadataMaxKeys, len(fields))
	}
	md := make(map[string]string, len(fields))
	for k, v := range fields {
		param := "metadata." + k
		if utf8.RuneCountInString(k) > MetadataMaxKeyLen {
			return nil, requestErr(param, CodeInvalidValue,
				"Invalid 'metadata': key '%s' is longer than %d characters.", truncate(k, 80), MetadataMaxKeyLen)
		}
		s, err := optString(v, param)
		if err != nil {
			return nil, err
		}
		if s == nil {
			return nil, typeError(param, "a string", v)
		}
		if utf8.RuneCountInString(*s) > MetadataMaxValueLen {
			return nil, requestErr(param, CodeInvalidValue,
				"Invalid 'metadata': the value of key '%s' is longer than %d characters.", k, MetadataMaxValueLen)
		}
		md[k] = *s
	}
	return md, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

// RequestParams are the fields of a create request BuildRequest writes.
type RequestParams struct {
	Model              string
	Input              []InputItem
	Metadata           map[string]string
	Background         bool
	Stream             bool
	Store              bool
	Instructions       *string
	PreviousResponseID string
}

// BuildRequest writes the create request of p in the wire format the HTTP
// API accepts, for a caller (a library user of the host) that has items
// but no body: ReadInput reads it back as p.Input, with a message's empty
// role as "user". An item of an unknown type is written as it is, so that
// the reader refuses it as the HTTP API would.
func BuildRequest(p *RequestParams) []byte {
	type message struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	type output struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}
	input := make([]any, 0, len(p.Input))
	for _, it := range p.Input {
		switch it.Type {
		case InputFunctionCallOutput:
			input = append(input, output{Type: it.Type, CallID: it.CallID, Output: it.Output})
		case InputFunctionCall:
			input = append(input, struct {
				Type      string `json:"type"`
				CallID    string `json:"call_id"`
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			}{it.Type, it.CallID, it.Name, it.Arguments})
		case InputReasoning:
			input = append(input, map[string]any{"type": InputReasoning, "summary": []any{}})
		case InputToolCall:
			input = append(input, map[string]any{"type": InputToolCall, "id": it.CallID, "server_label": ToolServerLabel,
				"name": it.Name, "arguments": it.Arguments, "output": it.Output})
		case InputItemReference:
			input = append(input, map[string]any{"type": InputItemReference, "id": it.ID})
		case InputMessage, "":
			role := it.Role
			if role == "" {
				role = "user"
			}
			input = append(input, message{Type: InputMessage, Role: role, Content: it.Text})
		default:
			input = append(input, it)
		}
	}
	req := map[string]any{"model": p.Model, "input": input, "metadata": p.Metadata,
		"background": p.Background, "stream": p.Stream, "store": p.Store, "instructions": p.Instructions}
	if p.PreviousResponseID != "" {
		req["previous_response_id"] = p.PreviousResponseID
	}
	data, _ := json.Marshal(req) // strings, bools and a string map always encode
	return data
}

// errFound stops a walk of members once the one looked for is read.
var errFound = errors.New("protocol: found")

// RequestStreamed reports whether a stored create request (the body
// ParseCreate accepted: one "stream" key at most, no case variant) asked
// for a stream. It reads the top-level keys without decoding the values
// around them, so it costs a scan of the bytes, not a decode of a request
// that may hold megabytes of input; anything but a JSON object whose
// "stream" is true reads as false.
func RequestStreamed(request []byte) bool {
	streamed := false
	_ = eachMember(request, func(key string, val []byte) error {
		if key == "stream" {
			streamed = string(val) == "true"
			return errFound
		}
		return nil
	})
	return streamed
}
