package e2e

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/host"
)

// historyAgent answers with the history it was given: "role:text" of each
// message, joined by "|".
var historyAgent = agent.AgentFunc(func(ctx context.Context, s *agent.Session, in []agent.Message) iter.Seq2[agent.Update, error] {
	return func(yield func(agent.Update, error) bool) {
		var texts []string
		for _, m := range in {
			texts = append(texts, string(m.Role)+":"+m.Text)
		}
		yield(agent.Update{Kind: agent.UpdateText, Text: strings.Join(texts, "|")}, nil)
	}
})

func newConversationEnv(t *testing.T) *env {
	t.Helper()
	return newEnv(t, &envOpts{
		Register:  func(h *host.Host) error { return h.RegisterAgent("history", historyAgent) },
		APIKeys:   map[string]string{"key-a": "alice", "key-b": "bob"},
		ClientKey: "key-a",
	})
}

// itemText is a conversation item as "role:text" (a message) or its type.
func itemText(it conversations.ConversationItemUnion) string {
	if it.Type != "message" {
		return it.Type
	}
	var texts []string
	for _, c := range it.Content.OfMessageContentArray {
		texts = append(texts, c.Text)
	}
	return it.Role + ":" + strings.Join(texts, "")
}

// The Conversations API through openai-go's own client: create a
// conversation, two turns naming it, list its items (each turn's input
// then output, in order, paged), delete an item, and a third turn sees the
// history without it. Another key sees none of it.
func TestConversations_OpenAIGo(t *testing.T) {
	t.Parallel()
	e := newConversationEnv(t)
	ctx := context.Background()
	c := e.client
	conv, err := c.Conversations.New(ctx, conversations.ConversationNewParams{
		Metadata: shared.Metadata{"topic": "demo"},
		Items: []responses.ResponseInputItemUnionParam{
			responses.ResponseInputItemParamOfMessage("be brief", responses.EasyInputMessageRoleSystem)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(conv.ID, "conv_") || !strings.Contains(conv.RawJSON(), `"topic":"demo"`) {
		t.Fatalf("conversation %s", conv.RawJSON())
	}
	turn := func(text string) *responses.Response {
		t.Helper()
		r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "history", Input: textInput(text),
			Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}})
		if err != nil {
			t.Fatalf("turn %q: %v", text, err)
		}
		if r.Status != "completed" || r.Conversation.ID != conv.ID {
			t.Fatalf("turn %q: %s", text, r.RawJSON())
		}
		return r
	}
	r1 := turn("hi")
	if got := r1.OutputText(); got != "system:be brief|user:hi" {
		t.Fatalf("turn 1 saw %q", got)
	}
	r2 := turn("again")
	if got := r2.OutputText(); got != "system:be brief|user:hi|assistant:system:be brief|user:hi|user:again" {
		t.Fatalf("turn 2 saw %q", got)
	}
	list := func() []conversations.ConversationItemUnion {
		t.Helper()
		var out []conversations.ConversationItemUnion
		pager := c.Conversations.Items.ListAutoPaging(ctx, conv.ID, conversations.ItemListParams{
			Order: conversations.ItemListParamsOrderAsc, Limit: openai.Int(2)})
		for pager.Next() {
			out = append(out, pager.Current())
		}
		if err := pager.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	items := list()
	var texts []string
	for _, it := range items {
		texts = append(texts, itemText(it))
	}
	want := []string{"system:be brief", "user:hi", "assistant:system:be brief|user:hi", "user:again", "assistant:" + r2.OutputText()}
	if !slices.Equal(texts, want) {
		t.Fatalf("items %q, want %q", texts, want)
	}
	if items[2].ID != r1.Output[0].ID {
		t.Fatalf("turn 1's output item is %s in the conversation, %s in the response", items[2].ID, r1.Output[0].ID)
	}
	got, err := c.Conversations.Items.Get(ctx, conv.ID, items[1].ID, conversations.ItemGetParams{})
	if err != nil || itemText(*got) != "user:hi" {
		t.Fatalf("Items.Get: %v %v", got, err)
	}
	after, err := c.Conversations.Items.Delete(ctx, conv.ID, items[2].ID)
	if err != nil || after.ID != conv.ID {
		t.Fatalf("Items.Delete: %v %v", after, err)
	}
	r3 := turn("third")
	if got := r3.OutputText(); got != "system:be brief|user:hi|user:again|assistant:"+r2.OutputText()+"|user:third" {
		t.Fatalf("turn 3 saw %q", got)
	}
	if n := len(list()); n != 6 {
		t.Fatalf("%d items after turn 3, want 6", n)
	}

	// Metadata update; another key's view; delete.
	up, err := c.Conversations.Update(ctx, conv.ID, conversations.ConversationUpdateParams{Metadata: shared.Metadata{"topic": "other"}})
	if err != nil || !strings.Contains(up.RawJSON(), `"topic":"other"`) {
		t.Fatalf("Update: %v %v", up, err)
	}
	bob := e.newClient("key-b")
	var apiErr *openai.Error
	if _, err := bob.Conversations.Get(ctx, conv.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("another key's Get: %v", err)
	}
	_, err = bob.Responses.New(ctx, responses.ResponseNewParams{Model: "history", Input: textInput("x"),
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Param != "conversation" {
		t.Fatalf("another key's turn: %v", err)
	}
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "history", Input: textInput("x"),
		PreviousResponseID: openai.String(r3.ID), Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		t.Fatalf("conversation with previous_response_id: %v", err)
	}
	if n := len(list()); n != 6 {
		t.Fatalf("%d items after refused turns, want 6", n)
	}
	del, err := c.Conversations.Delete(ctx, conv.ID)
	if err != nil || !del.Deleted || del.ID != conv.ID || string(del.Object) != "conversation.deleted" {
		t.Fatalf("Delete: %v %v", del, err)
	}
	if _, err := c.Conversations.Get(ctx, conv.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("Get after delete: %v", err)
	}
}

// Bad input to the Conversations API is an OpenAI-format 400 (or 404) and
// stores nothing.
func TestConversations_BadInput(t *testing.T) {
	t.Parallel()
	e := newConversationEnv(t)
	before := dumpStore(t, e.store)
	tooMany := `{"items":[` + strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"x"},`, 21), ",") + `]}`
	for _, tc := range []struct {
		method, path, body string
		status             int
		param              string
	}{
		{"POST", "/v1/conversations", tooMany, 400, "items"},
		{"POST", "/v1/conversations", `{"items":[{"type":"bogus"}]}`, 400, "items[0].type"},
		{"POST", "/v1/conversations", `{"items":[{"role":"robot","content":"x"}]}`, 400, "items[0].role"},
		{"POST", "/v1/conversations", `{"items":{}}`, 400, "items"},
		{"POST", "/v1/conversations", `{"metadata":{"k":1}}`, 400, "metadata.k"},
		{"POST", "/v1/conversations", `[1]`, 400, ""},
		{"GET", "/v1/conversations/conv_nope", "", 404, ""},
		{"GET", "/v1/conversations/bad%20id", "", 404, ""},
		{"POST", "/v1/conversations/conv_nope/items", `{"items":[{"role":"user","content":"x"}]}`, 404, ""},
		{"POST", "/v1/responses", `{"model":"history","input":"x","conversation":"conv_nope"}`, 404, "conversation"},
		{"POST", "/v1/responses", `{"model":"history","input":"x","conversation":"nope"}`, 400, "conversation"},
		{"POST", "/v1/responses", `{"model":"history","input":"x","conversation":{"ID":"conv_x"}}`, 400, "conversation.ID"},
		{"POST", "/v1/responses", `{"model":"demo.approval","input":[{"type":"function_call_output","call_id":"call_unknown","output":"approve"}]}`, 400, "input[0].call_id"},
	} {
		req, _ := http.NewRequest(tc.method, e.srv.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer key-a")
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		if resp.StatusCode != tc.status || !strings.Contains(string(body), `"param":`+jsonParam(tc.param)) {
			t.Errorf("%s %s %s: %d %s, want %d with param %q", tc.method, tc.path, tc.body, resp.StatusCode, body, tc.status, tc.param)
		}
	}
	requireSameDump(t, before, dumpStore(t, e.store), "after refused requests")
}

func jsonParam(p string) string {
	if p == "" {
		return "null"
	}
	return `"` + p + `"`
}

// A stateless client answers a workflow's request with a
// function_call_output naming only its call_id: the run continues (the
// new response names the one it continues); another key's answer to the
// same call is a 400 naming input[0].call_id and changes nothing.
func TestAnswerByCallID_OpenAIGo(t *testing.T) {
	t.Parallel()
	e := newConversationEnv(t)
	ctx := context.Background()
	first, err := e.client.Responses.New(ctx, responses.ResponseNewParams{Model: "demo.approval", Input: textInput("deploy?")})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Output) != 1 || first.Output[0].Type != "function_call" {
		t.Fatalf("first response: %s", first.RawJSON())
	}
	callID := first.Output[0].CallID
	answer := func(c openai.Client) (*responses.Response, error) {
		out := responses.ResponseInputItemParamOfFunctionCallOutput("approve")
		out.OfFunctionCallOutput.CallID = openai.String(callID)
		return c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo.approval",
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}})
	}
	before := dumpStore(t, e.store)
	var apiErr *openai.Error
	if _, err := answer(e.newClient("key-b")); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest ||
		apiErr.Param != "input[0].call_id" {
		t.Fatalf("another key's answer: %v", err)
	}
	requireSameDump(t, before, dumpStore(t, e.store), "after another key's answer")
	second, err := answer(e.client)
	if err != nil {
		t.Fatal(err)
	}
	if second.PreviousResponseID != first.ID || second.OutputText() != "approved" {
		t.Fatalf("the answer: %s", second.RawJSON())
	}
}
