package responses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
)

func TestToAPIError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		err    error
		status int
		code   string
		param  string
	}{
		{"NotFound", fmt.Errorf("x: %w", store.ErrNotFound), 404, "not_found", ""},
		{"ResponseNotFound", mapNotFound(fmt.Errorf("x: %w", store.ErrNotFound), "resp_1"), 404, "not_found", ""},
		{"Conflict", fmt.Errorf("x: %w", store.ErrConflict), 409, "conflict", ""},
		{"Model", fmt.Errorf("x: %w", host.ErrModelNotFound), 404, "model_not_found", "model"},
		{"Input", &host.InputError{Param: "input", Code: "invalid_value", Message: "bad"}, 400, "invalid_value", "input"},
		{"BodyTimeout", fmt.Errorf("read: %w", &bodyTimeoutError{limit: time.Second}), 408, "request_timeout", ""},
		{"TooLarge", fmt.Errorf("read: %w", &http.MaxBytesError{Limit: 10}), 413, "request_too_large", ""},
		{"Closed", host.ErrHostClosed, 503, "shutting_down", ""},
		{"StoreClosed", fmt.Errorf("x: %w", store.ErrClosed), 503, "shutting_down", ""},
		{"Unavailable", fmt.Errorf("postgres://u@db:5432/x: %w", store.ErrUnavailable), 503, "store_unavailable", ""},
		{"Timeout", fmt.Errorf("x: %w", context.DeadlineExceeded), 503, "timeout", ""},
		{"Other", errors.New("disk on fire"), 500, "server_error", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ae := toAPIError(tt.err)
			if ae.Status != tt.status || ae.Code != tt.code || ae.Param != tt.param || ae.Message == "" {
				t.Errorf("toAPIError(%v) = %+v, want %d %s param %q", tt.err, ae, tt.status, tt.code, tt.param)
			}
		})
	}
	if got := mapNotFound(store.ErrNotFound, "resp_x").Error(); got != "responses: Response with id 'resp_x' not found." {
		t.Errorf("not found message = %q", got)
	}
}

func TestWriteError_Body(t *testing.T) {
	t.Parallel()
	s := &server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	rec := httptest.NewRecorder()
	s.writeError(rec, httptest.NewRequest("GET", "/v1/responses/x", nil), responseNotFound("x"))
	if rec.Code != 404 || rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("X-Should-Retry") != "false" {
		t.Fatalf("reply %d %v", rec.Code, rec.Header())
	}
	var body map[string]map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	e := body["error"]
	if e["message"] != "Response with id 'x' not found." || e["type"] != "invalid_request_error" || e["code"] != "not_found" {
		t.Errorf("error body = %v", e)
	}
	if v, ok := e["param"]; !ok || v != nil {
		t.Errorf("param = %v (present %v), want null", v, ok)
	}
}

// A conflict's reply says why in the host's or the store's plain words
// and never repeats a database's text (a constraint name).
func TestConflictMessage_NoInternals(t *testing.T) {
	t.Parallel()
	raw := fmt.Errorf("store/postgres: create response: duplicate key value violates unique constraint \"responses_pkey\": %w", store.ErrConflict)
	if m := toAPIError(raw).Message; strings.Contains(m, "responses_pkey") || strings.Contains(m, "postgres") {
		t.Errorf("raw store conflict: %q", m)
	}
	he := fmt.Errorf("host: create: %w", &host.ConflictError{Message: "Response resp_1 is still in progress."})
	if m := toAPIError(he).Message; m != "Response resp_1 is still in progress." {
		t.Errorf("host conflict: %q", m)
	}
	ce := &store.ContinueError{RunID: "run_1", PreviousResponseID: "resp_1", Reason: store.ContinueGone}
	if m := toAPIError(ce).Message; !strings.Contains(m, "resp_1") || !strings.Contains(m, "no longer exists") || strings.Contains(m, "run_1") {
		t.Errorf("continuation refused by the store: %q", m)
	}
}
