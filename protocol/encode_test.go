package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/jsonstr"
)

// The reference encodings: encoding/json over the types' fields and tags,
// each level of nesting with its own MarshalJSON, as the package encoded
// them before the append-style encoder (wire.go), which must match them
// byte for byte.

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
	type functionCall struct {
		ID        string `json:"id"`
		Type      string `json:"type"`
		Status    string `json:"status"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type toolCall struct {
		ID                string  `json:"id"`
		Type              string  `json:"type"`
		Status            string  `json:"status"`
		ServerLabel       string  `json:"server_label"`
		Name              string  `json:"name"`
		Arguments         string  `json:"arguments"`
		Output            *string `json:"output"`
		Error             *string `json:"error"`
		ApprovalRequestID *string `json:"approval_request_id"`
	}
	switch it.Type {
	case ItemMessage:
		c := []refPart{}
		for _, p := range it.Content {
			c = append(c, refPart(p))
		}
		return json.Marshal(message{it.ID, it.Type, it.Status, it.Role, c})
	case ItemFunctionCall:
		return json.Marshal(functionCall{it.ID, it.Type, it.Status, it.CallID, it.Name, it.Arguments})
	case ItemToolCall:
		return json.Marshal(toolCall{ID: it.ID, Type: it.Type, Status: it.Status, ServerLabel: ToolServerLabel,
			Name: it.Name, Arguments: it.Arguments, Output: it.Output})
	}
	return nil, errUnknownItem
}

var errUnknownItem = &json.UnsupportedValueError{Str: "unknown item type"}

// refResponse is Response field for field (TestWire_ReferenceFields keeps
// them so), its items encoded by refItem.
type refResponse struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	CompletedAt        *int64             `json:"completed_at"`
	Status             string             `json:"status"`
	IncompleteDetails  *IncompleteDetails `json:"incomplete_details"`
	Model              string             `json:"model"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Instructions       json.RawMessage    `json:"instructions"`
	Output             []refItem          `json:"output"`
	Error              *Error             `json:"error"`
	Tools              json.RawMessage    `json:"tools"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Truncation         string             `json:"truncation"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	Text               json.RawMessage    `json:"text"`
	TopP               *float64           `json:"top_p"`
	PresencePenalty    *float64           `json:"presence_penalty"`
	FrequencyPenalty   *float64           `json:"frequency_penalty"`
	TopLogprobs        *int64             `json:"top_logprobs"`
	Temperature        *float64           `json:"temperature"`
	Reasoning          json.RawMessage    `json:"reasoning"`
	User               *string            `json:"user"`
	Usage              *Usage             `json:"usage"`
	MaxOutputTokens    *int64             `json:"max_output_tokens"`
	MaxToolCalls       *int64             `json:"max_tool_calls"`
	Store              bool               `json:"store"`
	Background         bool               `json:"background"`
	ServiceTier        string             `json:"service_tier"`
	Metadata           map[string]string  `json:"metadata"`
	SafetyIdentifier   *string            `json:"safety_identifier"`
	PromptCacheKey     *string            `json:"prompt_cache_key"`
	Conversation       *ConversationRef   `json:"conversation,omitempty"`
}

// refResp is r as the reference encodes it (nil for nil).
func refResp(r *Response) *refResponse {
	if r == nil {
		return nil
	}
	var w refResponse
	rv, wv := reflect.ValueOf(r).Elem(), reflect.ValueOf(&w).Elem()
	for i := range rv.NumField() {
		if rv.Type().Field(i).Name != "Output" {
			wv.Field(i).Set(rv.Field(i))
		}
	}
	w.Object = "response"
	w.Output = []refItem{}
	for _, it := range r.Output {
		w.Output = append(w.Output, refItem(it))
	}
	if w.Metadata == nil {
		w.Metadata = map[string]string{}
	}
	return &w
}

// refEvent returns the reference encoding of a stream event.
func refEvent(ev any) ([]byte, error) {
	switch e := ev.(type) {
	case LifecycleEvent:
		return json.Marshal(struct {
			Type           string       `json:"type"`
			SequenceNumber int64        `json:"sequence_number"`
			Response       *refResponse `json:"response"`
		}{e.Type, e.SequenceNumber, refResp(e.Response)})
	case OutputItemEvent:
		return json.Marshal(struct {
			Type           string  `json:"type"`
			SequenceNumber int64   `json:"sequence_number"`
			OutputIndex    int     `json:"output_index"`
			Item           refItem `json:"item"`
		}{e.Type, e.SequenceNumber, e.OutputIndex, refItem(e.Item)})
	case ContentPartEvent:
		return json.Marshal(struct {
			Type           string  `json:"type"`
			SequenceNumber int64   `json:"sequence_number"`
			ItemID         string  `json:"item_id"`
			OutputIndex    int     `json:"output_index"`
			ContentIndex   int     `json:"content_index"`
			Part           refPart `json:"part"`
		}{e.Type, e.SequenceNumber, e.ItemID, e.OutputIndex, e.ContentIndex, refPart(e.Part)})
	}
	return json.Marshal(ev) // no MarshalJSON below: encoding/json throughout
}

// encodeEvent encodes ev with the append-style encoder, after a prefix
// that must stay as it is.
func encodeEvent(ev any) ([]byte, error) {
	const prefix = "[prefix]"
	dst := []byte(prefix)
	var err error
	switch e := ev.(type) {
	case LifecycleEvent:
		dst, _, err = e.appendJSON(dst)
	case OutputItemEvent:
		dst, err = e.appendJSON(dst, nil)
	case ContentPartEvent:
		dst, err = e.appendJSON(dst, nil)
	case OutputTextEvent:
		dst, err = e.appendJSON(dst, nil)
	case FunctionCallArgumentsEvent:
		dst = e.appendJSON(dst, nil)
	default:
		panic("unknown event")
	}
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(dst, []byte(prefix)) {
		panic("prefix overwritten")
	}
	return dst[len(prefix):], nil
}

// TestWire_ReferenceFields: the reference types have Response's and the
// events' fields and tags, so a field added to one but not to the encoder
// fails the comparisons below.
func TestWire_ReferenceFields(t *testing.T) {
	a, b := reflect.TypeFor[Response](), reflect.TypeFor[refResponse]()
	if a.NumField() != b.NumField() {
		t.Fatalf("Response has %d fields, refResponse %d", a.NumField(), b.NumField())
	}
	for i := range a.NumField() {
		if fa, fb := a.Field(i), b.Field(i); fa.Name != fb.Name || fa.Tag != fb.Tag {
			t.Errorf("field %d: %s %s, reference %s %s", i, fa.Name, fa.Tag, fb.Name, fb.Tag)
		}
	}
	// refEvent spells out the fields of these; their count is checked.
	for typ, n := range map[reflect.Type]int{reflect.TypeFor[LifecycleEvent](): 3, reflect.TypeFor[OutputItemEvent](): 4,
		reflect.TypeFor[ContentPartEvent](): 6, reflect.TypeFor[ContentPart](): 4, reflect.TypeFor[Item](): 9} {
		if typ.NumField() != n {
			t.Errorf("%s has %d fields; the reference (and the encoder) know %d", typ, typ.NumField(), n)
		}
	}
}

// oddText holds every kind of character encoding/json escapes or
// replaces: quotes and backslashes, <>&, every control character (short
// escapes \b \f \n \r \t included), U+2028 and U+2029, invalid UTF-8
// (a lone continuation byte, a truncated sequence, an overlong encoding,
// a surrogate), DEL and multi-byte runes.
var oddText = func() string {
	var b strings.Builder
	b.WriteString(`a "b" \c\ <d> & e/`)
	for c := range 0x20 {
		b.WriteByte(byte(c))
	}
	b.WriteString("\u2028\u2029 é € 𝄞 \x7f \xff \x80 \xe2\x80 \xc0\xaf \xed\xa0\x80 \xe2\x80\xa8x \xe2\x80")
	return b.String()
}()

// checkWire compares the encoder with the reference for every event
// type, item type, part, response and record field made of the given
// values.
func checkWire(t *testing.T, text, id, name, args string, raw []byte, temp float64) {
	t.Helper()
	for _, s := range []string{text, id, name, args} {
		if n, want := jsonstr.Len(s), len(jsonstr.Append(nil, s)); n != want {
			t.Fatalf("jsonstr.Len(%.100q) = %d, appendString writes %d", s, n, want)
		}
	}
	out := text + "!"
	var annotations []json.RawMessage
	if raw != nil {
		annotations = []json.RawMessage{raw, json.RawMessage(`{"k":"<v>"}`)}
	}
	parts := []ContentPart{OutputText(text), OutputText(""), {Type: name, Text: args, Annotations: annotations,
		Logprobs: []json.RawMessage{json.RawMessage(`0.5`)}}}
	items := []Item{
		{ID: id, Type: ItemMessage, Status: ItemCompleted, Role: name, Content: parts},
		{ID: id, Type: ItemMessage, Status: ItemInProgress, Role: "assistant"},
		{ID: id, Type: ItemMessage, Status: ItemCompleted, Role: "assistant", Content: []ContentPart{}},
		{ID: id, Type: ItemFunctionCall, Status: text, CallID: name, Name: name, Arguments: args},
		{ID: id, Type: ItemToolCall, Status: ItemCompleted, CallID: name, Name: name, Arguments: args, Output: &out},
		{ID: id, Type: ItemToolCall, Status: ItemInProgress, Name: name},
		{ID: id, Type: name + "?"}, // unknown: an error
	}
	instr, _ := json.Marshal(text)
	resp := NewResponse(&NewResponseParams{ID: id, Model: name, Status: StatusInProgress, CreatedAt: time.Unix(7, 0),
		PreviousResponseID: id, Instructions: &text, Metadata: map[string]string{name: text, args: id, "z": ""},
		Background: true, Store: true, Conversation: id, Request: []byte(`{"temperature":0.25,"user":"u"}`)})
	full := resp.Clone()
	full.Output = items[:len(items)-1]
	full.Instructions = instr
	full.Temperature = &temp
	full.Tools = raw
	full.Finish(StatusFailed, time.Unix(9, 0), &Error{Code: name, Message: text})
	full.IncompleteDetails = &IncompleteDetails{Reason: text}
	full.Usage = &Usage{InputTokens: 1, InputTokensDetails: InputTokensDetails{CachedTokens: 2}, OutputTokens: 3,
		OutputTokensDetails: OutputTokensDetails{ReasoningTokens: 4}, TotalTokens: -5}
	empty := &Response{ID: id} // nil collections, raw fields and pointers

	var events []any
	for i, p := range parts {
		events = append(events, ContentPartEvent{EventContentPartDone, 7, id, 2, i, p})
	}
	for i, it := range items {
		events = append(events, OutputItemEvent{EventOutputItemDone, 9, i, it})
	}
	for _, r := range []*Response{resp, full, empty, nil} {
		events = append(events, LifecycleEvent{EventResponseCompleted, 1 << 40, r})
	}
	events = append(events,
		OutputTextEvent{Type: EventOutputTextDelta, SequenceNumber: 3, ItemID: id, OutputIndex: 4, Delta: &text, Logprobs: []json.RawMessage{}},
		OutputTextEvent{Type: EventOutputTextDone, SequenceNumber: 3, ItemID: id, OutputIndex: 4, ContentIndex: 1, Text: &text},
		OutputTextEvent{Type: name, Delta: &args, Text: &text, Logprobs: annotations},
		FunctionCallArgumentsEvent{Type: EventFunctionCallArgDelta, SequenceNumber: 5, ItemID: id, OutputIndex: 1, Delta: &args},
		FunctionCallArgumentsEvent{Type: EventFunctionCallArgDone, SequenceNumber: 5, ItemID: id, Name: name, Arguments: &args},
		FunctionCallArgumentsEvent{Type: text},
	)
	for i, ev := range events {
		want, werr := refEvent(ev)
		got, err := encodeEvent(ev)
		if (err != nil) != (werr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("event %d (%T):\n got %.300q (%v)\nwant %.300q (%v)", i, ev, got, err, want, werr)
		}
	}
	// The MarshalJSON methods, and the record fields.
	for i, it := range items {
		got, err := json.Marshal(it)
		want, werr := json.Marshal(refItem(it))
		if (err != nil) != (werr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("item %d:\n got %.300q (%v)\nwant %.300q (%v)", i, got, err, want, werr)
		}
	}
	for _, r := range []*Response{resp, full, empty} {
		got, err := json.Marshal(r)
		want, werr := json.Marshal(refResp(r))
		if (err != nil) != (werr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("response:\n got %.300q (%v)\nwant %.300q (%v)", got, err, want, werr)
		}
	}
	for _, u := range []*Usage{full.Usage, nil} {
		if got, want := u.appendJSON(nil), mustJSON(t, u); !bytes.Equal(got, want) {
			t.Fatalf("usage %s, want %s", got, want)
		}
	}
	for _, e := range []*Error{full.Error, nil} {
		if got, want := e.appendJSON(nil), mustJSON(t, e); !bytes.Equal(got, want) {
			t.Fatalf("error %s, want %s", got, want)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWireEncoding: every event type, item type, part and response encodes
// as encoding/json encoded it, for strings holding every character it
// escapes (long ones too), raw values to compact or reject, and floats in
// both of its notations.
func TestWireEncoding(t *testing.T) {
	long := strings.Repeat(oddText, 300)
	checkWire(t, oddText, "msg_"+oddText, "n<>&", `{"a":"<b>"}`, []byte(`{"type":"url_citation", "url":"<u>"}`), 0.7)
	checkWire(t, long, "id", oddText, long, []byte("[1,\n2]"), 1e21)
	checkWire(t, "", "", "", "", nil, 1e-7)
	checkWire(t, "x", "y", "z", "{}", []byte(`{"bad"`), -0.000001) // invalid raw: both reject
	checkWire(t, "\u2028", "\xff", "", "", []byte(`"\u2028 `+"\u2028"+`"`), 123456789.125)
	checkWire(t, "x", "y", "z", "", []byte{}, math.MaxFloat64)            // empty raw: both reject
	checkWire(t, "x", "y", "z", "", []byte("[\"\u2028\",\"\u2029\"]"), 2) // compact, U+2028 to escape
	for _, f := range []float64{math.NaN(), math.Inf(1)} {
		_, err := (&Response{TopP: &f}).appendJSON(nil)
		_, werr := json.Marshal(refResp(&Response{TopP: &f}))
		if err == nil || werr == nil {
			t.Fatalf("%v: %v, reference %v", f, err, werr)
		}
	}
}

// FuzzWireEncoding compares the encoder with encoding/json on arbitrary
// strings, raw values and floats; the seeds run as a test.
func FuzzWireEncoding(f *testing.F) {
	f.Add("hello", "msg_1", "f", `{"q":1}`, []byte(`{"a":1}`), 1.0)
	f.Add(oddText, oddText, oddText, oddText, []byte(oddText), 0.1)
	f.Add("\xed\xbf\xbf\xf4\x90\x80\x80", "\t", "<script>", "\u2029\\", []byte(" [ \"<\u2028>\" , {} ] "), 1e-300)
	f.Add("", "", "", "", []byte(nil), 0.0)
	f.Fuzz(func(t *testing.T, text, id, name, args string, raw []byte, temp float64) {
		if math.IsNaN(temp) || math.IsInf(temp, 0) {
			temp = 1
		}
		checkWire(t, text, id, name, args, raw, temp)
	})
}

// refSeq builds the frames of Seq's message, function call and tool call
// the way Seq did before the encoder: an event value per frame, encoded
// by the reference.
type refSeq struct {
	next   int64
	frames []Frame
}

func (s *refSeq) add(t *testing.T, typ string, ev any) {
	t.Helper()
	data, err := refEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	s.frames = append(s.frames, Frame{Type: typ, Seq: s.next, Payload: data})
	s.next++
}

func (s *refSeq) message(t *testing.T, id string, idx int, text, status string) {
	s.add(t, EventOutputItemAdded, OutputItemEvent{EventOutputItemAdded, s.next, idx,
		Item{ID: id, Type: ItemMessage, Status: ItemInProgress, Role: "assistant"}})
	s.add(t, EventContentPartAdded, ContentPartEvent{EventContentPartAdded, s.next, id, idx, 0, OutputText("")})
	s.add(t, EventOutputTextDelta, OutputTextEvent{Type: EventOutputTextDelta, SequenceNumber: s.next, ItemID: id,
		OutputIndex: idx, Delta: &text, Logprobs: []json.RawMessage{}})
	s.add(t, EventOutputTextDone, OutputTextEvent{Type: EventOutputTextDone, SequenceNumber: s.next, ItemID: id,
		OutputIndex: idx, Text: &text, Logprobs: []json.RawMessage{}})
	s.add(t, EventContentPartDone, ContentPartEvent{EventContentPartDone, s.next, id, idx, 0, OutputText(text)})
	s.add(t, EventOutputItemDone, OutputItemEvent{EventOutputItemDone, s.next, idx, Item{ID: id, Type: ItemMessage,
		Status: status, Role: "assistant", Content: []ContentPart{OutputText(text)}}})
}

func (s *refSeq) functionCall(t *testing.T, id string, idx int, callID, name, args string) {
	item := Item{ID: id, Type: ItemFunctionCall, Status: ItemInProgress, CallID: callID, Name: name}
	s.add(t, EventOutputItemAdded, OutputItemEvent{EventOutputItemAdded, s.next, idx, item})
	s.add(t, EventFunctionCallArgDelta, FunctionCallArgumentsEvent{Type: EventFunctionCallArgDelta, SequenceNumber: s.next,
		ItemID: id, OutputIndex: idx, Delta: &args})
	s.add(t, EventFunctionCallArgDone, FunctionCallArgumentsEvent{Type: EventFunctionCallArgDone, SequenceNumber: s.next,
		ItemID: id, OutputIndex: idx, Name: name, Arguments: &args})
	item.Status, item.Arguments = ItemCompleted, args
	s.add(t, EventOutputItemDone, OutputItemEvent{EventOutputItemDone, s.next, idx, item})
}

func (s *refSeq) toolCall(t *testing.T, id string, idx int, callID, name, args, output string) {
	item := Item{ID: id, Type: ItemToolCall, Status: ItemInProgress, CallID: callID, Name: name, Arguments: args}
	s.add(t, EventOutputItemAdded, OutputItemEvent{EventOutputItemAdded, s.next, idx, item})
	item.Status, item.Output = ItemCompleted, &output
	s.add(t, EventOutputItemDone, OutputItemEvent{EventOutputItemDone, s.next, idx, item})
}

// TestSeq_FramesMatchReference: the frames Seq builds into its shared
// buffer are those the per-event encoding built, each payload capped (an
// append to one leaves the next as it is), for odd texts and many frames
// (the buffer replaced several times).
func TestSeq_FramesMatchReference(t *testing.T) {
	s, ref := &Seq{Next: 3}, &refSeq{next: 3}
	r := NewResponse(&NewResponseParams{ID: "resp_x", Model: "m", Status: StatusInProgress})
	if err := s.Lifecycle(EventResponseInProgress, r); err != nil {
		t.Fatal(err)
	}
	ref.add(t, EventResponseInProgress, LifecycleEvent{EventResponseInProgress, ref.next, r})
	for i := range 300 {
		text := strings.Repeat(oddText, i%7) + strings.Repeat("x", i*37)
		switch i % 4 {
		case 0, 1:
			status := []string{ItemCompleted, ItemIncomplete}[i%2]
			if _, err := s.MessageWithStatus("msg_"+text[:min(len(text), 5)], i, text, status); err != nil {
				t.Fatal(err)
			}
			ref.message(t, "msg_"+text[:min(len(text), 5)], i, text, status)
		case 2:
			if _, err := s.FunctionCall("fc_1", i, "call<1>", "f\u2028", text); err != nil {
				t.Fatal(err)
			}
			ref.functionCall(t, "fc_1", i, "call<1>", "f\u2028", text)
		case 3:
			if _, err := s.ToolCall("mcp_1", i, "c", "t&", "{}", text); err != nil {
				t.Fatal(err)
			}
			ref.toolCall(t, "mcp_1", i, "c", "t&", "{}", text)
		}
	}
	if s.Next != ref.next || len(s.Frames) != len(ref.frames) {
		t.Fatalf("%d frames, next %d; want %d, %d", len(s.Frames), s.Next, len(ref.frames), ref.next)
	}
	for i, f := range s.Frames {
		w := ref.frames[i]
		if f.Type != w.Type || f.Seq != w.Seq || !bytes.Equal(f.Payload, w.Payload) {
			t.Fatalf("frame %d: %s %d %.200q\nwant %s %d %.200q", i, f.Type, f.Seq, f.Payload, w.Type, w.Seq, w.Payload)
		}
		if cap(f.Payload) != len(f.Payload) {
			t.Fatalf("frame %d: payload of %d bytes has room for %d", i, len(f.Payload), cap(f.Payload))
		}
	}
}

// TestProjectStep_RecordMatchesReference: a commit's snapshot (taken from
// its terminal frame), error and usage are what encoding/json makes of
// the state, and the terminal frame holds the snapshot.
func TestProjectStep_RecordMatchesReference(t *testing.T) {
	c, err := Create(&NewResponseParams{ID: "resp_r", Model: "m", Status: StatusQueued, CreatedAt: time.Unix(1, 0),
		Metadata: map[string]string{"k": oddText}, Request: []byte(`{"tools":[{"type":"function","name":"f <x>"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	check := func(c Commit) {
		t.Helper()
		if want := mustJSON(t, refResp(c.Next.Response)); c.Snapshot != nil && !bytes.Equal(c.Snapshot, want) {
			t.Fatalf("snapshot %.300q\nwant %.300q", c.Snapshot, want)
		}
		if c.Next.Response.Error != nil && !bytes.Equal(c.Error, mustJSON(t, c.Next.Response.Error)) {
			t.Fatalf("error %s", c.Error)
		}
		if c.Usage != nil && !bytes.Equal(c.Usage, mustJSON(t, c.Next.Usage)) {
			t.Fatalf("usage %s", c.Usage)
		}
		for _, f := range c.Frames {
			var ev struct{ Type string }
			if err := json.Unmarshal(f.Payload, &ev); err != nil || ev.Type != f.Type {
				t.Fatalf("frame %d: %v %q", f.Seq, err, f.Payload)
			}
		}
	}
	check(c)
	outs := []Output{{Kind: OutputMessage, Executor: "w", Text: oddText}, {Kind: OutputRequest, CallID: "c", Name: "n", Arguments: `{"a":"<"}`},
		{Kind: OutputToolCall, Executor: "w", CallID: "c2", Name: "t", Arguments: "{}", Text: oddText}}
	for i, s := range []*Step{
		{Number: 1, Status: StatusInProgress, Outputs: outs, Usage: Usage{InputTokens: 3, TotalTokens: 3}},
		{Number: 2, Status: StatusInProgress},
		{Number: 3, Status: StatusFailed, Outputs: outs, Error: &Error{Code: "server_error", Message: oddText}, At: time.Unix(5, 0)},
	} {
		if c, err = ProjectStep(c.Next, Live{}, s); err != nil {
			t.Fatal(err)
		}
		check(c)
		if i == 2 {
			last := c.Frames[len(c.Frames)-1].Payload
			if c.Snapshot == nil || !bytes.Contains(last, c.Snapshot) {
				t.Fatal("the terminal frame does not carry the snapshot")
			}
		}
	}
	end, err := ProjectEnd(c.Next, Live{}, StatusCancelled, nil, time.Unix(6, 0))
	if err != nil {
		t.Fatal(err)
	}
	check(end)
}

// TestProjectStep_BigTextSpliced: the step of a long message allocates
// about two encodings of its text: one its four item frames
// (output_text.delta and .done, content_part.done, output_item.done)
// share through splices, and response.completed's, which holds the
// snapshot. Before splices it allocated its five frames, each holding the
// text (5.0 encoded texts here; 19.7 before they were presized).
func TestProjectStep_BigTextSpliced(t *testing.T) {
	text := strings.Repeat(oddText+"abcdefghijklmnopqrstuvwxyz", 1<<20/(len(oddText)+26))
	c, err := Create(&NewResponseParams{ID: "resp_big", Model: "m", Status: StatusQueued, CreatedAt: time.Unix(1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	step, err := ProjectStep(c.Next, Live{}, &Step{Number: 1, Status: StatusCompleted,
		Outputs: []Output{{Kind: OutputMessage, Executor: "w", Text: text}}, At: time.Unix(2, 0)})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	encoded := len(jsonstr.Append(nil, text))
	var framed, spliced int
	for _, f := range step.Frames {
		framed += f.Len()
		if len(f.Splices) > 0 {
			spliced++
		}
	}
	if framed < 5*encoded || spliced != 4 {
		t.Fatalf("the frames hold %d bytes, %d of them spliced; want at least five texts of %d, four spliced", framed, spliced, encoded)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; float64(alloc) > 2.1*float64(encoded)+64<<10 {
		t.Fatalf("ProjectStep allocated %d bytes (%.2f encoded texts of %d bytes), want about two texts",
			alloc, float64(alloc)/float64(encoded), encoded)
	}
}

// TestSeq_SplicedFramesAsWhole: frames with splices are, made whole, the
// frames Seq writes without splicing, byte for byte: a long message
// (alone, after a short one, and twice in a row), a long function call's
// arguments and a long tool call; short texts are never spliced.
func TestSeq_SplicedFramesAsWhole(t *testing.T) {
	long := strings.Repeat(oddText+"x", SpliceMin/len(oddText)+1)
	write := func(s *Seq) {
		for i, text := range []string{"short", long, long, long + "y"} {
			if _, err := s.Message(fmt.Sprintf("msg_%d", i), i, text); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.FunctionCall("fc_1", 4, "call_1", "f", long); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ToolCall("tc_1", 5, "call_2", "t", long, long+"out"); err != nil {
			t.Fatal(err)
		}
	}
	spliced, plain := &Seq{Next: 7}, &Seq{Next: 7, q: quoteCache{noSplice: true}}
	write(spliced)
	write(plain)
	if len(spliced.Frames) != len(plain.Frames) {
		t.Fatalf("%d frames spliced, %d not", len(spliced.Frames), len(plain.Frames))
	}
	n := 0
	for i, f := range spliced.Frames {
		p := plain.Frames[i]
		if f.Type != p.Type || f.Seq != p.Seq || !bytes.Equal(f.Bytes(), p.Payload) || f.Len() != len(p.Payload) {
			t.Fatalf("frame %d (%s): made whole it differs from the frame written without splices:\n%.300s\n%.300s", i, f.Type, f.Bytes(), p.Payload)
		}
		var w bytes.Buffer
		if n, err := f.WriteTo(&w); err != nil || n != int64(len(p.Payload)) || !bytes.Equal(w.Bytes(), p.Payload) {
			t.Fatalf("frame %d (%s): WriteTo wrote %d bytes (err %v), differing from the frame written without splices", i, f.Type, n, err)
		}
		if len(p.Splices) > 0 {
			t.Fatalf("frame %d: spliced with splicing off", i)
		}
		if len(f.Splices) > 0 {
			n++
			if len(f.Payload) > 1024 {
				t.Errorf("frame %d (%s) spliced, yet %d bytes around its splices", i, f.Type, len(f.Payload))
			}
		} else if len(f.Payload) > SpliceMin {
			t.Errorf("frame %d (%s) holds %d bytes, no splice", i, f.Type, len(f.Payload))
		}
	}
	// 3 long messages x 4 frames, the call's 3 (arguments delta and done,
	// item done), the tool call's 2 (added and done hold its arguments).
	if n != 17 {
		t.Errorf("%d frames spliced, want 17", n)
	}
}

// TestKnownHead: the openings knownHead has are those appendHead encodes
// for any other type.
func TestKnownHead(t *testing.T) {
	for _, typ := range []string{EventResponseCreated, EventResponseQueued, EventResponseInProgress, EventResponseCompleted,
		EventResponseFailed, EventResponseIncomplete, EventResponseCancelled, EventOutputItemAdded, EventOutputItemDone,
		EventContentPartAdded, EventContentPartDone, EventOutputTextDelta, EventOutputTextDone, EventFunctionCallArgDelta,
		EventFunctionCallArgDone} {
		want := `{"type":` + string(jsonstr.Append(nil, typ)) + `,"sequence_number":`
		if h := knownHead(typ); h != "" && h != want {
			t.Errorf("knownHead(%q) = %s, want %s", typ, h, want)
		}
	}
}

// TestSeq_FailedFrameLeavesNoCache: a frame whose encoding fails after
// its item's id was written (an unknown item type) leaves nothing for the
// next frames to copy: its bytes are overwritten by the next frame, whose
// id then reads as encoded.
func TestSeq_FailedFrameLeavesNoCache(t *testing.T) {
	const id = "msg_failed_then_reused_0123456789"
	s, ref := &Seq{Next: 3}, &refSeq{next: 3}
	if _, err := s.ToolCallEnd(Item{ID: id, Type: "bogus"}, 0, nil, ItemCompleted); err == nil {
		t.Fatal("an item of an unknown type was encoded")
	}
	if _, err := s.MessageWithStatus(id, 0, "hello", ItemCompleted); err != nil {
		t.Fatal(err)
	}
	ref.message(t, id, 0, "hello", ItemCompleted)
	for i, f := range s.Frames {
		if w := ref.frames[i]; !bytes.Equal(f.Payload, w.Payload) {
			t.Fatalf("frame %d: %s\nwant %s", i, f.Payload, w.Payload)
		}
	}
}
