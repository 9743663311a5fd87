package responses

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzResponseID feeds arbitrary ids through the mux's path parsing and
// the id check: the id a handler sees is the one in the URL, an accepted
// id is one the store can take (valid UTF-8, no NUL, "resp_" prefix,
// bounded), and a refused one gets the OpenAI 404 without the handler
// being reached.
func FuzzResponseID(f *testing.F) {
	for _, seed := range []string{"resp_0123456789abcdef0123456789abcdef", "resp_1", "resp_", "resp_\x00", "resp_\xff\xfe",
		"resp_a b", "resp_a/b", "resp_%00", "x", "", "RESP_1", "resp_é", strings.Repeat("resp_", 40), "resp_a\nb", "resp_a?b#c"} {
		f.Add(seed)
	}
	s := &server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	f.Fuzz(func(t *testing.T, id string) {
		var seen string
		reached := false
		mux := http.NewServeMux()
		mux.HandleFunc("GET /v1/responses/{id}", s.withResponseID(func(w http.ResponseWriter, r *http.Request) {
			reached, seen = true, r.PathValue("id")
		}))
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/responses/"+url.PathEscape(id), nil))
		if id == "" || id == "." || id == ".." {
			// No id segment, or a dot segment net/http cleans away
			// (307 to the cleaned path): the route does not match.
			return
		}
		if reached {
			if seen != id {
				t.Fatalf("handler saw id %q, URL had %q", seen, id)
			}
			if !utf8.ValidString(id) || strings.ContainsRune(id, 0) || !strings.HasPrefix(id, "resp_") || len(id) > maxIDLen {
				t.Fatalf("id %q accepted", id)
			}
			return
		}
		if rec.Code != http.StatusNotFound {
			t.Fatalf("id %q: status %d, want 404", id, rec.Code)
		}
		var body errorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error.Code == nil || *body.Error.Code != "not_found" ||
			body.Error.Type != typeInvalidRequest {
			t.Fatalf("id %q: body %s (%v)", id, rec.Body.Bytes(), err)
		}
		if validResponseID(id) {
			t.Fatalf("valid id %q refused", id)
		}
	})
}
