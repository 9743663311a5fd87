package postgres

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// lz4Columns are the columns migration 020 moves to lz4.
var lz4Columns = [][2]string{{"responses", "request"}, {"responses", "snapshot"}, {"responses", "input"}, {"blobs", "data"},
	{"event_records", "data"}, {"checkpoints", "manifest"}, {"journal", "data"}, {"conversation_items", "data"}}

// TestLZ4Toast: on a server built with lz4 the big columns compress with
// it (migration 020), and a large compressible value written through the
// store is stored lz4-compressed; on one without, they keep the default.
func TestLZ4Toast(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	var lz4 bool
	if err := s.pool.QueryRow(ctx, `SELECT current_setting('server_version_num')::int >= 140000 AND EXISTS (
		SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals))`).Scan(&lz4); err != nil {
		t.Fatal(err)
	}
	want := ""
	if lz4 {
		want = "l"
	}
	for _, c := range lz4Columns {
		var got string
		err := s.pool.QueryRow(ctx, `SELECT attcompression::text FROM pg_attribute WHERE attrelid = $1::regclass AND attname = $2`,
			fmt.Sprintf("%q.%q", s.opts.Schema, c[0]), c[1]).Scan(&got)
		if err != nil {
			t.Fatalf("%s.%s: %v", c[0], c[1], err)
		}
		if got != want {
			t.Errorf("%s.%s: attcompression %q, want %q (server has lz4: %v)", c[0], c[1], got, want, lz4)
		}
	}
	if !lz4 {
		return
	}
	// A 64 KB compressible checkpoint part is stored as a blob row, which
	// TOAST compresses.
	part := bytes.Repeat([]byte(`{"role":"assistant","content":"lorem ipsum dolor sit amet"},`), 1100)
	r := storetest.CreateResponse(ctx, t, s, &storetest.ResponseOpts{Checkpoint: []store.Part{{Name: "state", Data: part}}})
	var method string
	if err := s.pool.QueryRow(ctx, `SELECT pg_column_compression(data) FROM blobs WHERE run_id = $1 AND octet_length(data) = $2`,
		r.Run.ID, len(part)).Scan(&method); err != nil {
		t.Fatal(err)
	}
	if method != "lz4" {
		t.Fatalf("blob of %d bytes compressed with %q, want lz4", len(part), method)
	}
}

// TestNotifySQLCommitsAsync: the notifier's statement turns synchronous
// commit off for its own transaction (so its commit waits for no WAL
// flush) and for nothing after it.
func TestNotifySQLCommitsAsync(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	show := func() string {
		var v string
		if err := conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := show()
	if before == "off" {
		t.Fatalf("synchronous_commit is off on the test server: this test needs it on")
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, notifySQL, s.opts.Channel, []string{"resp_x"}); err != nil {
		t.Fatal(err)
	}
	var in string
	if err := tx.QueryRow(ctx, "SHOW synchronous_commit").Scan(&in); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if in != "off" {
		t.Errorf("synchronous_commit in the notifier's transaction = %q, want off", in)
	}
	if after := show(); after != before {
		t.Errorf("synchronous_commit after the notifier's transaction = %q, want %q (set for its transaction only)", after, before)
	}
}
