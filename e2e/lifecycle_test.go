package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// TestCancel cancels a running background stream: the reply already says
// cancelled, a second cancel answers the same, the stream ends with
// response.cancelled and [DONE], and polling shows cancelled.
func TestCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	head := drain(e.client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "demo.silent", Input: textInput("go"),
		Background: openai.Bool(true), Metadata: shared.Metadata{"steps": "200", "step_delay_ms": "20"}}),
		func(ev responses.ResponseStreamEventUnion) bool { return ev.Type == "response.in_progress" })
	id := head.responseID(t)
	for i := range 2 {
		r, err := e.client.Responses.Cancel(ctx, id)
		if err != nil || r.Status != "cancelled" || r.ID != id {
			t.Fatalf("cancel %d: %v status %q", i+1, err, statusOf(r))
		}
	}
	s := drain(e.client.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{}), nil)
	requireLifecycle(t, s, "response.cancelled")
	if st := s.last().Response.Status; st != "cancelled" {
		t.Fatalf("response.cancelled carries status %q", st)
	}
	if slices.Contains(s.types(), "response.output_text.done") {
		t.Fatalf("cancelled run produced its output: %v", s.types())
	}
	raw := e.rawDo(t, "GET", "/v1/responses/"+id+"?stream=true", "", nil)
	defer raw.Body.Close()
	frames := readFrames(t, raw.Body)
	if n := len(frames); n < 2 || frames[n-2].event != "response.cancelled" || frames[n-1].data != "[DONE]" {
		t.Fatalf("raw stream does not end with response.cancelled, [DONE]: %+v", frames[max(0, len(frames)-2):])
	}
	if r := e.waitTerminal(id); r.Status != "cancelled" {
		t.Fatalf("poll after cancel: %q", r.Status)
	}
	// Cancelling a finished response returns it unchanged.
	done, err := e.client.Responses.New(ctx, responses.ResponseNewParams{Model: "demo.echo", Input: textInput("x")})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := e.client.Responses.Cancel(ctx, done.ID); err != nil || r.Status != "completed" || r.OutputText() != "x" {
		t.Fatalf("cancel of a completed response: %v %q", err, statusOf(r))
	}
}

func statusOf(r *responses.Response) string {
	if r == nil {
		return "<nil>"
	}
	return string(r.Status)
}

func TestDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	r, err := e.client.Responses.New(ctx, responses.ResponseNewParams{Model: "demo.echo", Input: textInput("bye")})
	if err != nil {
		t.Fatal(err)
	}
	raw := e.rawDo(t, "DELETE", "/v1/responses/"+r.ID, "", nil)
	var body map[string]any
	_ = json.NewDecoder(raw.Body).Decode(&body)
	raw.Body.Close()
	if raw.StatusCode != 200 || body["id"] != r.ID || body["object"] != "response" || body["deleted"] != true {
		t.Fatalf("delete reply %d %v", raw.StatusCode, body)
	}
	requireStatus(t, e.client.Responses.Delete(ctx, r.ID), http.StatusNotFound)
	_, err = e.client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	requireStatus(t, err, http.StatusNotFound)
	_, err = e.client.Responses.InputItems.List(ctx, r.ID, responses.InputItemListParams{})
	requireStatus(t, err, http.StatusNotFound)
	if d := dumpStore(t, e.store); len(d.Responses) != 0 || len(d.Runs) != 0 {
		t.Fatalf("store still holds %s", summarize(d))
	}
}

func TestInputItems_Paging(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	var items responses.ResponseInputParam
	var want []string
	for i := range 25 {
		text := fmt.Sprintf("line %02d", i)
		want = append(want, text)
		items = append(items, responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser))
	}
	r, err := e.client.Responses.New(ctx, responses.ResponseNewParams{Model: "demo.echo",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items}})
	if err != nil {
		t.Fatal(err)
	}
	if r.OutputText() != strings.Join(want, "\n") {
		t.Fatalf("echo of items: %q", r.OutputText())
	}
	list := func(order responses.InputItemListParamsOrder) ([]string, []string) {
		pager := e.client.Responses.InputItems.ListAutoPaging(ctx, r.ID, responses.InputItemListParams{Limit: openai.Int(7), Order: order})
		var texts, ids []string
		for pager.Next() {
			it := pager.Current()
			if it.Type != "message" || it.Role != "user" || it.ID == "" || len(it.Content.OfInputItemContentList) != 1 {
				t.Fatalf("item %+v", it.RawJSON())
			}
			texts = append(texts, it.Content.OfInputItemContentList[0].Text)
			ids = append(ids, it.ID)
		}
		if err := pager.Err(); err != nil {
			t.Fatalf("paging: %v", err)
		}
		return texts, ids
	}
	asc, ascIDs := list(responses.InputItemListParamsOrderAsc)
	if !slices.Equal(asc, want) {
		t.Fatalf("asc items %q", asc)
	}
	desc, descIDs := list("")
	slices.Reverse(desc)
	slices.Reverse(descIDs)
	if !slices.Equal(desc, want) || !slices.Equal(descIDs, ascIDs) {
		t.Fatalf("default (desc) order gave %q / ids %v vs %v", desc, descIDs, ascIDs)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(ascIDs)))) != 25 {
		t.Fatalf("ids not unique: %v", ascIDs)
	}
	raw := e.rawDo(t, "GET", "/v1/responses/"+r.ID+"/input_items?limit=10", "", nil)
	var page struct {
		Object          string
		Data            []struct{ ID string }
		FirstID, LastID string `json:"-"`
		HasMore         bool   `json:"has_more"`
	}
	var ids struct {
		FirstID string `json:"first_id"`
		LastID  string `json:"last_id"`
	}
	body := readAll(t, raw)
	if json.Unmarshal(body, &page) != nil || json.Unmarshal(body, &ids) != nil || page.Object != "list" || len(page.Data) != 10 ||
		!page.HasMore || ids.FirstID != descIDs[24] || ids.LastID != descIDs[15] {
		t.Fatalf("first page: %s", body)
	}
}

// TestApproval_RoundTrip: the demo asks through a function_call item; a
// follow-up answers it and continues the same run. Answering an old
// response again is a 409 that changes nothing.
func TestApproval_RoundTrip(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ answer, want string }{{"approve", "approved"}, {"reject", "rejected"}} {
		t.Run(tt.answer, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			ctx := context.Background()
			first, err := e.client.Responses.New(ctx, responses.ResponseNewParams{Model: "demo.approval", Input: textInput("ship it?")})
			if err != nil {
				t.Fatal(err)
			}
			calls := functionCalls(t, first.RawJSON())
			if first.Status != "completed" || len(calls) != 1 || calls[0].Name != "approve" || calls[0].CallID == "" {
				t.Fatalf("first turn %q calls %+v", first.Status, calls)
			}
			var args map[string]string
			if err := json.Unmarshal([]byte(calls[0].Arguments), &args); err != nil || args["question"] != "ship it?" {
				t.Fatalf("arguments %q", calls[0].Arguments)
			}
			second, err := e.client.Responses.New(ctx, answerParams(first.ID, calls[0].CallID, tt.answer))
			if err != nil {
				t.Fatal(err)
			}
			if second.Status != "completed" || second.OutputText() != tt.want || second.PreviousResponseID != first.ID {
				t.Fatalf("second turn %q %q prev %q", second.Status, second.OutputText(), second.PreviousResponseID)
			}
			before := settledDump(t, e.store)
			_, err = e.client.Responses.New(ctx, answerParams(first.ID, calls[0].CallID, tt.answer))
			requireStatus(t, err, http.StatusConflict)
			requireSameDump(t, before, dumpStore(t, e.store), "a continuation that is not at the head")
		})
	}
}

func answerParams(prev, callID, answer string) responses.ResponseNewParams {
	out := responses.ResponseInputItemParamOfFunctionCallOutput(answer)
	out.OfFunctionCallOutput.CallID = openai.String(callID)
	return responses.ResponseNewParams{Model: "demo.approval", PreviousResponseID: openai.String(prev),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}}
}

// TestDemos_Outputs runs each demo as a stream, hosted natively and as an
// agent, and checks its message items in the stream and in the final
// Response, and that both hostings stream the same events.
func TestDemos_Outputs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	tests := []struct {
		model string
		meta  shared.Metadata
		want  []string
	}{
		{"demo.echo", nil, []string{"abc"}},
		{"demo.two-outputs", nil, []string{"first-2", "second-2", "done"}},
		{"demo.silent", shared.Metadata{"steps": "2"}, []string{"done after 2"}},
		{"demo.silent", nil, []string{"done after 5"}},
		{"demo.fanout", shared.Metadata{"workers": "3"}, []string{"worker-0,worker-1,worker-2"}},
		{"demo.fanout", nil, []string{"worker-0,worker-1,worker-2,worker-3"}},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			t.Parallel()
			{
				model := tt.model
				s := drain(e.client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
					Model: model, Input: textInput("abc"), Metadata: tt.meta}), nil)
				requireLifecycle(t, s, "response.completed")
				if got := streamTexts(s); !slices.Equal(got, tt.want) {
					t.Fatalf("%s streamed %q, want %q", model, got, tt.want)
				}
				if got := outputTexts(t, s.last().Response.RawJSON()); !slices.Equal(got, tt.want) {
					t.Fatalf("%s final output %q, want %q", model, got, tt.want)
				}
			}
		})
	}
}

func TestModels(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	page, err := e.client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	for _, want := range []string{"demo.echo", "demo.two-outputs", "demo.silent", "demo.approval", "demo.fanout"} {
		if !slices.Contains(ids, want) {
			t.Errorf("models %v lack %s", ids, want)
		}
	}
	if m, err := e.client.Models.Get(context.Background(), "demo.echo"); err != nil || m.ID != "demo.echo" {
		t.Errorf("Models.Get: %v %+v", err, m)
	}
}

// requireStatus fails unless err is an *openai.Error with status.
func requireStatus(t *testing.T, err error, status int) *openai.Error {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != status {
		t.Fatalf("error %v, want an API error with status %d", err, status)
	}
	if apiErr.Message == "" || apiErr.Type == "" {
		t.Fatalf("error body lacks message/type: %s", apiErr.RawJSON())
	}
	return apiErr
}
