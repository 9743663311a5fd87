package protocol

import (
	"encoding/json"
	"fmt"
)

// The encoded forms of items, content parts and the events that hold them:
// types without a MarshalJSON of their own. encoding/json encodes a value
// with a MarshalJSON into a buffer of its own and then copies it into its
// parent's, so a long reply's text was encoded and copied once per level
// of nesting (four in a response.completed: event, Response, Item,
// ContentPart), each level allocating about twice the text. Encoding the
// wire types writes the text once, into the one buffer. The bytes are the
// same: the fields, their order and tags are those the MarshalJSON methods
// encode (encode_test.go compares them).

// partWire is a ContentPart as ContentPart.MarshalJSON encodes it.
type partWire struct {
	Type        string            `json:"type"`
	Text        string            `json:"text"`
	Annotations []json.RawMessage `json:"annotations"`
	Logprobs    []json.RawMessage `json:"logprobs"`
}

func (c ContentPart) wire() partWire {
	w := partWire(c)
	if w.Annotations == nil {
		w.Annotations = []json.RawMessage{}
	}
	if w.Logprobs == nil {
		w.Logprobs = []json.RawMessage{}
	}
	return w
}

// messageWire is a message item as Item.MarshalJSON encodes it.
type messageWire struct {
	ID      string     `json:"id"`
	Type    string     `json:"type"`
	Status  string     `json:"status"`
	Role    string     `json:"role"`
	Content []partWire `json:"content"`
}

// wire returns the value Item.MarshalJSON encodes.
func (it Item) wire() (any, error) {
	switch it.Type {
	case ItemMessage:
		parts := make([]partWire, len(it.Content))
		for i, c := range it.Content {
			parts[i] = c.wire()
		}
		return messageWire{it.ID, it.Type, it.Status, it.Role, parts}, nil
	case ItemFunctionCall:
		return functionCallJSON{it.ID, it.Type, it.Status, it.CallID, it.Name, it.Arguments}, nil
	case ItemToolCall:
		// The model's call id stays in the host (live items pair by it); an
		// mcp_call has none on the wire.
		return toolCallJSON{ID: it.ID, Type: it.Type, Status: it.Status, ServerLabel: ToolServerLabel,
			Name: it.Name, Arguments: it.Arguments, Output: it.Output}, nil
	}
	return nil, fmt.Errorf("protocol: unknown item type %q", it.Type)
}

// outputItemWire is an OutputItemEvent as encoded.
type outputItemWire struct {
	Type           string `json:"type"`
	SequenceNumber int64  `json:"sequence_number"`
	OutputIndex    int    `json:"output_index"`
	Item           any    `json:"item"`
}

// contentPartEventWire is a ContentPartEvent as encoded.
type contentPartEventWire struct {
	Type           string   `json:"type"`
	SequenceNumber int64    `json:"sequence_number"`
	ItemID         string   `json:"item_id"`
	OutputIndex    int      `json:"output_index"`
	ContentIndex   int      `json:"content_index"`
	Part           partWire `json:"part"`
}

// wireEvent returns the value to encode for event ev: its wire form when
// it holds an item or a content part, ev itself otherwise.
func wireEvent(ev any) (any, error) {
	switch e := ev.(type) {
	case OutputItemEvent:
		item, err := e.Item.wire()
		if err != nil {
			return nil, err
		}
		return outputItemWire{e.Type, e.SequenceNumber, e.OutputIndex, item}, nil
	case ContentPartEvent:
		return contentPartEventWire{e.Type, e.SequenceNumber, e.ItemID, e.OutputIndex, e.ContentIndex, e.Part.wire()}, nil
	}
	return ev, nil
}
