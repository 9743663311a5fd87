package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/store/storetest"
)

// TestEventRecordCompressed: a commit of many events (W3's shape) is
// stored as one compressed record, far smaller than its events, that
// reads back event by event, from any seq; a damaged byte in it is
// reported by store.Check as corruption.
func TestEventRecordCompressed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := storetest.CreateResponse(ctx, t, s, nil)
	p := storetest.Commit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{Events: 1200})
	payloads := 0
	for _, ev := range p.Events {
		payloads += len(ev.Payload)
	}
	for _, from := range []int64{p.Events[0].Seq, p.Events[700].Seq} {
		got, err := s.EventList(ctx, &store.EventListParams{ResponseID: c.Response.ID, After: from - 1, Limit: 2000})
		if err != nil {
			t.Fatal(err)
		}
		want := p.Events[from-p.Events[0].Seq:]
		if len(got) != len(want) {
			t.Fatalf("EventList after %d: %d events, want %d", from-1, len(got), len(want))
		}
		for i, ev := range got {
			if ev.Seq != want[i].Seq || ev.Type != want[i].Type || !bytes.Equal(ev.Payload, want[i].Payload) {
				t.Fatalf("event %d reads back as %d %s %s, want %d %s %s", i, ev.Seq, ev.Type, ev.Payload, want[i].Seq, want[i].Type, want[i].Payload)
			}
		}
	}
	s.Close()

	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var stored int
	if err := db.QueryRow(`SELECT length(data) FROM event_records WHERE last_seq - (k & 4294967295) = 1199`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored*10 > payloads {
		t.Fatalf("the record of 1,200 events holds %d bytes for %d bytes of payloads; want compressed at least 10 times", stored, payloads)
	}
	if _, err := db.Exec(`UPDATE event_records SET data = substr(data, 1, length(data)/2) || x'ff' || substr(data, length(data)/2 + 2)
		WHERE last_seq - (k & 4294967295) = 1199`); err != nil {
		t.Fatal(err)
	}
	s, err = sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := store.Check(ctx, s); !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "compressed") {
		t.Fatalf("Check after a damaged byte in the compressed record: %v, want ErrCorrupt naming it", err)
	}
}
