package protocol

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestNewResponse_EveryField(t *testing.T) {
	r := NewResponse(&NewResponseParams{ID: "resp_abc", Model: "demo.echo", Status: StatusQueued,
		CreatedAt: time.Unix(100, 0), Background: true, Store: true,
		Request: []byte(`{"temperature":0.5,"tools":[{"type":"function","name":"f"}],"user":"u"}`)})
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(`id object created_at completed_at status incomplete_details model
		previous_response_id instructions output error tools tool_choice truncation parallel_tool_calls text
		top_p presence_penalty frequency_penalty top_logprobs temperature reasoning user usage
		max_output_tokens max_tool_calls store background service_tier metadata safety_identifier
		prompt_cache_key`) {
		if _, ok := m[f]; !ok {
			t.Errorf("missing %s in %s", f, data)
		}
	}
	want := map[string]string{"object": `"response"`, "output": `[]`, "metadata": `{}`, "usage": `null`,
		"error": `null`, "completed_at": `null`, "temperature": `0.5`, "top_p": `1`, "user": `"u"`,
		"tool_choice": `"auto"`, "tools": `[{"description":null,"name":"f","parameters":null,"strict":true,"type":"function"}]`, "background": `true`,
		"text": `{"format":{"type":"text"}}`, "instructions": `null`}
	for k, v := range want {
		if string(m[k]) != v {
			t.Errorf("%s = %s, want %s", k, m[k], v)
		}
	}
}

func TestSeq_MessageAndFunctionCall(t *testing.T) {
	s := &Seq{Next: 2}
	msg, err := s.Message(MessageID("resp_x", 0), 0, "hi")
	if err != nil {
		t.Fatal(err)
	}
	fc, err := s.FunctionCall(FunctionCallID("resp_x", 1), 1, "call_1", "approve", `{"q":1}`)
	if err != nil {
		t.Fatal(err)
	}
	if msg.ID != "msg_x_0" || fc.ID != "fc_x_1" || msg.Status != ItemCompleted || fc.Arguments != `{"q":1}` {
		t.Fatalf("items %+v %+v", msg, fc)
	}
	wantTypes := []string{EventOutputItemAdded, EventContentPartAdded, EventOutputTextDelta, EventOutputTextDone,
		EventContentPartDone, EventOutputItemDone, EventOutputItemAdded, EventFunctionCallArgDelta,
		EventFunctionCallArgDone, EventOutputItemDone}
	if len(s.Frames) != len(wantTypes) || s.Next != 12 {
		t.Fatalf("%d frames, next %d", len(s.Frames), s.Next)
	}
	for i, f := range s.Frames {
		var ev struct {
			Type string `json:"type"`
			Seq  int64  `json:"sequence_number"`
		}
		if err := json.Unmarshal(f.Payload, &ev); err != nil {
			t.Fatal(err)
		}
		if f.Type != wantTypes[i] || ev.Type != f.Type || ev.Seq != int64(i+2) || f.Seq != ev.Seq {
			t.Fatalf("frame %d: %s %s", i, f.Type, f.Payload)
		}
	}
	golden := map[int]string{
		0: `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_x_0","type":"message","status":"in_progress","role":"assistant","content":[]}}`,
		1: `{"type":"response.content_part.added","sequence_number":3,"item_id":"msg_x_0","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[],"logprobs":[]}}`,
		2: `{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_x_0","output_index":0,"content_index":0,"delta":"hi","logprobs":[]}`,
		3: `{"type":"response.output_text.done","sequence_number":5,"item_id":"msg_x_0","output_index":0,"content_index":0,"text":"hi","logprobs":[]}`,
		6: `{"type":"response.output_item.added","sequence_number":8,"output_index":1,"item":{"id":"fc_x_1","type":"function_call","status":"in_progress","call_id":"call_1","name":"approve","arguments":""}}`,
		8: `{"type":"response.function_call_arguments.done","sequence_number":10,"item_id":"fc_x_1","output_index":1,"name":"approve","arguments":"{\"q\":1}"}`,
	}
	for i, want := range golden {
		if got := string(s.Frames[i].Payload); got != want {
			t.Errorf("frame %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func TestResponse_RoundTrip(t *testing.T) {
	r := NewResponse(&NewResponseParams{ID: "resp_1", Model: "m", Status: StatusInProgress, CreatedAt: time.Unix(5, 0)})
	s := &Seq{}
	item, _ := s.Message(MessageID(r.ID, 0), 0, "x")
	r.Output = append(r.Output, item)
	r.Finish(StatusFailed, time.Unix(9, 0), &Error{Code: "server_error", Message: "boom"})
	a, _ := json.Marshal(r)
	var back Response
	if err := json.Unmarshal(a, &back); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(back)
	if string(a) != string(b) {
		t.Fatalf("round trip:\n%s\n%s", a, b)
	}
	if back.CompletedAt != nil || back.Error.Message != "boom" || back.Usage == nil {
		t.Fatalf("failed response %s", a)
	}
}

func TestTerminalTypes(t *testing.T) {
	if !IsTerminal(EventResponseCancelled) || IsTerminal(EventResponseInProgress) || TerminalEventType(StatusCancelled) != EventResponseCancelled {
		t.Fatal("terminal types")
	}
}

// A message cut short ends with status incomplete in its output_item.done
// and in the item returned; the text events are those of any message.
func TestSeq_MessageIncomplete(t *testing.T) {
	s := &Seq{Next: 2}
	item, err := s.MessageWithStatus(MessageID("resp_x", 0), 0, "hel", ItemIncomplete)
	if err != nil {
		t.Fatal(err)
	}
	if item.Status != ItemIncomplete || len(s.Frames) != 6 {
		t.Fatalf("item %+v, %d frames", item, len(s.Frames))
	}
	want := `{"type":"response.output_item.done","sequence_number":7,"output_index":0,"item":{"id":"msg_x_0","type":"message","status":"incomplete","role":"assistant","content":[{"type":"output_text","text":"hel","annotations":[],"logprobs":[]}]}}`
	if got := string(s.Frames[5].Payload); got != want {
		t.Fatalf("output_item.done:\n got %s\nwant %s", got, want)
	}
	if err := s.MessageStart("msg_x_1", 1); err != nil {
		t.Fatal(err)
	}
	if item, err := s.MessageEnd("msg_x_1", 1, "", ItemIncomplete); err != nil || item.Status != ItemIncomplete {
		t.Fatalf("MessageEnd: %+v %v", item, err)
	}
}

// A function tool's echo has strict (default true), description and
// parameters (null when absent); what the request set is kept; other
// tools are echoed as sent.
func TestNewResponse_ToolsNormalized(t *testing.T) {
	req := []byte(`{"model":"m","tools":[{"type":"function","name":"f"},` +
		`{"type":"function","name":"g","strict":false,"description":"d","parameters":{"type":"object"}},` +
		`{"type":"function","name":"h","strict":null},{"type":"web_search"}]}`)
	r := NewResponse(&NewResponseParams{ID: "resp_1", Model: "m", Status: StatusInProgress, Request: req})
	var tools []map[string]any
	if err := json.Unmarshal(r.Tools, &tools); err != nil {
		t.Fatal(err)
	}
	if len(tools) != 4 {
		t.Fatalf("tools %s", r.Tools)
	}
	f := tools[0]
	if f["strict"] != true || f["description"] != nil || f["parameters"] != nil || f["name"] != "f" {
		t.Errorf("f: %v", f)
	}
	if _, ok := f["description"]; !ok {
		t.Errorf("f has no description key: %v", f)
	}
	if _, ok := f["parameters"]; !ok {
		t.Errorf("f has no parameters key: %v", f)
	}
	g := tools[1]
	if g["strict"] != false || g["description"] != "d" || g["parameters"] == nil {
		t.Errorf("g changed: %v", g)
	}
	if tools[2]["strict"] != true {
		t.Errorf("h: strict null is not the default true: %v", tools[2])
	}
	if len(tools[3]) != 1 || tools[3]["type"] != "web_search" {
		t.Errorf("hosted tool changed: %v", tools[3])
	}
	none := NewResponse(&NewResponseParams{ID: "resp_2", Model: "m", Status: StatusInProgress, Request: []byte(`{"model":"m"}`)})
	if string(none.Tools) != "[]" {
		t.Errorf("no tools: %s", none.Tools)
	}
}
