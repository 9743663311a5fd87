package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/responses"
)

// TestErrors sends every kind of bad request over raw HTTP and checks the
// status, the OpenAI error body and that nothing stored changed.
func TestErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &envOpts{MaxBodyBytes: 4096})
	ctx := context.Background()
	plain, err := e.client.Responses.New(ctx, responses.ResponseNewParams{Model: "demo.echo", Input: textInput("x")})
	if err != nil {
		t.Fatal(err)
	}
	first, err := e.client.Responses.New(ctx, responses.ResponseNewParams{Model: "demo.approval", Input: textInput("q")})
	if err != nil {
		t.Fatal(err)
	}
	callID := functionCalls(t, first.RawJSON())[0].CallID
	if _, err := e.client.Responses.New(ctx, answerParams(first.ID, callID, "approve")); err != nil {
		t.Fatal(err)
	}
	answerAgain := `{"model":"demo.approval","previous_response_id":"` + first.ID +
		`","input":[{"type":"function_call_output","call_id":"` + callID + `","output":"approve"}]}`
	tests := []struct {
		name, method, path, body string
		status                   int
		code, param              string
	}{
		{"MalformedJSON", "POST", "/v1/responses", `{"model":"demo.echo",`, 400, "invalid_json", ""},
		{"NotAnObject", "POST", "/v1/responses", `["demo.echo"]`, 400, "invalid_json", ""},
		{"MissingModel", "POST", "/v1/responses", `{"input":"x"}`, 400, "missing_required_parameter", "model"},
		{"ModelWrongType", "POST", "/v1/responses", `{"model":1,"input":"x"}`, 400, "invalid_type", "model"},
		{"StreamWrongType", "POST", "/v1/responses", `{"model":"demo.echo","stream":"true"}`, 400, "invalid_type", "stream"},
		{"InputWrongType", "POST", "/v1/responses", `{"model":"demo.echo","input":42}`, 400, "invalid_type", "input"},
		{"MetadataWrongType", "POST", "/v1/responses", `{"model":"demo.echo","metadata":{"a":1}}`, 400, "invalid_type", "metadata.a"},
		{"MetadataValueTooLong", "POST", "/v1/responses", `{"model":"demo.echo","metadata":{"a":"` + strings.Repeat("v", 513) + `"}}`, 400, "invalid_value", "metadata.a"},
		{"BackgroundNoStore", "POST", "/v1/responses", `{"model":"demo.echo","background":true,"store":false}`, 400, "invalid_value", "background"},
		{"UnknownModel", "POST", "/v1/responses", `{"model":"no.such.model","input":"x"}`, 404, "model_not_found", "model"},
		{"UnknownPrevious", "POST", "/v1/responses", `{"model":"demo.approval","previous_response_id":"resp_nope","input":[{"type":"function_call_output","call_id":"c","output":"approve"}]}`, 400, "previous_response_not_found", "previous_response_id"},
		{"ContinuationNotAtHead", "POST", "/v1/responses", answerAgain, 409, "conflict", "previous_response_id"},
		{"Oversize", "POST", "/v1/responses", `{"model":"demo.echo","input":"` + strings.Repeat("x", 5000) + `"}`, 413, "request_too_large", ""},
		{"OversizeGetBody", "GET", "/v1/responses/" + plain.ID, `{"stream":true,"pad":"` + strings.Repeat("x", 5000) + `"}`, 413, "request_too_large", ""},
		{"GetUnknown", "GET", "/v1/responses/resp_nope", "", 404, "not_found", ""},
		{"GetStreamUnknown", "GET", "/v1/responses/resp_nope?stream=true", "", 404, "not_found", ""},
		{"CancelUnknown", "POST", "/v1/responses/resp_nope/cancel", "", 404, "not_found", ""},
		{"DeleteUnknown", "DELETE", "/v1/responses/resp_nope", "", 404, "not_found", ""},
		{"InputItemsUnknown", "GET", "/v1/responses/resp_nope/input_items", "", 404, "not_found", ""},
		{"StreamNonStreamQuery", "GET", "/v1/responses/" + plain.ID + "?stream=true", "", 400, "invalid_value", "stream"},
		{"StreamNonStreamBody", "GET", "/v1/responses/" + plain.ID, `{"stream":true}`, 400, "invalid_value", "stream"},
		{"BadStartingAfter", "GET", "/v1/responses/" + plain.ID + "?stream=true&starting_after=x", "", 400, "invalid_value", "starting_after"},
		{"BadLimit", "GET", "/v1/responses/" + plain.ID + "/input_items?limit=101", "", 400, "invalid_value", "limit"},
		{"BadOrder", "GET", "/v1/responses/" + plain.ID + "/input_items?order=sideways", "", 400, "invalid_value", "order"},
		{"UnknownRoute", "GET", "/v1/nothing", "", 404, "unknown_url", ""},
	}
	for _, tt := range tests {
		before := settledDump(t, e.store)
		resp := e.rawDoNoCT(t, tt.method, tt.path, tt.body)
		body := readAll(t, resp)
		var eb struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &eb); err != nil || resp.StatusCode != tt.status {
			t.Errorf("%s: status %d body %s (decode err %v), want %d", tt.name, resp.StatusCode, body, err, tt.status)
			continue
		}
		got := eb.Error
		if got.Message == "" || got.Type == "" || got.Code == nil || *got.Code != tt.code || deref(got.Param) != tt.param {
			t.Errorf("%s: error %s, want code %q param %q", tt.name, body, tt.code, tt.param)
		}
		if resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: content-type %q", tt.name, resp.Header.Get("Content-Type"))
		}
		requireSameDump(t, before, dumpStore(t, e.store), tt.name)
	}
	if !strings.Contains(string(readAll(t, e.rawDoNoCT(t, "GET", "/v1/responses/resp_nope", ""))), "Response with id 'resp_nope' not found.") {
		t.Error("404 message does not name the id")
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// rawDoNoCT is rawDo without a Content-Type, as openai-go sends GET bodies.
func (e *env) rawDoNoCT(t *testing.T, method, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.apiKey)
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestAuth: without a key or with a wrong one a request is 401; one key's
// responses are invisible (404) to another key on every route.
func TestAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &envOpts{APIKeys: map[string]string{"ka": "alice", "kb": "bob"}, ClientKey: "ka"})
	ctx := context.Background()
	r, err := e.client.Responses.New(ctx, responses.ResponseNewParams{Model: "demo.echo", Input: textInput("mine")})
	if err != nil {
		t.Fatal(err)
	}
	stored := settledDump(t, e.store)
	if len(stored.Responses) != 1 || stored.Responses[0].Owner != "alice" {
		t.Fatalf("stored owner: %s", summarize(stored))
	}
	bob := e.newClient("kb")
	_, err = bob.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	requireStatus(t, err, http.StatusNotFound)
	_, err = bob.Responses.Cancel(ctx, r.ID)
	requireStatus(t, err, http.StatusNotFound)
	requireStatus(t, bob.Responses.Delete(ctx, r.ID), http.StatusNotFound)
	_, err = bob.Responses.InputItems.List(ctx, r.ID, responses.InputItemListParams{})
	requireStatus(t, err, http.StatusNotFound)
	nobody := e.newClient("wrong")
	_, err = nobody.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	if apiErr := requireStatus(t, err, http.StatusUnauthorized); apiErr.Code != "invalid_api_key" {
		t.Errorf("401 code %q", apiErr.Code)
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/models", nil)
	resp, err := e.http.Do(req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no key: %v %v", err, resp.Status)
	}
	resp.Body.Close()
	requireSameDump(t, stored, dumpStore(t, e.store), "requests of another key")
	if got, err := e.client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err != nil || got.OutputText() != "mine" {
		t.Fatalf("owner Get: %v", err)
	}
}
