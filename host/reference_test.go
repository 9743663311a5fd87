package host_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
)

// refOwner is the owner the item_reference tests create as.
const refOwner = "alice"

// refCreate creates a response from a raw request body as owner, as the
// HTTP layer does, and waits for its end.
func refCreate(t *testing.T, h *host.Host, owner, body string) (*store.Response, error) {
	t.Helper()
	req, err := protocol.ParseCreate([]byte(body), 0)
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	r, err := h.Create(testCtx(t), &host.CreateParams{Model: req.Model, Request: []byte(body), Input: req.Input,
		Metadata: req.Metadata, Background: true, Store: true, Owner: owner, PreviousResponseID: req.PreviousResponseID})
	if err != nil {
		return nil, err
	}
	done, err := h.Wait(testCtx(t), r.ID, owner)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != store.StatusCompleted {
		t.Fatalf("%s: status %s", body, done.Status)
	}
	return done, nil
}

// refOutput is the output of a finished response: its items and usage.
type refOutput struct {
	Output []protocol.Item `json:"output"`
	Usage  struct {
		InputTokens int64 `json:"input_tokens"`
	} `json:"usage"`
}

func outputOf(t *testing.T, r *store.Response) refOutput {
	t.Helper()
	var o refOutput
	if err := json.Unmarshal(r.Snapshot, &o); err != nil {
		t.Fatal(err)
	}
	return o
}

func lastText(t *testing.T, o refOutput) string {
	t.Helper()
	if len(o.Output) == 0 || o.Output[len(o.Output)-1].Type != "message" {
		t.Fatalf("output %+v ends with no message", o.Output)
	}
	return o.Output[len(o.Output)-1].Content[0].Text
}

// recordedInput returns the input the host recorded for a response.
func recordedInput(t *testing.T, s store.Store, id string) []host.InputItem {
	t.Helper()
	r, err := s.ResponseGet(testCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	var in []host.InputItem
	if err := json.Unmarshal(r.Input, &in); err != nil {
		t.Fatal(err)
	}
	return in
}

// item_reference input items are resolved at create to the output items
// of the owner's stored responses they name: an assistant message, an
// mcp_call with its output, a function_call (so that its
// function_call_output answers a call in the same input). The recorded
// input holds the resolved items, the stored request the references, and
// the model is sent what it would be sent for the items resent whole.
func TestHost_ItemReference(t *testing.T) {
	t.Parallel()
	m := newLLMModels(t)
	b, _ := llmSetup(t, m)
	h := b.host

	// An assistant message and an mcp_call with its output.
	first, err := refCreate(t, h, refOwner, `{"model":"plain:llm.tools","input":"please lookup {\"q\":\"x\"}"}`)
	if err != nil {
		t.Fatal(err)
	}
	out := outputOf(t, first).Output
	if len(out) != 2 || out[0].Type != "mcp_call" || out[1].Type != "message" {
		t.Fatalf("first output %+v", out)
	}
	byRef, err := refCreate(t, h, refOwner, fmt.Sprintf(`{"model":"plain:llm.tools","input":[
		{"role":"user","content":"please lookup {\"q\":\"x\"}"},
		{"type":"item_reference","id":%q},{"type":"item_reference","id":%q},{"role":"user","content":"thanks"}]}`,
		out[0].ID, out[1].ID))
	if err != nil {
		t.Fatal(err)
	}
	whole, err := refCreate(t, h, refOwner, fmt.Sprintf(`{"model":"plain:llm.tools","input":[
		{"role":"user","content":"please lookup {\"q\":\"x\"}"},
		{"type":"mcp_call","id":%q,"server_label":"superstep","name":"lookup","arguments":"{\"q\":\"x\"}","output":"found x"},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Tool lookup returned: found x"}]},
		{"role":"user","content":"thanks"}]}`, out[0].ID))
	if err != nil {
		t.Fatal(err)
	}
	refOut, wholeOut := outputOf(t, byRef), outputOf(t, whole)
	if got := lastText(t, refOut); got != "Echo: thanks" {
		t.Fatalf("by reference: %q", got)
	}
	if refOut.Usage.InputTokens != wholeOut.Usage.InputTokens {
		t.Fatalf("input tokens by reference %d, resent whole %d", refOut.Usage.InputTokens, wholeOut.Usage.InputTokens)
	}
	want := []host.InputItem{{Type: "message", Role: "user", Text: `please lookup {"q":"x"}`},
		{Type: "mcp_call", CallID: out[0].ID, Name: "lookup", Arguments: `{"q":"x"}`, Output: "found x"},
		{Type: "message", Role: "assistant", Text: "Tool lookup returned: found x"},
		{Type: "message", Role: "user", Text: "thanks"}}
	if got := recordedInput(t, b.store, byRef.ID); !reflect.DeepEqual(got, want) {
		t.Fatalf("recorded input %+v\nwant %+v", got, want)
	}
	if got := recordedInput(t, b.store, whole.ID); !reflect.DeepEqual(got, want) {
		t.Fatalf("recorded input resent whole %+v\nwant %+v", got, want)
	}
	if raw, err := protocol.ReadInput(byRef.Request); err != nil || raw[1].Type != "item_reference" || raw[1].ID != out[0].ID {
		t.Fatalf("stored request reads %+v %v: the references are kept", raw, err)
	}

	// A function_call of a client tool, answered in a stateless request:
	// the reference stands for the call the output answers.
	call, err := refCreate(t, h, refOwner, `{"model":"plain:llm.tools","input":"where is my order?","tools":[`+orderTool+`],
		"tool_choice":{"type":"function","name":"lookup_order"}}`)
	if err != nil {
		t.Fatal(err)
	}
	fc := outputOf(t, call).Output
	if len(fc) != 1 || fc[0].Type != "function_call" {
		t.Fatalf("call output %+v", fc)
	}
	answered, err := refCreate(t, h, refOwner, fmt.Sprintf(`{"model":"plain:llm.tools","tools":[%s],"input":[
		{"role":"user","content":"where is my order?"},{"type":"item_reference","id":%q},
		{"type":"function_call_output","call_id":%q,"output":"shipped"}]}`, orderTool, fc[0].ID, fc[0].CallID))
	if err != nil {
		t.Fatal(err)
	}
	if got := lastText(t, outputOf(t, answered)); got != "Tool lookup_order returned: shipped" {
		t.Fatalf("answer: %q", got)
	}
	if got := recordedInput(t, b.store, answered.ID)[1]; !reflect.DeepEqual(got, host.InputItem{Type: "function_call",
		CallID: fc[0].CallID, Name: "lookup_order", Arguments: fc[0].Arguments}) {
		t.Fatalf("resolved call %+v", got)
	}

	// With previous_response_id, a reference is resolved as well.
	next, err := refCreate(t, h, refOwner, fmt.Sprintf(`{"model":"plain:llm.tools","previous_response_id":%q,
		"input":[{"type":"item_reference","id":%q},{"role":"user","content":"more"}]}`, byRef.ID, out[1].ID))
	if err != nil {
		t.Fatal(err)
	}
	if got := recordedInput(t, b.store, next.ID)[0]; got.Type != "message" || got.Role != "assistant" ||
		got.Text != "Tool lookup returned: found x" {
		t.Fatalf("resolved message %+v", got)
	}
}

// A reference the owner cannot resolve is an InputError on input[i].id,
// invalid_value, naming the id, and nothing is stored: another owner's
// response (as a missing one), a missing or deleted response, an index out
// of range, an id whose prefix is not the item's type, an id no response
// makes.
func TestHost_ItemReferenceRefused(t *testing.T) {
	t.Parallel()
	m := newLLMModels(t)
	b, _ := llmSetup(t, m)
	h := b.host
	first, err := refCreate(t, h, refOwner, `{"model":"plain:llm.tools","input":"hello"}`)
	if err != nil {
		t.Fatal(err)
	}
	msg := protocol.MessageID(first.ID, 0)
	gone, err := refCreate(t, h, refOwner, `{"model":"plain:llm.tools","input":"bye"}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Delete(testCtx(t), gone.ID, refOwner); err != nil {
		t.Fatal(err)
	}
	counts := func() (int, int) {
		rs, err := b.store.RunList(testCtx(t), &store.RunListParams{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range rs {
			ids, err := b.store.ResponseListByRun(testCtx(t), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			n += len(ids)
		}
		return len(rs), n
	}
	runs, resps := counts()
	for _, c := range []struct{ owner, id string }{
		{"bob", msg},
		{refOwner, protocol.MessageID(gone.ID, 0)},
		{refOwner, "msg_0123456789abcdef0123456789abcdef_0"},
		{refOwner, protocol.MessageID(first.ID, 1)},
		{refOwner, protocol.FunctionCallID(first.ID, 0)},
		{refOwner, protocol.ToolCallID(first.ID, 0)},
		{refOwner, "rs_abc_0"},
		{refOwner, "hello"},
	} {
		for _, prev := range []string{"", first.ID} {
			if prev != "" && c.owner != refOwner {
				continue
			}
			body := fmt.Sprintf(`{"model":"plain:llm.tools","input":[{"role":"user","content":"hi"},{"type":"item_reference","id":%q}]}`, c.id)
			if prev != "" {
				body = fmt.Sprintf(`{"model":"plain:llm.tools","previous_response_id":%q,"input":[{"role":"user","content":"hi"},
					{"type":"item_reference","id":%q}]}`, prev, c.id)
			}
			_, err := refCreate(t, h, c.owner, body)
			ie, ok := errors.AsType[*host.InputError](err)
			if !ok || ie.Param != "input[1].id" || ie.Code != "invalid_value" || !strings.Contains(ie.Message, c.id) {
				t.Errorf("%s referencing %s (previous %q): %v, want an InputError on input[1].id naming it", c.owner, c.id, prev, err)
			}
			if r, n := counts(); r != runs || n != resps {
				t.Errorf("%s referencing %s: %d runs and %d responses stored, %d and %d before", c.owner, c.id, r, n, runs, resps)
			}
		}
	}
	// The owner's own reference resolves.
	if _, err := refCreate(t, h, refOwner, fmt.Sprintf(`{"model":"plain:llm.tools","input":[{"type":"item_reference","id":%q},
		{"role":"user","content":"hi"}]}`, msg)); err != nil {
		t.Fatal(err)
	}
}

// Recovery runs the resolved input: a response whose first superstep
// crashed before its commit is resumed from its recorded input, even when
// the response its references named has been deleted since.
func TestHost_ItemReference_Recovered(t *testing.T) {
	t.Parallel()
	m := newLLMModels(t)
	path := filepath.Join(t.TempDir(), "superstep.db")
	db := testDB{name: "sqlite", open: func(t *testing.T) store.Store { return openStore(t, path) }}
	var armed atomic.Bool
	inc := startIncarnation(t, db, host.Config{}, m.register, func(f *host.Fault) bool {
		return armed.Load() && f.Point == host.FaultCommitBefore && f.Step == 1
	})
	first, err := refCreate(t, inc.h, refOwner, `{"model":"plain:llm.tools","input":"please lookup {\"q\":\"x\"}"}`)
	if err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	body := fmt.Sprintf(`{"model":"plain:llm.tools","input":[{"role":"user","content":"please lookup {\"q\":\"x\"}"},
		{"type":"item_reference","id":%q},{"type":"item_reference","id":%q},{"role":"user","content":"thanks"}]}`,
		protocol.ToolCallID(first.ID, 0), protocol.MessageID(first.ID, 1))
	req, err := protocol.ParseCreate([]byte(body), 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := inc.h.Create(testCtx(t), &host.CreateParams{Model: req.Model, Request: []byte(body), Input: req.Input,
		Background: true, Store: true, Owner: refOwner})
	if err != nil {
		t.Fatal(err)
	}
	inc.crashed()
	s := db.open(t)
	if err := s.ResponseDelete(testCtx(t), first.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	inc2 := startIncarnation(t, db, host.Config{}, m.register, nil)
	done, err := inc2.h.Wait(testCtx(t), r.ID, refOwner)
	if err != nil || done.Status != store.StatusCompleted {
		t.Fatalf("after recovery: %v %v", done, err)
	}
	if got := lastText(t, outputOf(t, done)); got != "Echo: thanks" {
		t.Fatalf("answer after recovery %q", got)
	}
	// The model was sent turn 1 whole: the same as for the items resent.
	whole, err := refCreate(t, inc2.h, refOwner, fmt.Sprintf(`{"model":"plain:llm.tools","input":[
		{"role":"user","content":"please lookup {\"q\":\"x\"}"},
		{"type":"mcp_call","id":%q,"server_label":"superstep","name":"lookup","arguments":"{\"q\":\"x\"}","output":"found x"},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Tool lookup returned: found x"}]},
		{"role":"user","content":"thanks"}]}`, protocol.ToolCallID(first.ID, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := outputOf(t, done).Usage.InputTokens, outputOf(t, whole).Usage.InputTokens; a != b {
		t.Fatalf("input tokens after recovery %d, resent whole %d", a, b)
	}
}
