package agent

import (
	"reflect"
	"testing"
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
