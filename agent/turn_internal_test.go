package agent

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// A replayed conversation: the assistant's function calls join the
// assistant item before them, their outputs become tool results paired by
// call id; an output of a call not in the conversation stays user text.
func TestFromMessages_ReplayedCalls(t *testing.T) {
	got := fromMessages(nil, []Message{
		{Role: RoleUser, Text: "weather?"},
		{Role: RoleAssistant, Text: "Let me look."},
		{Role: RoleAssistant, CallID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`},
		{Role: RoleAssistant, CallID: "call_2", Name: "time", Arguments: `{}`},
		{Role: RoleTool, CallID: "call_1", Text: "20C"},
		{Role: RoleTool, CallID: "call_2", Text: "noon"},
		{Role: RoleTool, CallID: "call_x", Text: "stray"},
		{Role: RoleAssistant, CallID: "call_3", Name: "again", Arguments: `{}`},
	})
	want := []convItem{
		{role: RoleUser, text: "weather?"},
		{role: RoleAssistant, text: "Let me look.", calls: []toolCall{{ID: "call_1", Name: "weather", Args: `{"city":"Paris"}`}, {ID: "call_2", Name: "time", Args: `{}`}}},
		{role: RoleTool, callID: "call_1", text: "20C"},
		{role: RoleTool, callID: "call_2", text: "noon"},
		{role: RoleUser, text: "Output of call call_x: stray"},
		{role: RoleAssistant, calls: []toolCall{{ID: "call_3", Name: "again", Args: `{}`}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

// contextOverflow knows the context-window refusals of OpenAI (by code,
// also in a streamed failure), vLLM and llama.cpp's server (by message),
// and nothing else.
func TestContextOverflow(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&openai.Error{StatusCode: 400, Code: "context_length_exceeded", Message: "Your input exceeds the context window of this model."}, true},
		{fmt.Errorf("responses: response failed: context_length_exceeded: too long"), true},
		{&openai.Error{StatusCode: 400, Message: "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens."}, true},
		{&openai.Error{StatusCode: 400, Message: "the request exceeds the available context size, try increasing it"}, true},
		{&openai.Error{StatusCode: 400, Message: "Invalid value for 'temperature'."}, false},
		{&openai.Error{StatusCode: 500, Message: "maximum context length of the cache"}, false},
		{errors.New("connection reset by peer"), false},
	} {
		if got := contextOverflow(serverError("chat completions", tc.err)); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.err, got, tc.want)
		}
	}
}

// serverError keeps the server's message and code, and the error's type.
func TestServerError(t *testing.T) {
	apiErr := &openai.Error{StatusCode: 400, Code: "invalid_value", Message: "Unknown model 'x'."}
	err := serverError("chat completions", apiErr)
	var got *openai.Error
	if !errors.As(err, &got) || !strings.Contains(err.Error(), "Unknown model 'x'. (code invalid_value)") {
		t.Fatalf("%v", err)
	}
}
