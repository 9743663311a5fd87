package protocol

import (
	"errors"
	"reflect"
	"testing"
)

// roundTrip stores it as a conversation item and reads it back.
func roundTrip(t *testing.T, it InputItem, id string) InputItem {
	t.Helper()
	b, err := ConversationItemJSON(it, id)
	if err != nil {
		t.Fatalf("ConversationItemJSON(%+v): %v", it, err)
	}
	back, err := ReadItems([][]byte{b})
	if err != nil {
		t.Fatalf("ReadItems(%s): %v", b, err)
	}
	return back[0]
}

// readBack is what reading item it back must give: the item itself, but an
// mcp_call's id stands for its call id, and a message's role defaults to
// user.
func readBack(it InputItem, id string) InputItem {
	switch it.Type {
	case InputToolCall:
		it.CallID = id
	case InputMessage:
		if it.Role == "" {
			it.Role = "user"
		}
	case InputReasoning:
		return InputItem{Type: InputReasoning}
	}
	return it
}

func TestConversationItemRoundTrip(t *testing.T) {
	for _, it := range []InputItem{
		{Type: InputMessage, Role: "user", Text: "hi"},
		{Type: InputMessage, Text: "no role"},
		{Type: InputMessage, Role: "system", Text: "be brief"},
		{Type: InputMessage, Role: "assistant", Text: "line 1\nline 2"},
		{Type: InputMessage, Role: "user", Text: "see\nthis", Parts: []Part{{Type: PartText, Text: "see"},
			{Type: PartImage, ImageURL: "data:image/png;base64,AAAA", Detail: "low"}, {Type: PartText, Text: "this"},
			{Type: PartFile, FileData: "data:text/plain;base64,aGk=", Filename: "a.txt"}}},
		{Type: InputFunctionCall, CallID: "call_1", Name: "f", Arguments: `{"a":1}`},
		{Type: InputFunctionCall, CallID: "call_2", Name: "g"},
		{Type: InputFunctionCallOutput, CallID: "call_1", Output: `{"ok":true}`},
		{Type: InputToolCall, Name: "add", Arguments: `{"a":1}`, Output: "2"},
		{Type: InputReasoning},
	} {
		id := ConversationItemPrefix(it.Type) + "x1"
		if got, w := roundTrip(t, it, id), readBack(it, id); !reflect.DeepEqual(got, w) {
			t.Errorf("%+v came back as %+v, want %+v", it, got, w)
		}
	}
	if _, err := ConversationItemJSON(InputItem{Type: InputItemReference, ID: "msg_1"}, "x"); err == nil {
		t.Error("an item_reference became a conversation item")
	}
}

func TestParseConversationParam(t *testing.T) {
	for _, tc := range []struct {
		raw, id, param string
	}{
		{``, "", ""}, {`null`, "", ""}, {`"conv_abc"`, "conv_abc", ""}, {`{"id":"conv_abc"}`, "conv_abc", ""},
		{`"abc"`, "", "conversation"}, {`"conv_"`, "", "conversation"}, {`"conv_a b"`, "", "conversation"},
		{`1`, "", "conversation"}, {`{}`, "", "conversation.id"}, {`{"id":1}`, "", "conversation.id"},
		{`{"Id":"conv_a"}`, "", "conversation.Id"}, {`{"id":"conv_a","id":"conv_b"}`, "", "conversation.id"},
	} {
		id, err := ParseConversationParam([]byte(tc.raw))
		var re *RequestError
		switch {
		case tc.param == "" && (err != nil || id != tc.id):
			t.Errorf("%s: %q, %v; want %q", tc.raw, id, err, tc.id)
		case tc.param != "" && (!errors.As(err, &re) || re.Param != tc.param):
			t.Errorf("%s: %q, %v; want an error naming %s", tc.raw, id, err, tc.param)
		}
	}
	_, err := ParseCreate([]byte(`{"model":"m","input":"x","conversation":"conv_a","previous_response_id":"resp_a"}`), 0)
	if re, ok := errors.AsType[*RequestError](err); !ok || re.Param != "previous_response_id" {
		t.Errorf("conversation with previous_response_id: %v", err)
	}
	req, err := ParseCreate([]byte(`{"model":"m","input":"x","conversation":{"id":"conv_a"}}`), 0)
	if err != nil || req.Conversation != "conv_a" {
		t.Errorf("conversation object: %+v %v", req, err)
	}
}

// FuzzParseConversationRequest: any body is parsed or refused with a
// *RequestError, never anything else; the items of a parsed body are at
// most the limit, and each, stored as a conversation item, reads back as
// itself.
func FuzzParseConversationRequest(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"items":[]}`, `{"metadata":{"a":"b"}}`,
		`{"items":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}`,
		`{"items":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x"}]}]}`,
		`{"items":[{"role":"user","content":[{"type":"input_image","image_url":"data:,"},{"type":"input_text","text":"t"}]}]}`,
		`{"items":[{"type":"mcp_call","id":"m","name":"n","output":"o"},{"type":"reasoning","summary":[]}]}`,
		`{"items":[{"type":"item_reference","id":"msg_1"}]}`, `{"items":{}}`, `[`, `{"items":[1]}`} {
		f.Add([]byte(s), uint8(0))
	}
	kinds := []string{ConversationCreateBody, ConversationUpdateBody, ConversationItemsBody}
	f.Fuzz(func(t *testing.T, body []byte, k uint8) {
		req, err := ParseConversationRequest(body, kinds[int(k)%len(kinds)], 3)
		if err != nil {
			if _, ok := errors.AsType[*RequestError](err); !ok {
				t.Fatalf("%q: %v (%T), want a *RequestError", body, err, err)
			}
			return
		}
		if len(req.Items) > 3 {
			t.Fatalf("%q: %d items over the limit", body, len(req.Items))
		}
		for _, it := range req.Items {
			if it.Type == InputItemReference {
				continue
			}
			if got, w := roundTrip(t, it, "id_1"), readBack(it, "id_1"); !reflect.DeepEqual(got, w) {
				t.Fatalf("%q: %+v came back as %+v, want %+v", body, it, got, w)
			}
		}
	})
}

// BenchmarkReadItems reads a 1,000-item conversation back as input items:
// what every turn of such a conversation pays for its context.
func BenchmarkReadItems(b *testing.B) {
	data := make([][]byte, 1000)
	for i := range data {
		it := InputItem{Type: InputMessage, Role: []string{"user", "assistant"}[i%2],
			Text: "a message of a dozen words or so, as a chat turn often is"}
		var err error
		if data[i], err = ConversationItemJSON(it, "msg_0123456789abcdef0123456789abcdef"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadItems(data); err != nil {
			b.Fatal(err)
		}
	}
}
