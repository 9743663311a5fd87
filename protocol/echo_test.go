package protocol

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestParseCreate_EchoedFields: a field the Response only echoes is
// refused when its type or value is one the API refuses, naming it, and
// accepted when it is valid or null.
func TestParseCreate_EchoedFields(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		field, value, code string
	}{
		{"max_tool_calls", `"3"`, CodeInvalidType},
		{"max_tool_calls", `-1`, CodeInvalidValue},
		{"max_tool_calls", `1.5`, CodeInvalidType},
		{"top_logprobs", `true`, CodeInvalidType},
		{"top_logprobs", `21`, CodeInvalidValue},
		{"presence_penalty", `"0"`, CodeInvalidType},
		{"frequency_penalty", `2.5`, CodeInvalidValue},
		{"truncation", `"sometimes"`, CodeInvalidValue},
		{"truncation", `1`, CodeInvalidType},
		{"service_tier", `1`, CodeInvalidType},
		{"user", `{}`, CodeInvalidType},
		{"safety_identifier", `[]`, CodeInvalidType},
		{"prompt_cache_key", `7`, CodeInvalidType},
		{"prompt_cache_retention", `false`, CodeInvalidType},
		{"reasoning", `"high"`, CodeInvalidType},
		{"stream_options", `true`, CodeInvalidType},
		{"prompt", `"p"`, CodeUnsupportedValue},
		{"prompt", `{"id":"pmpt_1"}`, CodeUnsupportedValue},
		{"include", `"file_search_call.results"`, CodeInvalidType},
		{"include", `[1]`, CodeInvalidType},
		{"top_logprobs", `5`, CodeUnsupportedValue},
		{"include", `["reasoning.encrypted_content","message.output_text.logprobs"]`, CodeUnsupportedValue},
	} {
		body := `{"model":"m","input":"x","` + tc.field + `":` + tc.value + `}`
		_, err := ParseCreate([]byte(body), 0)
		re, ok := errors.AsType[*RequestError](err)
		if !ok {
			t.Errorf("%s: %v, want a *RequestError", body, err)
			continue
		}
		param := tc.field
		switch {
		case tc.field == "include" && tc.value == `[1]`:
			param = "include[0]"
		case tc.field == "include" && strings.Contains(tc.value, "logprobs"):
			param = "include[1]"
		}
		if re.Param != param || re.Code != tc.code || re.Message == "" {
			t.Errorf("%s: param %q code %q (%s), want %q %q", body, re.Param, re.Code, re.Message, param, tc.code)
		}
	}
	for _, body := range []string{
		`{"model":"m","max_tool_calls":0,"top_logprobs":0,"presence_penalty":-2,"frequency_penalty":2,"truncation":"auto",
			"service_tier":"flex","user":"u","safety_identifier":"s","prompt_cache_key":"k","prompt_cache_retention":"24h",
			"reasoning":{"effort":"xhigh","summary":"auto"},"stream_options":{"include_obfuscation":false},
			"prompt":null,"include":["reasoning.encrypted_content"]}`,
		`{"model":"m","max_tool_calls":null,"top_logprobs":null,"truncation":null,"reasoning":null,"include":null,"user":null}`,
	} {
		if _, err := ParseCreate([]byte(body), 0); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// FuzzParseCreate_Echo: every body ParseCreate accepts is echoed as sent:
// its echoed fields decode into the Response's (a field that did not
// would be echoed as its default).
func FuzzParseCreate_Echo(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tool_calls":3,"top_logprobs":2,"truncation":"auto","user":"u"}`,
		`{"model":"m","max_tool_calls":"3"}`, `{"model":"m","top_logprobs":1e2}`, `{"model":"m","presence_penalty":-2.5}`,
		`{"model":"m","reasoning":{"effort":"low"},"include":["x"],"service_tier":"auto"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := ParseCreate(body, 0); err != nil {
			return
		}
		var e requestEcho
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("accepted %s, but its echo does not decode: %v", body, err)
		}
	})
}
