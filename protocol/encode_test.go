package protocol

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// The encodings before the wire types, each level of nesting with its own
// MarshalJSON (the reference the wire types must match byte for byte).
type refPart ContentPart

func (c refPart) MarshalJSON() ([]byte, error) {
	type plain ContentPart
	p := plain(c)
	if p.Annotations == nil {
		p.Annotations = []json.RawMessage{}
	}
	if p.Logprobs == nil {
		p.Logprobs = []json.RawMessage{}
	}
	return json.Marshal(p)
}

type refItem Item

func (it refItem) MarshalJSON() ([]byte, error) {
	type message struct {
		ID      string    `json:"id"`
		Type    string    `json:"type"`
		Status  string    `json:"status"`
		Role    string    `json:"role"`
		Content []refPart `json:"content"`
	}
	switch it.Type {
	case ItemMessage:
		c := []refPart{}
		for _, p := range it.Content {
			c = append(c, refPart(p))
		}
		return json.Marshal(message{it.ID, it.Type, it.Status, it.Role, c})
	case ItemFunctionCall:
		return json.Marshal(functionCallJSON{it.ID, it.Type, it.Status, it.CallID, it.Name, it.Arguments})
	}
	return json.Marshal(toolCallJSON{ID: it.ID, Type: it.Type, Status: it.Status, ServerLabel: ToolServerLabel,
		Name: it.Name, Arguments: it.Arguments, Output: it.Output})
}

// TestWireEncoding: items, content parts and the events holding them
// encode as they did when each had its own MarshalJSON: long texts with
// every character encoding/json escapes, empty and missing content,
// annotations, every item type.
func TestWireEncoding(t *testing.T) {
	text := strings.Repeat("a \"b\" <c> & d\n\t\x01 é \u2028 \xff ", 500)
	out := "tool <output>"
	parts := []ContentPart{OutputText(text), OutputText(""), {Type: "output_text", Text: "x",
		Annotations: []json.RawMessage{json.RawMessage(`{"type":"url_citation", "url":"<u>"}`)}, Logprobs: []json.RawMessage{}}}
	items := []Item{
		{ID: "msg_1", Type: ItemMessage, Status: ItemCompleted, Role: "assistant", Content: parts},
		{ID: "msg_2", Type: ItemMessage, Status: ItemInProgress, Role: "assistant"},
		{ID: "msg_3", Type: ItemMessage, Status: ItemCompleted, Role: "assistant", Content: []ContentPart{}},
		{ID: "fc_1", Type: ItemFunctionCall, Status: ItemCompleted, CallID: "call_1", Name: "f", Arguments: `{"a":"<b>"}`},
		{ID: "mcp_1", Type: ItemToolCall, Status: ItemCompleted, CallID: "c", Name: "t", Arguments: "{}", Output: &out},
		{ID: "mcp_2", Type: ItemToolCall, Status: ItemInProgress, Name: "t"},
	}
	same := func(what string, got []byte, err error, v any) {
		t.Helper()
		want, werr := json.Marshal(v)
		if err != nil || werr != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %.200s (%v), want %.200s (%v)", what, got, err, want, werr)
		}
	}
	for i, p := range parts {
		got, err := json.Marshal(p)
		same("part", got, err, refPart(p))
		ev := ContentPartEvent{EventContentPartDone, 7, "msg_1", 2, i, p}
		w, err := wireEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		got, err = json.Marshal(w)
		same("content_part event", got, err, struct {
			Type           string  `json:"type"`
			SequenceNumber int64   `json:"sequence_number"`
			ItemID         string  `json:"item_id"`
			OutputIndex    int     `json:"output_index"`
			ContentIndex   int     `json:"content_index"`
			Part           refPart `json:"part"`
		}{ev.Type, ev.SequenceNumber, ev.ItemID, ev.OutputIndex, ev.ContentIndex, refPart(p)})
	}
	for i, it := range items {
		got, err := json.Marshal(it)
		same("item", got, err, refItem(it))
		ev := OutputItemEvent{EventOutputItemDone, 9, i, it}
		w, err := wireEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		got, err = json.Marshal(w)
		same("output_item event", got, err, struct {
			Type           string  `json:"type"`
			SequenceNumber int64   `json:"sequence_number"`
			OutputIndex    int     `json:"output_index"`
			Item           refItem `json:"item"`
		}{ev.Type, ev.SequenceNumber, ev.OutputIndex, refItem(it)})
	}
	// The item in a Response, and a lifecycle event carrying it.
	r := NewResponse(&NewResponseParams{ID: "resp_1", Model: "m", Status: StatusCompleted})
	r.Output = items
	got, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		enc, _ := json.Marshal(refItem(it))
		if !bytes.Contains(got, enc) {
			t.Fatalf("the response does not hold item %s as encoded before", it.ID)
		}
	}
	if _, err := wireEvent(OutputItemEvent{Item: Item{Type: "unknown"}}); err == nil {
		t.Fatal("an item of an unknown type encoded")
	}
}
