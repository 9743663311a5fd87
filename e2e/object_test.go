package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// requiredResponseFields is OpenResponses' ResponseResource required list
// (responses-api.md §2.1): every one must be present, nullable ones as null.
var requiredResponseFields = strings.Fields(`id object created_at completed_at status incomplete_details model
	previous_response_id instructions output error tools tool_choice truncation parallel_tool_calls text top_p
	presence_penalty frequency_penalty top_logprobs temperature reasoning user usage max_output_tokens max_tool_calls
	store background service_tier metadata safety_identifier prompt_cache_key`)

func requireResponseObject(t *testing.T, where, raw string) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("%s: %v\n%s", where, err, raw)
	}
	for _, f := range requiredResponseFields {
		if _, ok := m[f]; !ok {
			t.Errorf("%s: Response lacks required field %q", where, f)
		}
	}
	var r struct {
		ID     string `json:"id"`
		Object string `json:"object"`
		Output []struct {
			ID, Type, Status string
		} `json:"output"`
	}
	_ = json.Unmarshal([]byte(raw), &r)
	if !strings.HasPrefix(r.ID, "resp_") || r.Object != "response" {
		t.Errorf("%s: id %q object %q", where, r.ID, r.Object)
	}
	for i, it := range r.Output {
		if it.ID == "" || it.Type == "" || it.Status == "" {
			t.Errorf("%s: output item %d lacks id/type/status: %+v", where, i, it)
		}
	}
}

// TestResponseObject_RequiredFields checks every Response the server
// shows (create replies, polls, cancel replies, lifecycle events) for the
// full required field set.
func TestResponseObject_RequiredFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	s := drain(e.client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "demo.approval", Input: textInput("q?"),
		Instructions: openai.String("be brief")}), nil)
	requireLifecycle(t, s, "response.completed")
	for _, ev := range s.Events {
		if strings.HasPrefix(ev.Type, "response.") && ev.Response.ID != "" {
			requireResponseObject(t, ev.Type, ev.Response.RawJSON())
		}
	}
	sync, err := e.client.Responses.New(ctx, responses.ResponseNewParams{Model: "demo.echo", Input: textInput("x")})
	if err != nil {
		t.Fatal(err)
	}
	requireResponseObject(t, "sync create", sync.RawJSON())
	bg, err := e.client.Responses.New(ctx, responses.ResponseNewParams{Model: "demo.silent", Input: textInput("x"),
		Background: openai.Bool(true), Metadata: shared.Metadata{"steps": "100", "step_delay_ms": "20"}})
	if err != nil {
		t.Fatal(err)
	}
	requireResponseObject(t, "background create", bg.RawJSON())
	got, err := e.client.Responses.Get(ctx, bg.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	requireResponseObject(t, "poll", got.RawJSON())
	cancelled, err := e.client.Responses.Cancel(ctx, bg.ID)
	if err != nil {
		t.Fatal(err)
	}
	requireResponseObject(t, "cancel", cancelled.RawJSON())
	if !bg.Background || !got.Background || got.Metadata["steps"] != "100" || s.last().Response.Instructions.OfString != "be brief" {
		t.Errorf("echo fields: background %v/%v metadata %v instructions %q", bg.Background, got.Background, got.Metadata,
			s.last().Response.Instructions.OfString)
	}
}
