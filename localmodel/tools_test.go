package localmodel_test

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// The tools offered by the tool tests, in order, and the arguments the
// model makes up for each from its schema.
var (
	alphaSchema = map[string]any{"type": "object", "properties": map[string]any{
		"city":  map[string]any{"type": "string"},
		"days":  map[string]any{"type": "integer", "minimum": 3},
		"units": map[string]any{"type": "string", "enum": []any{"metric", "imperial"}},
	}, "required": []any{"days", "city"}}
	betaSchema = map[string]any{"type": "object", "properties": map[string]any{
		"tags": map[string]any{"type": "array", "minItems": 1, "items": map[string]any{"type": "string", "enum": []any{"red", "blue"}}},
	}, "required": []any{"tags"}}
)

const (
	alphaArgs = `{"city":"x","days":3}`
	betaArgs  = `{"tags":["red"]}`
)

// toolReq is a request offering the tools alpha and beta.
type toolReq struct {
	user     string
	result   string // when set, the user message is followed by a call of alpha and this result
	choice   string // tool_choice: "" (not sent), "none", "auto", "required", or a function's name
	metadata map[string]string
}

// asker sends a toolReq through openai-go, to one endpoint, streaming or
// not, and returns the model's reply as "call <name> <id> <arguments>" or
// "text <text>".
type asker func(t *testing.T, c openai.Client, r toolReq) (string, error)

func askChat(stream bool) asker {
	return func(t *testing.T, c openai.Client, r toolReq) (string, error) {
		p := openai.ChatCompletionNewParams{Model: "m", Metadata: shared.Metadata(r.metadata),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(r.user)},
			Tools: []openai.ChatCompletionToolUnionParam{
				openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "alpha", Parameters: alphaSchema}),
				openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "beta", Parameters: betaSchema}),
			}}
		if r.result != "" {
			call := openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "call_1",
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "alpha", Arguments: alphaArgs}}}}}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &call},
				openai.ToolMessage(r.result, "call_1"))
		}
		switch r.choice {
		case "":
		case "none", "auto", "required":
			p.ToolChoice.OfAuto = openai.String(r.choice)
		default:
			p.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: r.choice})
		}
		var cc *openai.ChatCompletion
		if stream {
			st := c.Chat.Completions.NewStreaming(t.Context(), p)
			defer st.Close()
			var acc openai.ChatCompletionAccumulator
			for st.Next() {
				acc.AddChunk(st.Current())
			}
			if err := st.Err(); err != nil {
				return "", err
			}
			cc = &acc.ChatCompletion
		} else {
			var err error
			if cc, err = c.Chat.Completions.New(t.Context(), p); err != nil {
				return "", err
			}
		}
		ch := cc.Choices[0]
		if len(ch.Message.ToolCalls) == 0 {
			if ch.FinishReason != "stop" {
				t.Errorf("text reply, finish reason %q", ch.FinishReason)
			}
			return "text " + ch.Message.Content, nil
		}
		tc := ch.Message.ToolCalls[0]
		if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Message.Content != "" {
			t.Errorf("tool call: finish reason %q, message %+v", ch.FinishReason, ch.Message)
		}
		return fmt.Sprintf("call %s %s %s", tc.Function.Name, tc.ID, tc.Function.Arguments), nil
	}
}

func askResponses(stream bool) asker {
	return func(t *testing.T, c openai.Client, r toolReq) (string, error) {
		p := responses.ResponseNewParams{Model: "m", Metadata: shared.Metadata(r.metadata),
			Tools: []responses.ToolUnionParam{
				responses.ToolParamOfFunction("alpha", alphaSchema, false),
				responses.ToolParamOfFunction("beta", betaSchema, false),
			}}
		items := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(r.user, responses.EasyInputMessageRoleUser)}
		if r.result != "" {
			items = append(items, responses.ResponseInputItemParamOfFunctionCall(alphaArgs, "call_1", "alpha"),
				responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
					CallID: openai.String("call_1"),
					Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(r.result)},
				}})
		}
		p.Input.OfInputItemList = items
		switch r.choice {
		case "":
		case "none", "auto", "required":
			p.ToolChoice.OfToolChoiceMode = openai.Opt(responses.ToolChoiceOptions(r.choice))
		default:
			p.ToolChoice.OfFunctionTool = &responses.ToolChoiceFunctionParam{Name: r.choice}
		}
		var resp *responses.Response
		streamedArgs := ""
		if stream {
			st := c.Responses.NewStreaming(t.Context(), p)
			defer st.Close()
			for st.Next() {
				switch ev := st.Current(); ev.Type {
				case "response.function_call_arguments.done":
					streamedArgs = ev.Arguments
				case "response.completed":
					resp = &ev.Response
				}
			}
			if err := st.Err(); err != nil {
				return "", err
			}
			if resp == nil {
				t.Fatal("no response.completed event")
			}
		} else {
			var err error
			if resp, err = c.Responses.New(t.Context(), p); err != nil {
				return "", err
			}
		}
		if resp.Status != "completed" || len(resp.Output) != 1 {
			t.Errorf("response %s with %d output items", resp.Status, len(resp.Output))
		}
		if want := cmp.Or(r.choice, "auto"); resp.ToolChoice.RawJSON() != `"`+want+`"` && !strings.Contains(resp.ToolChoice.RawJSON(), `"name":"`+want+`"`) {
			t.Errorf("tool_choice %s, sent %q", resp.ToolChoice.RawJSON(), r.choice)
		}
		if resp.Output[0].Type != "function_call" {
			return "text " + resp.OutputText(), nil
		}
		fc := resp.Output[0].AsFunctionCall()
		if stream && streamedArgs != fc.Arguments {
			t.Errorf("arguments streamed %q, final %q", streamedArgs, fc.Arguments)
		}
		return fmt.Sprintf("call %s %s %s", fc.Name, fc.CallID, fc.Arguments), nil
	}
}

// forEndpoints runs f with each endpoint, streaming and not.
func forEndpoints(t *testing.T, f func(t *testing.T, c openai.Client, ask asker)) {
	srv := server(t, nil)
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("x"), option.WithMaxRetries(0))
	for _, e := range []struct {
		name string
		ask  asker
	}{
		{"chat", askChat(false)}, {"chat-stream", askChat(true)},
		{"responses", askResponses(false)}, {"responses-stream", askResponses(true)},
	} {
		t.Run(e.name, func(t *testing.T) { f(t, c, e.ask) })
	}
}

var follow = map[string]string{"follow_tools": "true"}

func TestTools_Follow(t *testing.T) {
	forEndpoints(t, func(t *testing.T, c openai.Client, ask asker) {
		for _, tc := range []struct {
			name string
			req  toolReq
			want string
		}{
			// Without follow_tools, an unscripted message is echoed, as before.
			{"not asked", toolReq{user: "hello"}, "text Echo: hello"},
			{"first tool", toolReq{user: "hello", metadata: follow}, "call alpha call_1 " + alphaArgs},
			{"after the result", toolReq{user: "hello", result: "sunny", metadata: follow}, "text Tool alpha returned: sunny"},
			// The scripted triggers win: a tool named in the message, its JSON.
			{"named in the message", toolReq{user: `use beta {"tags":["blue"]}`, metadata: follow}, `call beta call_1 {"tags":["blue"]}`},
			{"named without JSON", toolReq{user: "use beta", metadata: follow}, "call beta call_1 " + betaArgs},
			{"tool_call metadata", toolReq{user: "hello", metadata: map[string]string{"follow_tools": "true", "tool_call": "beta"}},
				"call beta call_1 " + betaArgs},
			{"tool_arguments metadata", toolReq{user: "hello", metadata: map[string]string{"follow_tools": "true", "tool_arguments": `{"a":1}`}},
				`call alpha call_1 {"a":1}`},
			{"JSON of another tool's call ignored", toolReq{user: `hello {"q":1}`, metadata: follow}, "call alpha call_1 " + alphaArgs},
			{"two calls wanted", toolReq{user: "hello", result: "sunny", metadata: map[string]string{"follow_tools": "true", "tool_calls": "2"}},
				"call alpha call_2 " + alphaArgs},
			{"follow_tools false", toolReq{user: "hello", metadata: map[string]string{"follow_tools": "false"}}, "text Echo: hello"},
		} {
			got, err := ask(t, c, tc.req)
			if err != nil || got != tc.want {
				t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
			}
		}
	})
}

func TestTools_ToolChoice(t *testing.T) {
	forEndpoints(t, func(t *testing.T, c openai.Client, ask asker) {
		for _, tc := range []struct {
			name string
			req  toolReq
			want string
		}{
			{"auto", toolReq{user: "hello", choice: "auto"}, "text Echo: hello"},
			{"auto follows", toolReq{user: "hello", choice: "auto", metadata: follow}, "call alpha call_1 " + alphaArgs},
			{"none", toolReq{user: "hello", choice: "none", metadata: follow}, "text Echo: hello"},
			{"none beats a named tool", toolReq{user: `use beta {"tags":[]}`, choice: "none"}, `text Echo: use beta {"tags":[]}`},
			{"none after a result", toolReq{user: "hello", result: "sunny", choice: "none"}, "text Tool alpha returned: sunny"},
			{"required", toolReq{user: "hello", choice: "required"}, "call alpha call_1 " + alphaArgs},
			{"required, a tool named", toolReq{user: `use beta {"tags":["blue"]}`, choice: "required"}, `call beta call_1 {"tags":["blue"]}`},
			{"required after a result", toolReq{user: "hello", result: "sunny", choice: "required"}, "call alpha call_2 " + alphaArgs},
			{"function", toolReq{user: "hello", choice: "beta"}, "call beta call_1 " + betaArgs},
			{"function over another named", toolReq{user: `use alpha {"days":9}`, choice: "beta"}, "call beta call_1 " + betaArgs},
			{"function with its JSON", toolReq{user: `use beta {"tags":["blue"]}`, choice: "beta"}, `call beta call_1 {"tags":["blue"]}`},
			{"function after a result", toolReq{user: "hello", result: "sunny", choice: "beta"}, "call beta call_2 " + betaArgs},
		} {
			got, err := ask(t, c, tc.req)
			if err != nil || got != tc.want {
				t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
			}
		}
	})
}

func TestTools_ToolChoiceRejected(t *testing.T) {
	srv := server(t, nil)
	tools := map[string]string{
		"chat":      `"tools":[{"type":"function","function":{"name":"alpha","parameters":{"type":"object"}}}]`,
		"responses": `"tools":[{"type":"function","name":"alpha","parameters":{"type":"object"}}]`,
	}
	input := map[string]string{"chat": `"messages":[{"role":"user","content":"hi"}]`, "responses": `"input":"hi"`}
	for _, api := range []string{"chat", "responses"} {
		path := map[string]string{"chat": "/v1/chat/completions", "responses": "/v1/responses"}[api]
		for _, tc := range []struct{ body, want string }{
			{`"tool_choice":{"type":"function","name":"gamma"},` + tools[api], `names function "gamma"`},
			{`"tool_choice":{"type":"function","function":{"name":"gamma"}},` + tools[api], `names function "gamma"`},
			{`"tool_choice":"required"`, `"required" without function tools`},
			{`"tool_choice":"sometimes",` + tools[api], `tool_choice "sometimes"`},
			{`"tool_choice":{"type":"file_search"},` + tools[api], `type "file_search" is not supported`},
		} {
			code, body := post(t, srv.URL+path, `{"model":"m",`+tc.body+`,`+input[api]+`}`)
			var e struct {
				Error struct{ Message string } `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || code != 400 || !strings.Contains(e.Error.Message, tc.want) {
				t.Errorf("%s %s: %d %s; want 400 with %q", api, tc.body, code, body, tc.want)
			}
		}
	}
	// The same through openai-go: an API error with status 400.
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("x"), option.WithMaxRetries(0))
	_, err := askResponses(false)(t, c, toolReq{user: "hi", choice: "gamma"})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("unknown function through openai-go: %v", err)
	}
}
