package responses

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/protocol"
)

func TestParseCreate_Valid(t *testing.T) {
	t.Parallel()
	instr := "be brief"
	tests := []struct {
		name string
		body string
		want host.CreateParams
	}{
		{"StringInputDefaults", `{"model":"demo.echo","input":"hi"}`,
			host.CreateParams{Model: "demo.echo", Store: true, Input: []host.InputItem{{Type: "message", Role: "user", Text: "hi"}}}},
		{"Flags", `{"model":"m","stream":true,"background":true,"store":true}`,
			host.CreateParams{Model: "m", Stream: true, Background: true, Store: true}},
		{"NullsAreDefaults", `{"model":"m","stream":null,"store":null,"metadata":null,"input":null,"instructions":null}`,
			host.CreateParams{Model: "m", Store: true}},
		{"StoreFalseSync", `{"model":"m","store":false}`, host.CreateParams{Model: "m"}},
		{"UnknownFieldsTolerated", `{"model":"m","temperature":0.2,"tools":[{"type":"function","name":"f"}],"x":{"y":[1]}}`,
			host.CreateParams{Model: "m", Store: true}},
		{"Everything", `{"model":"m","instructions":"be brief","previous_response_id":"resp_1","metadata":{"steps":"3"},
			"input":[{"role":"user","content":"a"},{"type":"message","role":"developer","content":[{"type":"input_text","text":"b"},{"type":"input_text","text":"c"}]},
			{"type":"function_call_output","call_id":"call_1","output":"approve"}]}`,
			host.CreateParams{Model: "m", Store: true, Instructions: &instr, PreviousResponseID: "resp_1",
				Metadata: map[string]string{"steps": "3"},
				Input: []host.InputItem{{Type: "message", Role: "user", Text: "a"}, {Type: "message", Role: "developer", Text: "b\nc"},
					{Type: "function_call_output", CallID: "call_1", Output: "approve"}}}},
		{"OutputAsParts", `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"ok"}]}]}`,
			host.CreateParams{Model: "m", Store: true, Input: []host.InputItem{{Type: "function_call_output", CallID: "c", Output: "ok"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseCreate([]byte(tt.body), 0)
			if err != nil {
				t.Fatalf("parseCreate: %v", err)
			}
			if string(got.Request) != tt.body {
				t.Errorf("Request = %q, want the body as received", got.Request)
			}
			if !got.Parsed.InputOf(got.Request, got.Input) {
				t.Error("Parsed does not say Input was read from Request: the host would read it again")
			}
			got.Request, got.Parsed = nil, nil
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("parseCreate =\n %+v\nwant\n %+v", *got, tt.want)
			}
		})
	}
}

func TestParseCreate_Invalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, param, code string
	}{
		{"Malformed", `{"model":`, "", codeInvalidJSON},
		{"NotObject", `[1,2]`, "", codeInvalidJSON},
		{"Null", `null`, "", codeInvalidJSON},
		{"Empty", ``, "", codeInvalidJSON},
		{"TrailingGarbage", `{"model":"m"} x`, "", codeInvalidJSON},
		{"MissingModel", `{"input":"x"}`, "model", codeMissingParam},
		{"EmptyModel", `{"model":""}`, "model", codeMissingParam},
		{"ModelNumber", `{"model":7}`, "model", codeInvalidType},
		{"StreamString", `{"model":"m","stream":"yes"}`, "stream", codeInvalidType},
		{"BackgroundNumber", `{"model":"m","background":1}`, "background", codeInvalidType},
		{"StoreString", `{"model":"m","store":"false"}`, "store", codeInvalidType},
		{"BackgroundNoStore", `{"model":"m","background":true,"store":false}`, "background", codeInvalidValue},
		{"PrevNumber", `{"model":"m","previous_response_id":5}`, "previous_response_id", codeInvalidType},
		{"InstructionsArray", `{"model":"m","instructions":["a"]}`, "instructions", codeInvalidType},
		{"MetadataArray", `{"model":"m","metadata":["a"]}`, "metadata", codeInvalidType},
		{"MetadataNumberValue", `{"model":"m","metadata":{"k":1}}`, "metadata.k", codeInvalidType},
		{"MetadataNullValue", `{"model":"m","metadata":{"k":null}}`, "metadata.k", codeInvalidType},
		{"MetadataLongKey", `{"model":"m","metadata":{"` + strings.Repeat("k", 65) + `":"v"}}`, "metadata." + strings.Repeat("k", 65), codeInvalidValue},
		{"MetadataLongValue", `{"model":"m","metadata":{"k":"` + strings.Repeat("v", 513) + `"}}`, "metadata.k", codeInvalidValue},
		{"MetadataTooMany", `{"model":"m","metadata":{` + manyKeys(17) + `}}`, "metadata", codeInvalidValue},
		{"InputNumber", `{"model":"m","input":3}`, "input", codeInvalidType},
		{"InputItemString", `{"model":"m","input":["x"]}`, "input[0]", codeInvalidType},
		{"InputItemBadType", `{"model":"m","input":[{"type":"image","role":"user"}]}`, "input[0].type", codeUnsupportedIn},
		{"InputItemTypeNumber", `{"model":"m","input":[{"type":1}]}`, "input[0].type", codeInvalidType},
		{"MessageNoRole", `{"model":"m","input":[{"type":"message","content":"x"}]}`, "input[0].role", codeMissingParam},
		{"MessageBadRole", `{"model":"m","input":[{"role":"robot","content":"x"}]}`, "input[0].role", codeInvalidValue},
		{"MessageNoContent", `{"model":"m","input":[{"role":"user"}]}`, "input[0].content", codeMissingParam},
		{"MessageContentNumber", `{"model":"m","input":[{"role":"user","content":1}]}`, "input[0].content", codeInvalidType},
		{"PartAudio", `{"model":"m","input":[{"role":"user","content":[{"type":"input_audio"}]}]}`, "input[0].content[0].type", codeUnsupportedIn},
		{"PartNoText", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text"}]}]}`, "input[0].content[0].text", codeMissingParam},
		{"PartTextNumber", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":2}]}]}`, "input[0].content[0].text", codeInvalidType},
		{"FCONoCallID", `{"model":"m","input":[{"type":"function_call_output","output":"x"}]}`, "input[0].call_id", codeMissingParam},
		{"FCONoOutput", `{"model":"m","input":[{"type":"function_call_output","call_id":"c"}]}`, "input[0].output", codeMissingParam},
		{"SecondItemBad", `{"model":"m","input":[{"role":"user","content":"ok"},{"role":"user","content":false}]}`, "input[1].content", codeInvalidType},
		// Ambiguous keys (issue 12 #15): a case variant of a known key, next
		// to it or instead of it, or a key twice, at every level.
		{"InputCaseVariant", `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"approve"}],
			"Input":[{"type":"function_call_output","call_id":"c","output":"reject"}]}`, "Input", "unknown_parameter"},
		{"InputCaseVariantAlone", `{"model":"m","Input":"hi"}`, "Input", "unknown_parameter"},
		{"StreamUpper", `{"model":"m","STREAM":true}`, "STREAM", "unknown_parameter"},
		{"DuplicateStream", `{"model":"m","stream":true,"stream":false}`, "stream", "duplicate_parameter"},
		{"ItemOutputUpper", `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"approve","OUTPUT":"reject"}]}`,
			"input[0].OUTPUT", "unknown_parameter"},
		{"ItemDuplicateOutput", `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"approve","output":"reject"}]}`,
			"input[0].output", "duplicate_parameter"},
		{"PartTextUpper", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a","Text":"b"}]}]}`,
			"input[0].content[0].Text", "unknown_parameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseCreate([]byte(tt.body), 0)
			var ae *apiError
			if !errors.As(err, &ae) {
				t.Fatalf("parseCreate error = %v, want an *apiError", err)
			}
			if ae.Status != http.StatusBadRequest || ae.Param != tt.param || ae.Code != tt.code || ae.Message == "" {
				t.Errorf("error = %+v, want 400 param %q code %q", ae, tt.param, tt.code)
			}
		})
	}
}

func TestParseCreate_MaxInputItems(t *testing.T) {
	t.Parallel()
	body := []byte(`{"model":"m","input":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":"c"}]}`)
	if p, err := parseCreate(body, 3); err != nil || len(p.Input) != 3 {
		t.Fatalf("3 items, cap 3: %v", err)
	}
	_, err := parseCreate(body, 2)
	if ae := toAPIError(err); ae.Status != http.StatusBadRequest || ae.Param != "input" || ae.Code != "array_above_max_length" {
		t.Fatalf("3 items, cap 2: %+v", ae)
	}
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strings.Repeat("x", i) + `":"v"`)
	}
	return b.String()
}

// FuzzParseCreate checks that no body panics the parser, that every
// rejection is a 400 with a message, and that what it accepts obeys the
// documented limits and parses again to the same result.
func FuzzParseCreate(f *testing.F) {
	for _, s := range []string{
		`{"model":"demo.echo","input":"hi","stream":true}`,
		`{"model":"m","background":true,"store":false}`,
		`{"model":"m","metadata":{"a":"b"},"input":[{"role":"user","content":[{"type":"input_text","text":"x"}]}]}`,
		`{"model":"m","previous_response_id":"r","input":[{"type":"function_call_output","call_id":"c","output":"approve"}]}`,
		`{"model":1}`, `[]`, `null`, `{"model":"m","input":[{}]}`, "{\"model\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := parseCreate(body, 0)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Message == "" || !utf8.ValidString(ae.Message) {
				t.Fatalf("rejection %v is not a 400 *apiError with a message", err)
			}
			if _, merr := json.Marshal(ae.body()); merr != nil {
				t.Fatalf("error body does not encode: %v", merr)
			}
			return
		}
		checkAccepted(t, p)
		again, err := parseCreate(p.Request, 0)
		if err != nil || !reflect.DeepEqual(again, p) {
			t.Fatalf("re-parsing the stored request gave %+v, %v; want %+v", again, err, p)
		}
		// Recovery and input_items read the stored request as the parser did.
		in, err := protocol.ReadInput(p.Request)
		if err != nil || len(in) != len(p.Input) || len(in) > 0 && !reflect.DeepEqual(in, p.Input) {
			t.Fatalf("recovery read %+v, %v; the parser read %+v", in, err, p.Input)
		}
	})
}

func checkAccepted(t *testing.T, p *host.CreateParams) {
	t.Helper()
	if p.Model == "" {
		t.Fatal("accepted a request without a model")
	}
	if p.Background && !p.Store {
		t.Fatal("accepted background with store:false")
	}
	if len(p.Metadata) > MetadataMaxKeys {
		t.Fatalf("accepted %d metadata keys", len(p.Metadata))
	}
	for k, v := range p.Metadata {
		if utf8.RuneCountInString(k) > MetadataMaxKeyLen || utf8.RuneCountInString(v) > MetadataMaxValueLen {
			t.Fatalf("accepted metadata %q=%q beyond the limits", k, v)
		}
	}
	roles := map[string]bool{"user": true, "assistant": true, "system": true, "developer": true}
	for _, in := range p.Input {
		if in.Type != itemMessage && in.Type != itemFunctionCallOutput {
			t.Fatalf("accepted input item type %q", in.Type)
		}
		if in.Type == itemMessage && !roles[in.Role] || in.Type == itemFunctionCallOutput && in.CallID == "" {
			t.Fatalf("accepted invalid input item %+v", in)
		}
	}
}
