package protocol

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The Conversations API's wire model: conversation objects and items. A
// conversation item is kept as the JSON the API shows (an input item with
// an id and status, or a response's output item); it is read back into an
// InputItem by the one reader of input items, so a conversation's history
// reaches a model exactly as the same items replayed in a request would.

// Conversation is the conversation object.
type Conversation struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"` // "conversation"
	CreatedAt int64             `json:"created_at"`
	Metadata  map[string]string `json:"metadata"`
}

// ConversationRef is a Response's "conversation" field: the conversation
// the response is a turn of.
type ConversationRef struct {
	ID string `json:"id"`
}

// ConversationIDMax bounds a conversation id: the host's are "conv_" and 32
// hex digits.
const ConversationIDMax = 128

// ValidConversationID reports whether id can name a conversation: "conv_"
// then letters, digits, '_' or '-'. Anything else names none and must not
// reach a store.
func ValidConversationID(id string) bool {
	return validPrefixedID(id, "conv_", ConversationIDMax)
}

// ValidItemID reports whether id can name a conversation item: letters,
// digits, '_' or '-', at most 128 bytes.
func ValidItemID(id string) bool { return validPrefixedID(id, "", 128) }

func validPrefixedID(id, prefix string, max int) bool {
	if len(id) <= len(prefix) || len(id) > max || !strings.HasPrefix(id, prefix) {
		return false
	}
	for i := len(prefix); i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ParseConversationParam reads the "conversation" parameter of a create
// request: a conversation id, or an object {"id": ...}; "" when absent or
// null.
func ParseConversationParam(raw json.RawMessage) (string, error) {
	const param = "conversation"
	switch JSONKind(raw) {
	case "nothing", "null":
		return "", nil
	case "a string":
		var id string
		if err := json.Unmarshal(raw, &id); err != nil {
			return "", typeError(param, "a string or an object", raw)
		}
		return checkConversationParam(id)
	case "an object":
		fields, err := decodeObject(raw, param, []string{"id"})
		if err != nil {
			return "", err
		}
		id, err := optString(fields["id"], param+".id")
		if err != nil {
			return "", err
		}
		if id == nil {
			return "", requestErr(param+".id", CodeMissingParam, "Missing required parameter: 'conversation.id'.")
		}
		return checkConversationParam(*id)
	}
	return "", typeError(param, "a string or an object", raw)
}

func checkConversationParam(id string) (string, error) {
	if !ValidConversationID(id) {
		return "", requestErr("conversation", CodeInvalidValue,
			"Invalid 'conversation': '%s'. Expected an ID that begins with 'conv'.", truncate(id, 64))
	}
	return id, nil
}

// ParseItems reads an array of conversation items (param names it, e.g.
// "items"): at least one, at most max. Each item is read as an input item
// of a create request is, and named param[i] in errors.
func ParseItems(raw json.RawMessage, param string, max int) ([]InputItem, error) {
	if JSONKind(raw) != "an array" {
		if IsNull(raw) {
			return nil, requestErr(param, CodeMissingParam, "Missing required parameter: '%s'.", param)
		}
		return nil, typeError(param, "an array of items", raw)
	}
	n, err := countElements(raw)
	if err != nil {
		return nil, err
	}
	if max > 0 && n > max {
		return nil, requestErr(param, CodeArrayTooLong,
			"Invalid '%s': array too long. Expected an array with maximum length %d, but got an array with length %d instead.", param, max, n)
	}
	items := make([]InputItem, 0, n)
	err = eachElement(raw, func(i int, val []byte) error {
		it, err := parseInputItem(val, fmt.Sprintf("%s[%d]", param, i))
		items = append(items, it)
		return err
	})
	if err != nil {
		return nil, err
	}
	return items, nil
}

// ReadItems reads stored conversation items (their JSON) back as input
// items, in order, with the one reader of input items.
func ReadItems(data [][]byte) ([]InputItem, error) {
	out := make([]InputItem, 0, len(data))
	for i, d := range data {
		it, err := parseInputItem(d, fmt.Sprintf("items[%d]", i))
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, nil
}

// conversationPart is a content part of a conversation item.
type conversationPart struct {
	Type        string            `json:"type"`
	Text        *string           `json:"text,omitempty"`
	Annotations []json.RawMessage `json:"annotations,omitempty"`
	ImageURL    string            `json:"image_url,omitempty"`
	Detail      string            `json:"detail,omitempty"`
	FileData    string            `json:"file_data,omitempty"`
	FileURL     string            `json:"file_url,omitempty"`
	Filename    string            `json:"filename,omitempty"`
}

type conversationMessage struct {
	ID      string             `json:"id"`
	Type    string             `json:"type"`
	Status  string             `json:"status"`
	Role    string             `json:"role"`
	Content []conversationPart `json:"content"`
}

type conversationCall struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type conversationCallOutput struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Status string `json:"status"`
	CallID string `json:"call_id"`
	Output string `json:"output"`
}

type conversationReasoning struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Summary []any  `json:"summary"`
}

// ConversationItemJSON returns the JSON of input item it as a
// conversation item with id id: the shape the API shows and ReadItems
// reads back. An item_reference has none (resolve it first).
func ConversationItemJSON(it InputItem, id string) ([]byte, error) {
	switch it.Type {
	case InputMessage:
		m := conversationMessage{ID: id, Type: InputMessage, Status: ItemCompleted, Role: it.Role}
		if m.Role == "" {
			m.Role = "user"
		}
		textType := PartText
		if m.Role == "assistant" {
			textType = "output_text"
		}
		if it.Parts == nil {
			text := it.Text
			m.Content = []conversationPart{{Type: textType, Text: &text}}
		}
		for _, p := range it.Parts {
			cp := conversationPart{Type: p.Type, ImageURL: p.ImageURL, Detail: p.Detail, FileData: p.FileData, FileURL: p.FileURL,
				Filename: p.Filename}
			if p.Type == PartText {
				text := p.Text
				cp.Type, cp.Text = textType, &text
			}
			m.Content = append(m.Content, cp)
		}
		if textType == "output_text" {
			for i := range m.Content {
				m.Content[i].Annotations = []json.RawMessage{}
			}
		}
		return json.Marshal(m)
	case InputFunctionCall:
		return json.Marshal(conversationCall{ID: id, Type: it.Type, Status: ItemCompleted, CallID: it.CallID, Name: it.Name,
			Arguments: it.Arguments})
	case InputFunctionCallOutput:
		return json.Marshal(conversationCallOutput{ID: id, Type: it.Type, Status: ItemCompleted, CallID: it.CallID, Output: it.Output})
	case InputToolCall:
		out := it.Output
		return Item{ID: id, Type: ItemToolCall, Status: ItemCompleted, Name: it.Name, Arguments: it.Arguments, Output: &out}.MarshalJSON()
	case InputReasoning:
		return json.Marshal(conversationReasoning{ID: id, Type: it.Type, Summary: []any{}})
	}
	return nil, fmt.Errorf("protocol: a %q item cannot be a conversation item", it.Type)
}

// ConversationItemPrefix is the id prefix of a conversation item of type
// typ made from an input item.
func ConversationItemPrefix(typ string) string {
	switch typ {
	case InputFunctionCall:
		return "fc_"
	case InputFunctionCallOutput:
		return "fco_"
	case InputToolCall:
		return "mcp_"
	case InputReasoning:
		return "rs_"
	}
	return "msg_"
}

// ConversationRequest is the body of POST /v1/conversations (Items and
// Metadata), of POST /v1/conversations/{id} (Metadata) or of POST
// /v1/conversations/{id}/items (Items).
type ConversationRequest struct {
	Items    []InputItem
	Metadata map[string]string
}

// Bodies ParseConversationRequest reads.
const (
	ConversationCreateBody = "create"
	ConversationUpdateBody = "update"
	ConversationItemsBody  = "items"
)

// ParseConversationRequest parses the body of a Conversations API write
// (kind: ConversationCreateBody, ConversationUpdateBody or
// ConversationItemsBody): items (at most maxItems; required to add items)
// and metadata (required to update) read as a create request's input and
// metadata are. Unknown fields are tolerated, as in create requests.
func ParseConversationRequest(body []byte, kind string, maxItems int) (*ConversationRequest, error) {
	if len(strings.TrimSpace(string(body))) == 0 && kind == ConversationCreateBody {
		body = []byte("{}") // every field is optional
	}
	if !json.Valid(body) {
		err := json.Unmarshal(body, &struct{}{})
		return nil, requestErr("", CodeInvalidJSON,
			"We could not parse the JSON body of your request: %s. The body must be a JSON object.", jsonProblem(err))
	}
	if kind := JSONKind(body); kind != "an object" {
		return nil, requestErr("", CodeInvalidJSON, "The request body must be a JSON object, not %s.", kind)
	}
	fields, err := decodeObject(body, "", []string{"items", "metadata"})
	if err != nil {
		return nil, err
	}
	r := &ConversationRequest{}
	if kind != ConversationUpdateBody {
		raw := fields["items"]
		if kind == ConversationItemsBody || !IsNull(raw) {
			if r.Items, err = ParseItems(raw, "items", maxItems); err != nil {
				return nil, err
			}
		}
	}
	if kind != ConversationItemsBody {
		if kind == ConversationUpdateBody && IsNull(fields["metadata"]) {
			return nil, requestErr("metadata", CodeMissingParam, "Missing required parameter: 'metadata'.")
		}
		if r.Metadata, err = parseMetadata(fields["metadata"]); err != nil {
			return nil, err
		}
	}
	return r, nil
}
