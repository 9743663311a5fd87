package postgres

import (
	"testing"
	"time"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// TestNoticesReachOtherHandles: a cancel and a queued run announced by one
// handle reach the subscribers of another handle on the same schema (another
// host), and a handle's own notices reach it too.
func TestNoticesReachOtherHandles(t *testing.T) {
	t.Parallel()
	schema := newSchemaName(t)
	a, b := openStore(t, schema, nil), openStore(t, schema, nil)
	fromA, fromB := a.Notices(t.Context(), 16), b.Notices(t.Context(), 16)
	res := storetest.CreateResponse(t.Context(), t, a, nil)
	if _, err := a.ResponseCancel(t.Context(), res.Response.ID); err != nil {
		t.Fatal(err)
	}
	queued := storetest.CreateResponse(t.Context(), t, a, &storetest.ResponseOpts{NoLease: true})
	want := []store.Notice{
		{Kind: store.NoticeCancel, RunID: res.Run.ID, ResponseID: res.Response.ID},
		{Kind: store.NoticeRunReady, RunID: queued.Run.ID},
	}
	for name, ch := range map[string]<-chan store.Notice{"other handle": fromB, "own handle": fromA} {
		got := map[store.Notice]bool{}
		deadline := time.After(30 * time.Second)
		for len(got) < len(want) {
			select {
			case n := <-ch:
				if n.Kind != store.NoticeResync {
					got[n] = true
				}
			case <-deadline:
				t.Fatalf("%s got notices %v, want %v", name, got, want)
			}
		}
		for _, n := range want {
			if !got[n] {
				t.Fatalf("%s got notices %v, want %v", name, got, want)
			}
		}
	}
}

// TestNoticePayload: notices survive their NOTIFY encoding, and event
// announcements (bare response ids) are not taken for notices.
func TestNoticePayload(t *testing.T) {
	t.Parallel()
	for _, n := range []store.Notice{
		{Kind: store.NoticeCancel, RunID: "run_1", ResponseID: "resp_1"},
		{Kind: store.NoticeRunReady, RunID: "run with \"quotes\" and spaces"},
	} {
		got, ok := decodeNotice(encodeNotice(n))
		if !ok || got != n {
			t.Fatalf("decode(encode(%+v)) = %+v, %v", n, got, ok)
		}
	}
	for _, p := range []string{"resp_abc", "", "!n", "!n{", `!n{"k":9}`, `!n{"k":3}`} {
		if n, ok := decodeNotice(p); ok {
			t.Fatalf("decodeNotice(%q) = %+v, want no notice", p, n)
		}
	}
}

// TestMigrateVersion1: a schema written by a superstep at schema version 1
// (before the host registry) opens, gains the hosts table and keeps its
// data.
func TestMigrateVersion1(t *testing.T) {
	t.Parallel()
	schema := newSchemaName(t)
	s := openStore(t, schema, nil)
	res := storetest.CreateResponse(t.Context(), t, s, nil)
	// Undo migrations 3 and 2: what a version-1 superstep left behind.
	undoStepRows(t, s)
	if _, err := s.pool.Exec(t.Context(), undoVersion4+"DROP INDEX responses_completed; DROP TABLE hosts; DELETE FROM superstep_schema_version WHERE version >= 2"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, schema, nil)
	var v int
	if err := s.pool.QueryRow(t.Context(), "SELECT max(version) FROM superstep_schema_version").Scan(&v); err != nil || v != latestVersion(t) {
		t.Fatalf("schema version after reopen %d (%v), want %d", v, err, latestVersion(t))
	}
	if _, err := s.HostHeartbeat(t.Context(), &store.HostHeartbeatParams{Host: store.HostInfo{ID: "h"}, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResponseGet(t.Context(), res.Response.ID); err != nil {
		t.Fatalf("response written at version 1: %v", err)
	}
	checkStore(t, s)
}
