package protocol

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Item types.
const (
	ItemMessage      = "message"
	ItemFunctionCall = "function_call"
	// ItemToolCall is a call of a tool the server ran itself (an agent's
	// own tool). It is the Responses API's item for a tool the server
	// calls, mcp_call (server_label "superstep"), so that SDKs show it as a
	// call the provider made and never run it: an implementer-prefixed type
	// ("superstep:tool_call") would be the OpenResponses way, but the AI
	// SDK's non-streaming parser rejects a response holding an item type
	// it does not know. It carries the call's name, arguments and, once
	// done, its output.
	ItemToolCall = "mcp_call"
	// ToolServerLabel is the server_label of the server's own tool calls.
	ToolServerLabel = "superstep"
)

// Item statuses.
const (
	ItemInProgress = "in_progress"
	ItemCompleted  = "completed"
	ItemIncomplete = "incomplete"
)

// Item is an output item: a message (Role, Content) or a function call
// (CallID, Name, Arguments). MarshalJSON emits only the fields of its type,
// always with id, type and status.
type Item struct {
	ID        string        `json:"id"`
	Type      string        `json:"type"`
	Status    string        `json:"status"`
	Role      string        `json:"role,omitempty"`
	Content   []ContentPart `json:"content,omitempty"`
	CallID    string        `json:"call_id,omitempty"`
	Name      string        `json:"name,omitempty"`
	Arguments string        `json:"arguments,omitempty"`
	// Output is a tool call's output (ItemToolCall), nil until it is done.
	Output *string `json:"output,omitempty"`
}

// MarshalJSON emits the fields of the item's type ("content": [] for an
// empty message, "arguments": "" for a function call being opened).
func (it Item) MarshalJSON() ([]byte, error) {
	return it.appendJSON(nil, nil)
}

// ContentPart is an output_text content part.
type ContentPart struct {
	Type        string            `json:"type"`
	Text        string            `json:"text"`
	Annotations []json.RawMessage `json:"annotations"`
	Logprobs    []json.RawMessage `json:"logprobs"`
}

// MarshalJSON emits annotations and logprobs as [] when empty.
func (c ContentPart) MarshalJSON() ([]byte, error) {
	return c.appendJSON(nil, nil)
}

// OutputText returns an output_text part holding text.
func OutputText(text string) ContentPart {
	return ContentPart{Type: "output_text", Text: text}
}

// MessageID is the deterministic id of the message at outputIndex of the
// response: recovery and replay give the same ids.
func MessageID(responseID string, outputIndex int) string {
	return outputID("msg_", responseID, outputIndex)
}

// ToolCallID is the deterministic id of the tool call item (ItemToolCall)
// at outputIndex of the response.
func ToolCallID(responseID string, outputIndex int) string {
	return outputID("mcp_", responseID, outputIndex)
}

// FunctionCallID is the deterministic id of the function_call item at
// outputIndex of the response.
func FunctionCallID(responseID string, outputIndex int) string {
	return outputID("fc_", responseID, outputIndex)
}

// outputID returns the id of the output item at outputIndex of the
// response, of kind prefix ("msg_", "mcp_", "fc_").
func outputID(prefix, responseID string, outputIndex int) string {
	var a [64]byte
	return string(appendOutputID(a[:0], prefix, responseID, outputIndex))
}

// appendOutputID appends the id of the output item at outputIndex of the
// response, of kind prefix ("msg_", "mcp_", "fc_").
func appendOutputID(dst []byte, prefix, responseID string, outputIndex int) []byte {
	dst = append(dst, prefix...)
	dst = append(dst, idSuffix(responseID)...)
	dst = append(dst, '_')
	return strconv.AppendInt(dst, int64(outputIndex), 10)
}

// ParseOutputItemID reads an output item id made by MessageID,
// FunctionCallID or ToolCallID: the id of the response that holds the item
// and its index in that response's output. ok is false for any other id.
func ParseOutputItemID(id string) (responseID string, outputIndex int, ok bool) {
	var rest string
	for _, p := range []string{"msg_", "fc_", "mcp_"} {
		if rest, ok = strings.CutPrefix(id, p); ok {
			break
		}
	}
	if !ok {
		return "", 0, false
	}
	k := strings.LastIndexByte(rest, '_')
	if k <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(rest[k+1:])
	if err != nil || n < 0 || strconv.Itoa(n) != rest[k+1:] {
		return "", 0, false
	}
	return "resp_" + rest[:k], n, true
}

// idSuffix drops the "resp_" prefix of a response id.
func idSuffix(responseID string) string {
	const p = "resp_"
	if len(responseID) > len(p) && responseID[:len(p)] == p {
		return responseID[len(p):]
	}
	return responseID
}
