package eventrec_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/superstep/superstep/internal/testkit/pgtest"

	"github.com/jackc/pgx/v5"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/store/storetest"
)

// TestStoresShareStrings: through both stores, a commit and a live append
// whose events repeat a long text store it once per record, and every
// reader sees the events as written: the whole log, each seq alone, pages
// bounded by bytes, and store.Check.
func TestStoresShareStrings(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "share.db")
		s, err := sqlite.Open(t.Context(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		checkShared(t, s, func() int64 {
			db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var n int64
			if err := db.QueryRow("SELECT sum(length(data)) FROM event_records").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		})
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		dbURL, schema := pgtest.SchemaURL(t, "eventrec")
		conn, err := pgx.Connect(t.Context(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		s, err := postgres.Open(t.Context(), dbURL, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		checkShared(t, s, func() int64 {
			var n int64
			q := "SELECT sum(octet_length(data)) FROM " + pgx.Identifier{schema, "event_records"}.Sanitize()
			if err := conn.QueryRow(t.Context(), q).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		})
	})
}

func checkShared(t *testing.T, s store.Store, stored func() int64) {
	ctx := t.Context()
	text, _ := json.Marshal(strings.Repeat("the \"same\" <text>\\ again\n", 4000))
	c := storetest.CreateResponse(ctx, t, s, nil)
	evs, err := s.EventList(ctx, &store.EventListParams{ResponseID: c.Response.ID, After: -1})
	if err != nil {
		t.Fatal(err)
	}
	want := evs // the create's events
	add := func(step int64, payloads ...string) []store.EventInput {
		var in []store.EventInput
		for _, p := range payloads {
			seq := int64(len(want))
			ev := store.EventInput{Seq: seq, Type: fmt.Sprintf("type.%d", seq), Payload: []byte(p)}
			if p == "nil" {
				ev.Payload = nil
			}
			in = append(in, ev)
			want = append(want, store.Event{ResponseID: c.Response.ID, Seq: seq, Type: ev.Type, Payload: ev.Payload, Step: step})
		}
		return in
	}
	p := storetest.NextCommit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{NoEvents: true})
	p.Events = add(p.Step, `{"delta":`+string(text)+`}`, `{"text":`+string(text)+`}`, "nil", `{}`,
		`{"response":{"output":[{"text":`+string(text)+`}],"again":[`+string(text)+`]}}`)
	if _, err := s.Commit(ctx, p); err != nil {
		t.Fatal(err)
	}
	ap := &store.EventAppendParams{RunID: c.Run.ID, Epoch: c.Run.Lease.Epoch, ResponseID: c.Response.ID,
		Events: add(-1, `{"delta":`+string(text)+`}`, `{"x":1}`, `[`+string(text)+`]`)}
	if err := s.EventAppend(ctx, ap); err != nil {
		t.Fatal(err)
	}
	// Two records, each holding the text once (plus framing and the
	// other events), against seven copies written.
	if n, limit := stored(), int64(2*len(text)+1000); n > limit {
		t.Fatalf("event records hold %d bytes, want at most %d (the text is %d bytes)", n, limit, len(text))
	}
	got, err := s.EventList(ctx, &store.EventListParams{ResponseID: c.Response.ID, After: -1})
	if err != nil {
		t.Fatal(err)
	}
	requireEvents(t, got, want, "whole log")
	for i := range want {
		got, err := s.EventList(ctx, &store.EventListParams{ResponseID: c.Response.ID, After: int64(i) - 1, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		requireEvents(t, got, want[i:i+1], fmt.Sprintf("seq %d alone", i))
		got, err = s.EventList(ctx, &store.EventListParams{ResponseID: c.Response.ID, After: int64(i) - 1, MaxBytes: len(text)})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 || got[0].Seq != int64(i) {
			t.Fatalf("byte-bounded page from seq %d: %d events", i, len(got))
		}
		requireEvents(t, got, want[i:i+len(got)], fmt.Sprintf("byte-bounded page from seq %d", i))
	}
	if err := store.Check(ctx, s); err != nil {
		t.Fatalf("store.Check: %v", err)
	}
}

func requireEvents(t *testing.T, got, want []store.Event, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.Type != w.Type || g.Step != w.Step || !bytes.Equal(g.Payload, w.Payload) || (g.Payload == nil) != (w.Payload == nil) {
			t.Fatalf("%s: event %d is seq %d %q step %d (%d bytes), want seq %d %q step %d (%d bytes)", what, i,
				g.Seq, g.Type, g.Step, len(g.Payload), w.Seq, w.Type, w.Step, len(w.Payload))
		}
	}
}
