package protocol

import (
	"errors"
	"slices"
	"testing"
)

// The model parameters are read as typed values; Changed names those that
// differ from the API's defaults (explicit defaults are not changes).
func TestReadModelParams(t *testing.T) {
	p, err := ReadModelParams([]byte(`{"model":"m","instructions":"be brief","tools":[{"type":"web_search"},
		{"type":"function","name":"f","description":"d","parameters":{"type":"object"},"strict":true}],
		"tool_choice":{"type":"function","name":"f"},"parallel_tool_calls":false,"max_output_tokens":64,
		"max_tool_calls":0,"reasoning":{"effort":"low","summary":"auto"},"service_tier":"flex","user":"u","presence_penalty":0.5,"frequency_penalty":-1,
		"safety_identifier":"s","prompt_cache_key":"k","temperature":0.5,"top_p":0.9,"text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"}},"verbosity":"high"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if *p.Instructions != "be brief" || len(p.Tools) != 1 || p.Tools[0].Name != "f" || p.Tools[0].Description != "d" ||
		string(p.Tools[0].Parameters) != `{"type":"object"}` || !*p.Tools[0].Strict || !slices.Equal(p.OtherTools, []string{"web_search"}) ||
		p.ToolChoice != (ToolChoice{Mode: "function", Name: "f"}) || *p.ParallelToolCalls || *p.MaxOutputTokens != 64 || *p.MaxToolCalls != 0 || *p.ReasoningEffort != "low" || *p.ReasoningSummary != "auto" ||
		*p.ServiceTier != "flex" || *p.PresencePenalty != 0.5 || *p.FrequencyPenalty != -1 || *p.User != "u" || *p.SafetyIdentifier != "s" || *p.PromptCacheKey != "k" ||
		*p.Temperature != 0.5 || *p.TopP != 0.9 || p.TextFormat.Type != "json_schema" || p.TextFormat.Name != "n" || *p.Verbosity != "high" {
		t.Fatalf("read %+v", p)
	}
	want := []string{"tools", "tool_choice", "parallel_tool_calls", "max_output_tokens", "max_tool_calls", "temperature", "top_p", "text.format", "text.verbosity", "reasoning.effort", "reasoning.summary", "presence_penalty", "frequency_penalty"}
	if got := p.Changed(); !slices.Equal(got, want) {
		t.Fatalf("changed %q, want %q", got, want)
	}
	for _, body := range []string{`{"model":"m"}`, `{"model":"m","tools":[],"tool_choice":"auto","parallel_tool_calls":true,
		"temperature":1,"top_p":1,"text":{"format":{"type":"text"},"verbosity":"medium"},"instructions":"x","max_output_tokens":null,"max_tool_calls":null,
		"reasoning":{"effort":null,"summary":null},"presence_penalty":0,"frequency_penalty":0}`, `{"model":"m","reasoning":null}`} {
		p, err := ReadModelParams([]byte(body))
		if err != nil || len(p.Changed()) != 0 {
			t.Fatalf("%s: changed %q, %v", body, p.Changed(), err)
		}
	}
}

func TestParseCreate_ModelParams(t *testing.T) {
	bad := []struct{ body, param, code string }{
		{`{"model":"m","tool_choice":"always"}`, "tool_choice", CodeInvalidValue},
		{`{"model":"m","tool_choice":7}`, "tool_choice", CodeInvalidType},
		{`{"model":"m","tool_choice":{"name":"f"}}`, "tool_choice.type", CodeMissingParam},
		{`{"model":"m","tool_choice":{"type":"function"}}`, "tool_choice.name", CodeMissingParam},
		{`{"model":"m","parallel_tool_calls":"no"}`, "parallel_tool_calls", CodeInvalidType},
		{`{"model":"m","max_output_tokens":0}`, "max_output_tokens", CodeInvalidValue},
		{`{"model":"m","max_output_tokens":1.5}`, "max_output_tokens", CodeInvalidType},
		{`{"model":"m","temperature":2.5}`, "temperature", CodeInvalidValue},
		{`{"model":"m","reasoning":{"effort":1}}`, "reasoning.effort", CodeInvalidType},
		{`{"model":"m","reasoning":{"summary":true}}`, "reasoning.summary", CodeInvalidType},
		{`{"model":"m","reasoning":[]}`, "reasoning", CodeInvalidType},
		{`{"model":"m","text":{"verbosity":"loud"}}`, "text.verbosity", CodeInvalidValue},
		{`{"model":"m","text":{"verbosity":1}}`, "text.verbosity", CodeInvalidType},
		{`{"model":"m","temperature":"hot"}`, "temperature", CodeInvalidType},
		{`{"model":"m","top_p":-0.1}`, "top_p", CodeInvalidValue},
		{`{"model":"m","text":"json"}`, "text", CodeInvalidType},
		{`{"model":"m","text":{"format":{"type":"xml"}}}`, "text.format.type", CodeInvalidValue},
		{`{"model":"m","text":{"format":{"type":"json_schema","schema":{}}}}`, "text.format.name", CodeMissingParam},
		{`{"model":"m","text":{"format":{"type":"json_schema","name":"n"}}}`, "text.format.schema", CodeMissingParam},
	}
	for _, tt := range bad {
		_, err := ParseCreate([]byte(tt.body), 0)
		var re *RequestError
		if !errors.As(err, &re) || re.Param != tt.param || re.Code != tt.code {
			t.Errorf("%s: %v, want param %s code %s", tt.body, err, tt.param, tt.code)
		}
	}
}
