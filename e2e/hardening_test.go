package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/internal/testkit/pgtest"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
)

// backends runs fn on a server over SQLite and one over PostgreSQL.
func backends(t *testing.T, o envOpts, fn func(t *testing.T, e *env)) {
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		o := o
		fn(t, newEnv(t, &o))
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		o := o
		o.Store = openPostgres(t, pgtest.Database(t, "superstep_e2e"))
		fn(t, newEnv(t, &o))
	})
}

func openPostgres(t *testing.T, db string) store.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), db, nil)
	if err != nil {
		t.Fatalf("postgres.Open: %v", err)
	}
	return st
}

// Ids that cannot name a response — NUL, invalid UTF-8, other alphabets,
// overlong — get the 404 of an unknown id on both backends, on every
// route that takes an id (PostgreSQL used to answer 500: SQLSTATE 22021).
func TestIDs_MalformedAreNotFound(t *testing.T) {
	t.Parallel()
	backends(t, envOpts{}, func(t *testing.T, e *env) {
		ids := []string{"resp_\x00", "resp_a\x00b", "resp_\xff\xfe", "\xc3\x28", "resp_a b", "resp_é", "x",
			"resp_" + strings.Repeat("a", 300)}
		for _, id := range ids {
			esc := url.PathEscape(id)
			for _, rt := range []struct{ method, path string }{
				{"GET", "/v1/responses/" + esc}, {"GET", "/v1/responses/" + esc + "?stream=true"},
				{"POST", "/v1/responses/" + esc + "/cancel"}, {"DELETE", "/v1/responses/" + esc},
				{"GET", "/v1/responses/" + esc + "/input_items"},
			} {
				resp := e.rawDo(t, rt.method, rt.path, "", nil)
				status, body := resp.StatusCode, readAll(t, resp)
				var got struct {
					Error struct{ Type, Code string }
				}
				if err := json.Unmarshal(body, &got); err != nil || status != http.StatusNotFound ||
					got.Error.Code != "not_found" || got.Error.Type != "invalid_request_error" {
					t.Errorf("%s %q: %d %s, want 404 not_found", rt.method, id, status, body)
				}
			}
		}
	})
}

// A store failure while a stream is being read (here: the host's publish
// fault point failing with store.ErrUnavailable, as a cut database does)
// breaks the connection instead of sending an error frame: openai-go
// raises on an error frame and never resumes. The client resumes with
// starting_after and gets every event exactly once.
func TestStream_TransientStoreErrorResumes(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	failed := map[int64]bool{}
	fault := func(_ context.Context, f *host.Fault) error {
		if f.Point != host.FaultPublish || (f.Seq != 2 && f.Seq != 4) {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if failed[f.Seq] {
			return nil
		}
		failed[f.Seq] = true
		return fmt.Errorf("read events: %w", store.ErrUnavailable)
	}
	e := newEnv(t, &envOpts{Host: &host.Config{Test: host.TestConfig{FaultFunc: fault}}})
	ctx := context.Background()
	first := drain(e.client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "demo.silent", Input: textInput("go"),
		Background: openai.Bool(true), Metadata: shared.Metadata{"steps": "4"}}), nil)
	all := first
	id := first.responseID(t)
	for conns := 1; ; conns++ {
		var se *ssestream.StreamError
		if errors.As(all.Err, &se) {
			t.Fatalf("connection %d ended with an error frame: %v (events %v)", conns, all.Err, all.types())
		}
		if all.Err == nil {
			break
		}
		if conns > 5 {
			t.Fatalf("%d connections, last error %v", conns, all.Err)
		}
		rest := drain(e.client.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(all.last().SequenceNumber)}), nil)
		all = streamed{Events: append(all.Events, rest.Events...), Err: rest.Err}
	}
	requireLifecycle(t, all, "response.completed")
	if len(failed) != 2 {
		t.Fatalf("faults hit at %v, want seqs 2 and 4", failed)
	}
}
