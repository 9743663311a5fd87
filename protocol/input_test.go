package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// ambiguous are requests a lenient reader could read two ways: a key twice,
// or a case variant of a key next to it or instead of it. encoding/json's
// struct decoding (what recovery used) matches keys case-insensitively
// and keeps the last; a map lookup (what the HTTP parser used) matches
// exactly. The one reader refuses each, naming the key.
var ambiguous = []struct {
	name, body, param, code string
}{
	{"InputCaseVariantNext", `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"approve"}],
		"Input":[{"type":"function_call_output","call_id":"c","output":"reject"}]}`, "Input", CodeUnknownParam},
	{"InputCaseVariantAlone", `{"model":"m","INPUT":"hi"}`, "INPUT", CodeUnknownParam},
	{"StreamUpper", `{"model":"m","STREAM":true}`, "STREAM", CodeUnknownParam},
	{"ModelCaseVariant", `{"model":"m","Model":"n"}`, "Model", CodeUnknownParam},
	{"EchoFieldCaseVariant", `{"model":"m","Temperature":0.5}`, "Temperature", CodeUnknownParam},
	{"UnicodeFold", `{"model":"m","ſtream":true}`, "ſtream", CodeUnknownParam}, // ſ folds to s in encoding/json
	{"EscapedCaseVariant", `{"model":"m","\u0049nput":"x"}`, "Input", CodeUnknownParam},
	{"DuplicateKey", `{"model":"m","stream":false,"stream":true}`, "stream", CodeDuplicateParam},
	{"EscapedDuplicate", `{"model":"m","input":"a","\u0069nput":"b"}`, "input", CodeDuplicateParam},
	{"DuplicateUnknownKey", `{"model":"m","x":1,"x":2}`, "x", CodeDuplicateParam},
	{"ItemOutputUpper", `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"approve","OUTPUT":"reject"}]}`,
		"input[0].OUTPUT", CodeUnknownParam},
	{"ItemOutputUpperAlone", `{"model":"m","input":[{"type":"function_call_output","call_id":"c","Output":"reject"}]}`,
		"input[0].Output", CodeUnknownParam},
	{"ItemCallIDVariant", `{"model":"m","input":[{"type":"function_call_output","call_id":"c","Call_ID":"d","output":"x"}]}`,
		"input[0].Call_ID", CodeUnknownParam},
	{"ItemTypeVariant", `{"model":"m","input":[{"Type":"function_call_output","role":"user","content":"x"}]}`,
		"input[0].Type", CodeUnknownParam},
	{"ItemDuplicateOutput", `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"approve","output":"reject"}]}`,
		"input[0].output", CodeDuplicateParam},
	{"ItemRoleVariant", `{"model":"m","input":[{"role":"user","content":"ok"},{"role":"user","ROLE":"system","content":"x"}]}`,
		"input[1].ROLE", CodeUnknownParam},
	{"PartTextVariant", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a","TEXT":"b"}]}]}`,
		"input[0].content[0].TEXT", CodeUnknownParam},
	{"OutputPartDuplicate", `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"a","text":"b"}]}]}`,
		"input[0].output[0].text", CodeDuplicateParam},
	{"MetadataDuplicate", `{"model":"m","metadata":{"k":"a","k":"b"}}`, "metadata.k", CodeDuplicateParam},
}

func TestParseCreate_RefusesAmbiguousKeys(t *testing.T) {
	t.Parallel()
	for _, tt := range ambiguous {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseCreate([]byte(tt.body), 0)
			re, ok := errors.AsType[*RequestError](err)
			if !ok || re.Param != tt.param || re.Code != tt.code || re.Message == "" {
				t.Fatalf("ParseCreate error = %v, want a *RequestError param %q code %q", err, tt.param, tt.code)
			}
		})
	}
}

func TestParseCreate_ToleratesUnknownKeys(t *testing.T) {
	t.Parallel()
	// Unknown keys (in any case, once each) are tolerated: SDKs add fields.
	body := `{"model":"m","foo":1,"Foo":2,"input":[{"role":"user","content":"x","extra":1,"Extra":2,"id":"msg_1","status":"completed"}]}`
	p, err := ParseCreate([]byte(body), 0)
	if err != nil || len(p.Input) != 1 || p.Input[0].Text != "x" {
		t.Fatalf("ParseCreate = %+v, %v", p, err)
	}
}

// readers are the ways a stored request is read: the HTTP parser, recovery
// (ReadInput) and input_items (ScanInput, every item, and one at a time).
var readers = map[string]func(body []byte) ([]InputItem, error){
	"ParseCreate": func(body []byte) ([]InputItem, error) {
		p, err := ParseCreate(body, 0)
		if err != nil {
			return nil, err
		}
		return p.Input, nil
	},
	"ReadInput": ReadInput,
	"ScanInputEach": func(body []byte) ([]InputItem, error) {
		n, err := ScanInput(body, func(int) func(int) bool { return nil }, nil)
		if err != nil {
			return nil, err
		}
		var items []InputItem
		for i := range n {
			if _, err := ScanInput(body, func(int) func(int) bool { return func(j int) bool { return j == i } },
				func(_ int, it InputItem) error { items = append(items, it); return nil }); err != nil {
				return nil, err
			}
		}
		return items, nil
	},
}

// TestOneReader_SameAnswers reads adversarial and ordinary requests with
// every reader: the parser, recovery and input_items read the same items,
// or all refuse the request with the same error.
func TestOneReader_SameAnswers(t *testing.T) {
	t.Parallel()
	bodies := []string{
		`{"model":"m"}`,
		`{"model":"m","input":null}`,
		`{"model":"m","input":"hello"}`,
		`{"model":"m","input":[]}`,
		` {"model":"m","input" : [ {"role":"user","content":"a"} , {"type":"message","role":"assistant","content":[{"type":"output_text","text":"b","annotations":[]}]} ] } `,
		`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"ok"},{"type":"text","text":"\"quoted\" \\ \u00e9"}]}]}`,
		`{"model":"m","tools":[{"type":"function","name":"f","parameters":{"Input":"x","input":"y"}}],"input":"t"}`,
		`{"model":"m","previous_response_id":"resp_1","input":[{"type":"function_call_output","call_id":"c","output":"approve"}],"x":{"INPUT":"no"}}`,
	}
	for _, tt := range ambiguous {
		if !strings.HasPrefix(tt.param, "metadata") { // recovery reads only the input
			bodies = append(bodies, tt.body)
		}
	}
	for i, body := range bodies {
		var first []InputItem
		var firstErr error
		for _, name := range []string{"ParseCreate", "ReadInput", "ScanInputEach"} {
			got, err := readers[name]([]byte(body))
			if name == "ParseCreate" {
				first, firstErr = got, err
				continue
			}
			if !reflect.DeepEqual(got, first) || fmt.Sprint(err) != fmt.Sprint(firstErr) {
				t.Errorf("body %d: %s = %+v, %v; ParseCreate = %+v, %v", i, name, got, err, first, firstErr)
			}
		}
	}
}

func TestScanInput_PlanAndSkip(t *testing.T) {
	t.Parallel()
	body := []byte(`{"model":"m","input":[{"role":"user","content":"0"},{"role":"user","content":"1"},{"role":"user","content":"2"}]}`)
	var planned []int
	var got []string
	n, err := ScanInput(body, func(n int) func(int) bool {
		planned = append(planned, n)
		return func(i int) bool { return i != 1 }
	}, func(i int, it InputItem) error {
		got = append(got, fmt.Sprintf("%d %s", i, it.Text))
		return nil
	})
	if err != nil || n != 3 || !reflect.DeepEqual(planned, []int{3}) || !reflect.DeepEqual(got, []string{"0 0", "2 2"}) {
		t.Fatalf("n %d planned %v got %q err %v", n, planned, got, err)
	}
	// plan is called once even without items.
	planned = nil
	if n, err := ScanInput([]byte(`{"model":"m"}`), func(n int) func(int) bool { planned = append(planned, n); return nil }, nil); err != nil || n != 0 ||
		!reflect.DeepEqual(planned, []int{0}) {
		t.Fatalf("no input: n %d planned %v err %v", n, planned, err)
	}
	// A stored request the reader cannot read is an error, never a guess.
	for _, bad := range []string{``, `null`, `[1]`, `{"input":"x"} x`, `{"input":[{"role":"user","content":"a"}]`, `{"input":3}`,
		`{"input":"a","Input":"b"}`, `{"input":[{"role":"user","text":"legacy"}]}`} {
		if _, err := ReadInput([]byte(bad)); err == nil {
			t.Errorf("ReadInput(%q) accepted", bad)
		}
	}
}

func TestParseCreate_MaxInputItems(t *testing.T) {
	t.Parallel()
	items := strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"x"},`, 4), ",")
	body := []byte(`{"model":"m","input":[` + items + `]}`)
	if p, err := ParseCreate(body, 4); err != nil || len(p.Input) != 4 {
		t.Fatalf("4 items under a cap of 4: %v", err)
	}
	_, err := ParseCreate(body, 3)
	re, ok := errors.AsType[*RequestError](err)
	if !ok || re.Param != "input" || re.Code != CodeArrayTooLong || !strings.Contains(re.Message, "maximum length 3") ||
		!strings.Contains(re.Message, "length 4 instead") {
		t.Fatalf("4 items over a cap of 3: %v", err)
	}
	// A string input is one item; the cap applies to arrays.
	if _, err := ParseCreate([]byte(`{"model":"m","input":"x"}`), 1); err != nil {
		t.Fatalf("string input under a cap of 1: %v", err)
	}
}

// FuzzWalk checks the allocation-free walker against encoding/json: for
// every valid JSON object, eachMember yields the keys json.Decoder reads
// and values that compact to the same JSON, in order; likewise eachElement
// for arrays.
func FuzzWalk(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, ` { "a" : [1, {"b":"}"}] , "c\"d":"\\", "e":null,"f":true,"g":-1.5e3 } `,
		`[]`, `[1,"2",[3],{"4":5}]`, `{"\u00e9":"x","a\u0000":{}}`, "{\"\xff\":1}", `{"a":{"b":{"c":[[]]}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		var want []string
		dec := json.NewDecoder(strings.NewReader(string(b)))
		tok, _ := dec.Token()
		switch tok {
		case json.Delim('{'):
			for dec.More() {
				k, _ := dec.Token()
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					t.Fatal(err)
				}
				want = append(want, k.(string)+"="+compact(t, v))
			}
			var got []string
			if err := eachMember(b, func(k string, v []byte) error {
				got = append(got, k+"="+compact(t, v))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("eachMember = %q, want %q", got, want)
			}
		case json.Delim('['):
			for dec.More() {
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					t.Fatal(err)
				}
				want = append(want, compact(t, v))
			}
			var got []string
			if err := eachElement(b, func(_ int, v []byte) error {
				got = append(got, compact(t, v))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("eachElement = %q, want %q", got, want)
			}
		}
	})
}

func compact(t *testing.T, v []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		t.Fatalf("compact %q: %v", v, err)
	}
	return b.String()
}

// A client that keeps the conversation replays earlier output items: an
// assistant message (with the id and status the API gave it), a
// function_call and a reasoning item are read; the call needs its call_id
// and name.
func TestReadInput_ReplayedOutputItems(t *testing.T) {
	body := `{"model":"m","input":[
		{"role":"user","content":"weather in Paris?"},
		{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"xyz"},
		{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Let me look.","annotations":[]}]},
		{"type":"function_call","id":"fc_1","status":"completed","call_id":"call_1","name":"weather","arguments":"{\"city\":\"Paris\"}"},
		{"type":"function_call_output","call_id":"call_1","output":"20C"},
		{"type":"mcp_call","id":"mcp_1","status":"completed","server_label":"superstep","name":"calc","arguments":"{}","output":"42","error":null,"approval_request_id":null}]}`
	got, err := ReadInput([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := []InputItem{{Type: InputMessage, Role: "user", Text: "weather in Paris?"}, {Type: InputReasoning},
		{Type: InputMessage, Role: "assistant", Text: "Let me look."},
		{Type: InputFunctionCall, CallID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`},
		{Type: InputFunctionCallOutput, CallID: "call_1", Output: "20C"},
		{Type: InputToolCall, CallID: "mcp_1", Name: "calc", Arguments: "{}", Output: "42"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	// BuildRequest writes them so that the reader reads them back.
	again, err := ReadInput(BuildRequest(&RequestParams{Model: "m", Input: want}))
	if err != nil || !reflect.DeepEqual(again, want) {
		t.Fatalf("round trip %+v %v", again, err)
	}
	for _, c := range []struct{ item, param string }{
		{`{"type":"function_call","name":"f","arguments":"{}"}`, "input[0].call_id"},
		{`{"type":"function_call","call_id":"c","arguments":"{}"}`, "input[0].name"},
		{`{"type":"function_call","call_id":"c","name":"f"}`, "input[0].arguments"},
		{`{"type":"function_call","call_id":"c","name":"f","arguments":{}}`, "input[0].arguments"},
		{`{"type":"web_search_call","id":"ws_1"}`, "input[0].type"},
	} {
		_, err := ReadInput([]byte(`{"model":"m","input":[` + c.item + `]}`))
		var re *RequestError
		if !errors.As(err, &re) || re.Param != c.param {
			t.Errorf("%s: %v, want an error on %s", c.item, err, c.param)
		}
	}
}

// Images and files in a user message are read as parts, in order, next to
// the joined text; a text-only message has no parts; what cannot be served
// is refused naming the field.
func TestReadInput_ImageAndFileParts(t *testing.T) {
	got, err := ReadInput([]byte(`{"model":"m","input":[
		{"role":"user","content":[{"type":"input_text","text":"what is this?"},
			{"type":"input_image","image_url":"data:image/png;base64,AAAA","detail":"low"},
			{"type":"input_file","file_data":"data:application/pdf;base64,BBBB","filename":"a.pdf"}]},
		{"role":"user","content":[{"type":"input_text","text":"plain"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []InputItem{{Type: InputMessage, Role: "user", Text: "what is this?", Parts: []Part{
		{Type: PartText, Text: "what is this?"},
		{Type: PartImage, ImageURL: "data:image/png;base64,AAAA", Detail: "low"},
		{Type: PartFile, FileData: "data:application/pdf;base64,BBBB", Filename: "a.pdf"}}},
		{Type: InputMessage, Role: "user", Text: "plain"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	for _, c := range []struct{ part, role, param string }{
		{`{"type":"input_image","file_id":"file_1"}`, "user", "input[0].content[0].file_id"},
		{`{"type":"input_image"}`, "user", "input[0].content[0].image_url"},
		{`{"type":"input_image","image_url":"https://x/y.png","detail":"huge"}`, "user", "input[0].content[0].detail"},
		{`{"type":"input_file","filename":"a.pdf"}`, "user", "input[0].content[0].file_data"},
		{`{"type":"input_image","image_url":"https://x/y.png"}`, "assistant", "input[0].content"},
		{`{"type":"input_audio","data":"x"}`, "user", "input[0].content[0]"},
	} {
		_, err := ReadInput([]byte(`{"model":"m","input":[{"role":"` + c.role + `","content":[` + c.part + `]}]}`))
		var re *RequestError
		if !errors.As(err, &re) || !strings.HasPrefix(re.Param, c.param) {
			t.Errorf("%s: %v, want an error on %s", c.part, err, c.param)
		}
	}
}

// An item_reference is read as a reference to the output item its id
// names (the host resolves it); the id is required and must be a string.
// BuildRequest writes it back as the reader reads it.
func TestReadInput_ItemReference(t *testing.T) {
	t.Parallel()
	got, err := ReadInput([]byte(`{"model":"m","input":[{"role":"user","content":"hi"},
		{"type":"item_reference","id":"msg_abc_0"},{"type":"item_reference","id":"fc_abc_1"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []InputItem{{Type: InputMessage, Role: "user", Text: "hi"},
		{Type: InputItemReference, ID: "msg_abc_0"}, {Type: InputItemReference, ID: "fc_abc_1"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	again, err := ReadInput(BuildRequest(&RequestParams{Model: "m", Input: want}))
	if err != nil || !reflect.DeepEqual(again, want) {
		t.Fatalf("round trip %+v %v", again, err)
	}
	for _, c := range []struct{ item, param, code string }{
		{`{"type":"item_reference"}`, "input[0].id", CodeMissingParam},
		{`{"type":"item_reference","id":""}`, "input[0].id", CodeMissingParam},
		{`{"type":"item_reference","id":null}`, "input[0].id", CodeMissingParam},
		{`{"type":"item_reference","id":7}`, "input[0].id", CodeInvalidType},
		{`{"type":"item_reference","ID":"msg_abc_0"}`, "input[0].ID", CodeUnknownParam},
	} {
		_, err := ReadInput([]byte(`{"model":"m","input":[` + c.item + `]}`))
		re, ok := errors.AsType[*RequestError](err)
		if !ok || re.Param != c.param || re.Code != c.code {
			t.Errorf("%s: %v, want an error on %s (%s)", c.item, err, c.param, c.code)
		}
	}
}

// ParseOutputItemID reads back the ids MessageID, FunctionCallID and
// ToolCallID make, and nothing else.
func TestParseOutputItemID(t *testing.T) {
	t.Parallel()
	const resp = "resp_0123abcd"
	for _, id := range []string{MessageID(resp, 0), FunctionCallID(resp, 3), ToolCallID(resp, 12)} {
		r, i, ok := ParseOutputItemID(id)
		if !ok || r != resp {
			t.Errorf("%s: %s %d %v", id, r, i, ok)
		}
	}
	if _, i, _ := ParseOutputItemID(ToolCallID(resp, 12)); i != 12 {
		t.Errorf("index %d, want 12", i)
	}
	for _, id := range []string{"", "msg_", "msg_abc", "msg__0", "msg_abc_", "msg_abc_x", "msg_abc_-1", "msg_abc_01",
		"rs_abc_0", "resp_abc", "fco_abc_0000"} {
		if r, i, ok := ParseOutputItemID(id); ok {
			t.Errorf("%q read as %s %d", id, r, i)
		}
	}
}

// TestInputOf: InputOf holds for the body ParseCreate read and the Input
// it returned (which ReadInput reads alike), and for nothing else: an
// equal copy of either, another request's, a nil request.
func TestInputOf(t *testing.T) {
	body := []byte(`{"model":"m","input":[{"role":"user","content":"hi"},{"type":"function_call_output","call_id":"c","output":"o"}]}`)
	req, err := ParseCreate(body, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !req.InputOf(body, req.Input) {
		t.Fatal("InputOf(the body, its Input) = false")
	}
	if again, err := ReadInput(body); err != nil || !reflect.DeepEqual(again, req.Input) {
		t.Fatalf("ReadInput = %v, %v; want ParseCreate's input", again, err)
	}
	other, err := ParseCreate(slices.Clone(body), 0)
	if err != nil {
		t.Fatal(err)
	}
	var nilReq *CreateRequest
	for name, ok := range map[string]bool{
		"CopiedBody":   req.InputOf(slices.Clone(body), req.Input),
		"CopiedInput":  req.InputOf(body, slices.Clone(req.Input)),
		"ShorterInput": req.InputOf(body, req.Input[:1]),
		"ShorterBody":  req.InputOf(body[:len(body)-1], req.Input),
		"OtherRequest": req.InputOf(body, other.Input),
		"OtherInputs":  other.InputOf(body, req.Input),
		"NilRequest":   nilReq.InputOf(body, req.Input),
		"NilBody":      req.InputOf(nil, req.Input),
		"NotFromParse": (&CreateRequest{Input: req.Input}).InputOf(body, req.Input),
	} {
		if ok {
			t.Errorf("%s: InputOf = true", name)
		}
	}
}
