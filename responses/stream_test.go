package responses

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/superstep/superstep/store"
)

// TestWriteErrorFrame checks the error frame's shape and that openai-go
// reports it as a stream error (it only does for a top-level "error" key).
func TestWriteErrorFrame(t *testing.T) {
	t.Parallel()
	s := &server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	rec := httptest.NewRecorder()
	sw, err := newSSEWriter(rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.event("response.created", []byte(`{"type":"response.created","sequence_number":0}`)); err != nil {
		t.Fatal(err)
	}
	s.writeErrorFrame(sw, mapNotFound(store.ErrNotFound, "resp_1"), 0)
	body := rec.Body.String()
	want := `event: error` + "\n" + `data: {"type":"error","sequence_number":0,"code":"not_found","message":"Response with id 'resp_1' not found.","param":null,"error":{"message":"Response with id 'resp_1' not found.","type":"invalid_request_error","param":null,"code":"not_found"}}` + "\n\n"
	if !strings.HasSuffix(body, want) {
		t.Fatalf("stream:\n%s\nwant suffix\n%s", body, want)
	}
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(body))}
	st := ssestream.NewStream[responses.ResponseStreamEventUnion](ssestream.NewDecoder(resp), nil)
	n := 0
	for st.Next() {
		n++
	}
	var se *ssestream.StreamError
	if n != 1 || !errors.As(st.Err(), &se) {
		t.Fatalf("openai-go read %d events, err %v; want 1 event then a StreamError", n, st.Err())
	}
}
