package responses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/store"
)

// client returns an openai-go client of ts that does not retry.
func (ts *testServer) client() openai.Client {
	return openai.NewClient(option.WithBaseURL(ts.srv.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

// doKeyed is do with an Idempotency-Key header.
func (ts *testServer) doKeyed(key, body string) reply {
	ts.t.Helper()
	req, err := http.NewRequest("POST", ts.srv.URL+"/v1/responses", strings.NewReader(body))
	if err != nil {
		ts.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := ts.http.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// runCount returns how many runs ts's store holds.
func (ts *testServer) runCount() int {
	ts.t.Helper()
	rs, err := ts.store.RunList(context.Background(), &store.RunListParams{})
	if err != nil {
		ts.t.Fatal(err)
	}
	return len(rs)
}

// TestCreate_IdempotencyKey: with openai-go, the same Idempotency-Key
// and body get the same response, non-stream and stream (replayed from
// sequence 0), and one run each; another body under the key is a 422 and
// a key over 256 bytes a 400, neither storing anything.
func TestCreate_IdempotencyKey(t *testing.T) {
	t.Parallel()
	st, _ := openSQLite(t, nil)
	ts := newTestServer(t, st, nil)
	c := ts.client()
	ctx := t.Context()
	params := responses.ResponseNewParams{Model: examples.Echo,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}}

	first, err := c.Responses.New(ctx, params, option.WithHeader("Idempotency-Key", "create-1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Responses.New(ctx, params, option.WithHeader("Idempotency-Key", "create-1"))
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || again.Status != first.Status || again.OutputText() != first.OutputText() {
		t.Fatalf("replay: %s %s %q, want %s %s %q", again.ID, again.Status, again.OutputText(), first.ID, first.Status, first.OutputText())
	}
	if n := ts.runCount(); n != 1 {
		t.Fatalf("%d runs after two creates with one key, want 1", n)
	}

	// Streams: the replay reads the same log from sequence 0.
	// streamOnce returns the stream's response id and its events as
	// "seq:type".
	streamOnce := func() (string, []string) {
		st := c.Responses.NewStreaming(ctx, params, option.WithHeader("Idempotency-Key", "stream-1"))
		defer st.Close()
		var id string
		var evs []string
		for st.Next() {
			ev := st.Current()
			if id == "" {
				id = ev.Response.ID
			}
			evs = append(evs, fmt.Sprintf("%d:%s", ev.SequenceNumber, ev.Type))
		}
		if err := st.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		return id, evs
	}
	id1, evs1 := streamOnce()
	id2, evs2 := streamOnce()
	if id1 == "" || id1 != id2 || id1 == first.ID {
		t.Fatalf("streamed ids %q and %q, want one new response", id1, id2)
	}
	if len(evs2) < 3 || evs2[0] != "0:response.created" || evs2[len(evs2)-1] != evs1[len(evs1)-1] ||
		!strings.HasSuffix(evs2[len(evs2)-1], ":response.completed") || !slices.Equal(evs1, evs2) {
		t.Fatalf("replayed stream %v, want the first stream's %v from sequence 0 to response.completed", evs2, evs1)
	}
	if n := ts.runCount(); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}

	// Another body under a used key: 422, OpenAI-format, nothing stored.
	rp := ts.doKeyed("create-1", `{"model":"`+examples.Echo+`","input":"something else"}`)
	if rp.status != http.StatusUnprocessableEntity {
		t.Fatalf("another body: %d %s, want 422", rp.status, rp.body)
	}
	var raw struct {
		Error map[string]json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal([]byte(rp.body), &raw); err != nil || len(raw.Error) != 4 ||
		string(raw.Error["type"]) != `"invalid_request_error"` || string(raw.Error["code"]) != `"idempotency_key_reused"` ||
		string(raw.Error["param"]) != "null" || !strings.Contains(string(raw.Error["message"]), first.ID) {
		t.Fatalf("422 body %s, want {message, type, param, code}", rp.body)
	}
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: examples.Echo,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("other")}}, option.WithHeader("Idempotency-Key", "create-1"))
	if ae, ok := errors.AsType[*openai.Error](err); !ok || ae.StatusCode != 422 || ae.Code != "idempotency_key_reused" {
		t.Fatalf("openai-go: err = %v, want a 422 *openai.Error", err)
	}

	// A key over 256 bytes: 400, nothing stored.
	rp = ts.doKeyed(strings.Repeat("k", 257), `{"model":"`+examples.Echo+`","input":"hello"}`)
	if rp.status != http.StatusBadRequest || errorOf(t, rp).Code == nil || *errorOf(t, rp).Code != "invalid_idempotency_key" {
		t.Fatalf("long key: %d %s, want 400 invalid_idempotency_key", rp.status, rp.body)
	}
	if n := ts.runCount(); n != 2 {
		t.Fatalf("%d runs after the refused creates, want 2", n)
	}
}
