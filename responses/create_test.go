package responses

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHandleCreate_AmbiguousKeys (issue 12 #15): a request a
// case-insensitive reader would read differently is an OpenAI-format 400
// naming the key, before the host is asked (this server has none, so
// nothing can be stored).
func TestHandleCreate_AmbiguousKeys(t *testing.T) {
	t.Parallel()
	o := (&Options{}).withDefaults()
	s := &server{opts: o, log: o.Logger}
	for body, param := range map[string]string{
		`{"model":"demo.approval","previous_response_id":"resp_1","input":[{"type":"function_call_output","call_id":"c","output":"approve"}],
			"Input":[{"type":"function_call_output","call_id":"c","output":"reject"}]}`: "Input",
		`{"model":"demo.approval","previous_response_id":"resp_1","input":[{"type":"function_call_output","call_id":"c","output":"approve","OUTPUT":"reject"}]}`: "input[0].OUTPUT",
		`{"model":"demo.echo","input":"x","STREAM":true}`: "STREAM",
	} {
		rec := httptest.NewRecorder()
		s.handleCreate(rec, httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(body)))
		checkError(t, rec, http.StatusBadRequest, param, "unknown_parameter")
	}
}

func checkError(t *testing.T, rec *httptest.ResponseRecorder, status int, param, code string) {
	t.Helper()
	var got errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if rec.Code != status || got.Error.Param == nil || *got.Error.Param != param ||
		got.Error.Code == nil || *got.Error.Code != code || got.Error.Type != typeInvalidRequest || got.Error.Message == "" {
		t.Fatalf("reply %d %s, want %d param %q code %q", rec.Code, rec.Body, status, param, code)
	}
}

// TestHandleCreate_InputItemsCap: past Options.MaxInputItems a create
// request is a 400 naming "input", before the host is asked (this server
// has none); the default cap is MaxInputItemsDefault.
func TestHandleCreate_InputItemsCap(t *testing.T) {
	t.Parallel()
	if got := (&Options{}).withDefaults().MaxInputItems; got != MaxInputItemsDefault || MaxInputItemsDefault != 10_000 {
		t.Fatalf("default MaxInputItems %d", got)
	}
	o := (&Options{MaxInputItems: 2}).withDefaults()
	s := &server{opts: o, log: o.Logger}
	body := `{"model":"demo.echo","input":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":"c"}]}`
	rec := httptest.NewRecorder()
	s.handleCreate(rec, httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(body)))
	checkError(t, rec, http.StatusBadRequest, "input", "array_above_max_length")
}
