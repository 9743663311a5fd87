package sqlite_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/internal/eventrec"
	"github.com/superstep/superstep/store/sqlite"
)

// undoResponseBodies undoes the response-bodies migration (the newest
// that changes a table), for a database whose response_bodies is empty.
const undoResponseBodies = "DROP TABLE response_bodies; "

// undoJournal undoes the journal migration and the ones after it.
const undoJournal = undoResponseBodies + "DROP TABLE journal; "

// undoRunLineage undoes the run-lineage migration and the ones after it.
const undoRunLineage = undoJournal + "DROP TABLE lease_claims; DROP INDEX runs_created; ALTER TABLE runs DROP COLUMN forked_from_run; ALTER TABLE runs DROP COLUMN forked_from_step; "

// undoTraceContext undoes the trace-context migration and the ones after it.
const undoTraceContext = undoRunLineage + "ALTER TABLE responses DROP COLUMN trace_context; "

// undoWebhooks undoes the webhook outbox's migration and the ones after it.
const undoWebhooks = undoTraceContext + "DROP TABLE webhook_deliveries; "

// undoVersionConversations undoes the conversations migration (the one
// after idempotency keys) and the ones after it, for tests that build a
// database of an older version.
const undoVersionConversations = undoWebhooks + "DROP TABLE conversations; DROP TABLE conversation_items; DROP TABLE pending_calls; "

// undoVersion7 undoes migration 7 (idempotency keys) and the ones after
// it, for tests that build a database of an older version.
const undoVersion7 = undoVersionConversations + "DROP TABLE idempotency_keys; "

// undoVersion6 undoes migrations 7 and 6 (response facts), for tests that build a
// database of an older schema version from a new one.
const undoVersion6 = undoVersion7 + "ALTER TABLE responses DROP COLUMN publication; ALTER TABLE responses DROP COLUMN input; "

// undoVersion5 undoes migrations 6 and 5 (event records) for tests that
// build a database of an older schema version from a new one: the events
// table comes back empty and every log with it (next_seq 0), as those
// tests do not read events; TestMigrateEventRecords builds a version-4
// database with events.
const undoVersion5 = undoVersion6 + "DROP TABLE event_records; CREATE TABLE events (k INTEGER PRIMARY KEY, step INTEGER NOT NULL, " +
	"type TEXT NOT NULL, payload BLOB NOT NULL, seq INTEGER GENERATED ALWAYS AS (k & 4294967295) VIRTUAL); " +
	"UPDATE responses SET next_seq = 0; "

// undoVersion4 undoes migration 4 (durable facts), for tests that build a
// database of an older schema version from a new one.
const undoVersion4 = undoVersion5 + "ALTER TABLE responses DROP COLUMN start_step; ALTER TABLE runs DROP COLUMN resume_failures; " +
	"ALTER TABLE runs DROP COLUMN resume_error; ALTER TABLE runs DROP COLUMN resume_not_before; "

// oldEvents are events as a version-4 database held them, one row each:
// payloads of every uvarint length class the migration encodes (1, 2 and
// 3 bytes), an empty payload, bytes that are not UTF-8 (NUL, 0xff), a
// type that is not ASCII and an empty type, steps 0 and -1.
func oldEvents(responseID string) []store.Event {
	evs := []store.Event{
		{Type: "response.created", Payload: []byte(`{"type":"response.created","sequence_number":0}`), Step: 0},
		{Type: "response.output_text.delta", Payload: []byte{0, 1, 0xff, 0xfe, 0, '\n'}, Step: -1},
		{Type: "héllo.wörld", Payload: []byte{}, Step: -1},
		{Type: "", Payload: []byte("no type"), Step: 0},
		{Type: strings.Repeat("t", 130), Payload: bytes.Repeat([]byte{0xab}, 200), Step: 0},
		{Type: "big", Payload: bytes.Repeat([]byte("x\x00"), 20000), Step: 0},
		{Type: "response.completed", Payload: []byte(`{"type":"response.completed"}`), Step: 0},
	}
	for i := range evs {
		evs[i].ResponseID, evs[i].Seq = responseID, int64(i)
	}
	return evs
}

// TestMigrateEventRecords builds a version-4 database (the migrations of
// that version, then rows in its one-row-per-event layout), opens it with
// this build, which migrates it to event records, and requires the same
// events back, whole and sliced, and store.Check to accept the layout.
func TestMigrateEventRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v4.db")
	if err := sqlite.MigrateTo(ctx, path, 4); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	// Two finished responses of one run (nums 1 and 2), so that the
	// migration must keep each log under its own key range.
	want := map[string][]store.Event{"resp_a": oldEvents("resp_a"), "resp_b": oldEvents("resp_b")[:3]}
	stmts := []string{
		`INSERT INTO runs (id, num, model, head_response_id, last_step, checkpoint_step, lease_owner, lease_epoch,
			lease_expires_at, active, created_at, updated_at) VALUES ('run_a', 1, 'm', 'resp_b', 0, -1, '', 1, 0, 0, 1, 1)`,
	}
	for num, id := range []string{"resp_a", "resp_b"} {
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO responses (num, id, run_id, previous_response_id, model, owner, status,
			next_seq, commit_step, cancel_requested, created_at, updated_at, completed_at)
			VALUES (%d, '%s', 'run_a', '', 'm', '', 'completed', %d, 0, 0, 1, 1, 1)`, num+1, id, len(want[id])))
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for num, id := range []string{"resp_a", "resp_b"} {
		for _, ev := range want[id] {
			_, err := db.Exec("INSERT INTO events (k, step, type, payload) VALUES (?, ?, ?, ?)",
				int64(num+1)<<32|ev.Seq, ev.Step, ev.Type, ev.Payload)
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatalf("open a version-4 database: %v", err)
	}
	defer s.Close()
	for id, evs := range want {
		got, err := s.EventList(ctx, &store.EventListParams{ResponseID: id, After: -1})
		if err != nil {
			t.Fatal(err)
		}
		requireEvents(t, got, evs, id+" after migration")
		for after := int64(-1); after < int64(len(evs)); after++ {
			got, err := s.EventList(ctx, &store.EventListParams{ResponseID: id, After: after, Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			requireEvents(t, got, evs[after+1:min(after+3, int64(len(evs)))], fmt.Sprintf("%s after %d", id, after))
		}
		recs, err := s.EventRecords(ctx, id)
		if err != nil || len(recs) != len(evs) {
			t.Fatalf("%s: %d records (%v), want one per old row (%d)", id, len(recs), err, len(evs))
		}
	}
	if err := store.Check(ctx, s); err != nil {
		t.Fatalf("Check after migration: %v", err)
	}
	ro, err := sql.Open("sqlite3", path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var v, old int
	if err := ro.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != sqlite.SchemaVersion() {
		t.Fatalf("user_version %d (%v), want %d", v, err, sqlite.SchemaVersion())
	}
	if err := ro.QueryRow("SELECT count(*) FROM sqlite_master WHERE name = 'events'").Scan(&old); err != nil || old != 0 {
		t.Fatalf("events table still there (%d, %v)", old, err)
	}
}

// TestMigrateResponseFacts builds a version-5 database (the migrations of
// that version, then a run of two responses in its layout), opens it with
// this build, which migrates it to version 6, and requires each response
// to read Publication "" and Input nil with every other field as it was,
// its events included. (The run has no checkpoints, so that its rows stay
// few; store.Check would want those of the responses' CommitSteps.)
func TestMigrateResponseFacts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v5.db")
	if err := sqlite.MigrateTo(ctx, path, 5); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	ns := func(n int64) time.Time { return time.Unix(0, n).UTC() }
	done := ns(1_700_000_000_300_000_003)
	want := []*store.Response{{
		ID: "resp_a", RunID: "run_a", Model: "m", Owner: "key-1", Status: store.StatusCompleted,
		Request: []byte(`{"model":"m","input":"hi"}`), Snapshot: []byte(`{"id":"resp_a","status":"completed"}`),
		Error: []byte(`{"code":"x"}`), Usage: []byte(`{"total_tokens":3}`), NextSeq: 2, CommitStep: 2, StartStep: 0,
		CreatedAt: ns(1_700_000_000_100_000_001), UpdatedAt: ns(1_700_000_000_200_000_002), CompletedAt: &done,
	}, {
		ID: "resp_b", RunID: "run_a", PreviousResponseID: "resp_a", Model: "m", Status: store.StatusCancelled,
		NextSeq: 2, CommitStep: 3, StartStep: 2, CancelRequested: true,
		CreatedAt: ns(1_700_000_000_400_000_004), UpdatedAt: ns(1_700_000_000_500_000_005), CompletedAt: &done,
	}}
	if _, err := db.Exec(`INSERT INTO runs (id, num, model, head_response_id, last_step, checkpoint_step, lease_owner,
		lease_epoch, lease_expires_at, active, created_at, updated_at, resume_failures, resume_error, resume_not_before)
		VALUES ('run_a', 1, 'm', 'resp_b', 3, -1, '', 1, 0, 0, 1, 1, 0, '', 0)`); err != nil {
		t.Fatal(err)
	}
	for i, r := range want {
		num := int64(i + 1)
		_, err := db.Exec(`INSERT INTO responses (num, id, run_id, previous_response_id, model, owner, status, request,
			snapshot, error, usage, next_seq, commit_step, start_step, cancel_requested, created_at, updated_at, completed_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			num, r.ID, r.RunID, r.PreviousResponseID, r.Model, r.Owner, r.Status, r.Request, r.Snapshot, r.Error, r.Usage,
			r.NextSeq, r.CommitStep, r.StartStep, r.CancelRequested, r.CreatedAt.UnixNano(), r.UpdatedAt.UnixNano(),
			r.CompletedAt.UnixNano())
		if err != nil {
			t.Fatal(err)
		}
		data := eventrec.Append(eventrec.Append(nil, "response.created", []byte("{}")), "response.done", []byte("{}"))
		if _, err := db.Exec("INSERT INTO event_records (k, last_seq, step, data) VALUES (?, 1, 0, ?)", num<<32, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openMigrated(ctx, t, path, 5, 6)
	listed, err := s.ResponseListByRun(ctx, "run_a")
	if err != nil || len(listed) != len(want) {
		t.Fatalf("ResponseListByRun: %d responses (%v), want %d", len(listed), err, len(want))
	}
	for i, w := range want {
		got, err := s.ResponseGet(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		requireMigratedResponse(t, got, w, "ResponseGet")
		requireMigratedResponse(t, listed[i], w, "ResponseListByRun")
		evs, err := s.EventList(ctx, &store.EventListParams{ResponseID: w.ID, After: -1})
		if err != nil || len(evs) != 2 || evs[0].Type != "response.created" || evs[1].Type != "response.done" {
			t.Fatalf("%s: events %+v (%v) after migration", w.ID, evs, err)
		}
	}
}

// requireMigratedResponse fails unless got, a response written before
// migration 6, reads Publication "" and Input nil and otherwise equals
// want (times compared as instants).
func requireMigratedResponse(t *testing.T, got, want *store.Response, what string) {
	t.Helper()
	if got.Publication != "" || got.Input != nil {
		t.Fatalf("%s %s: Publication %q Input %q (nil %v), want \"\" and nil", what, got.ID, got.Publication, got.Input, got.Input == nil)
	}
	g, w := *got, *want
	if !g.CreatedAt.Equal(w.CreatedAt) || !g.UpdatedAt.Equal(w.UpdatedAt) || (g.CompletedAt == nil) != (w.CompletedAt == nil) ||
		(g.CompletedAt != nil && !g.CompletedAt.Equal(*w.CompletedAt)) {
		t.Fatalf("%s %s: times %v %v %v, want %v %v %v", what, g.ID, g.CreatedAt, g.UpdatedAt, g.CompletedAt,
			w.CreatedAt, w.UpdatedAt, w.CompletedAt)
	}
	g.CreatedAt, g.UpdatedAt, g.CompletedAt = w.CreatedAt, w.UpdatedAt, w.CompletedAt
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s %s after migration:\n got  %+v\n want %+v", what, g.ID, g, w)
	}
}

// openMigrated opens the version-from database at path, which Open
// migrates, and fails t unless it is then at this build's version, at
// least atLeast. The store is closed when t ends.
func openMigrated(ctx context.Context, t *testing.T, path string, from, atLeast int) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatalf("open a version-%d database: %v", from, err)
	}
	t.Cleanup(func() { s.Close() })
	if v := userVersion(t, path); v < atLeast || v != sqlite.SchemaVersion() {
		t.Fatalf("user_version %d after Open, want this build's %d (at least %d)", v, sqlite.SchemaVersion(), atLeast)
	}
	return s
}

// userVersion reads the schema version of the database at path.
func userVersion(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite3", path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// requireEvents fails unless got equals want event by event.
func requireEvents(t *testing.T, got, want []store.Event, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ResponseID != w.ResponseID || g.Seq != w.Seq || g.Type != w.Type || g.Step != w.Step || !bytes.Equal(g.Payload, w.Payload) {
			t.Fatalf("%s: event %d = {%s %d %q step %d, %d bytes}, want {%s %d %q step %d, %d bytes}", what, i,
				g.ResponseID, g.Seq, g.Type, g.Step, len(g.Payload), w.ResponseID, w.Seq, w.Type, w.Step, len(w.Payload))
		}
	}
}

// TestMigrateLongSnapshot builds a version-13 database holding a response
// as that version wrote it (a long snapshot inline, next to the terminal
// event that carries it; the recorded input; the event record with its
// shared strings), opens it with this build, which migrates it to the
// version that stores long snapshots by reference, and requires the
// response and its events to read back byte for byte. (The run has no
// checkpoints, so that its rows stay few.)
func TestMigrateLongSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v13.db")
	if err := sqlite.MigrateTo(ctx, path, 13); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf("%q", strings.Repeat("an old <long> \"reply\" & more\n", 700))
	snap := []byte(`{"id":"resp_old","object":"response","status":"completed","output":[{"content":[{"text":` + text + `}]}]}`)
	ns := func(n int64) time.Time { return time.Unix(0, n).UTC() }
	done := ns(1_700_000_000_300_000_003)
	want := &store.Response{ID: "resp_old", RunID: "run_old", Model: "m", Status: store.StatusCompleted,
		Request: []byte(`{"model":"m","input":` + text + `}`), Snapshot: snap, Usage: []byte(`{"total_tokens":3}`),
		NextSeq: 3, CommitStep: 1, StartStep: 0, Publication: "committed", Input: []byte(`[{"type":"message","text":` + text + `}]`),
		CreatedAt: ns(1_700_000_000_100_000_001), UpdatedAt: ns(1_700_000_000_200_000_002), CompletedAt: &done}
	events := []store.EventInput{
		{Seq: 0, Type: "response.created", Payload: []byte(`{"type":"response.created","sequence_number":0}`)},
		{Seq: 1, Type: "response.output_text.done", Payload: []byte(`{"type":"response.output_text.done","text":` + text + `}`)},
		{Seq: 2, Type: "response.completed", Payload: []byte(`{"type":"response.completed","sequence_number":2,"response":` + string(snap) + `}`)},
	}
	if _, err := db.Exec(`INSERT INTO runs (id, num, model, head_response_id, last_step, checkpoint_step, lease_owner,
		lease_epoch, lease_expires_at, active, created_at, updated_at, resume_failures, resume_error, resume_not_before)
		VALUES ('run_old', 1, 'm', 'resp_old', 1, -1, '', 1, 0, 0, 1, 1, 0, '', 0)`); err != nil {
		t.Fatal(err)
	}
	r := want
	if _, err := db.Exec(`INSERT INTO responses (num, id, run_id, previous_response_id, model, owner, status, request,
		snapshot, error, usage, next_seq, commit_step, start_step, publication, input, cancel_requested, created_at, updated_at,
		completed_at, trace_context) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '')`,
		r.ID, r.RunID, r.PreviousResponseID, r.Model, r.Owner, r.Status, r.Request, r.Snapshot, r.Error, r.Usage,
		r.NextSeq, r.CommitStep, r.StartStep, r.Publication, r.Input, r.CancelRequested, r.CreatedAt.UnixNano(),
		r.UpdatedAt.UnixNano(), r.CompletedAt.UnixNano()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO event_records (k, last_seq, step, data) VALUES (?, 2, 1, ?)", int64(1)<<32,
		eventrec.Encode(events)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openMigrated(ctx, t, path, 13, 15)
	got, err := s.ResponseGet(ctx, want.ID)
	if err != nil {
		t.Fatal(err)
	}
	listed, err := s.ResponseListByRun(ctx, want.RunID)
	if err != nil || len(listed) != 1 {
		t.Fatalf("ResponseListByRun: %d responses (%v), want 1", len(listed), err)
	}
	for what, g := range map[string]*store.Response{"ResponseGet": got, "ResponseListByRun": listed[0]} {
		if !g.CreatedAt.Equal(want.CreatedAt) || !g.UpdatedAt.Equal(want.UpdatedAt) || g.CompletedAt == nil || !g.CompletedAt.Equal(done) {
			t.Fatalf("%s: times %v %v %v", what, g.CreatedAt, g.UpdatedAt, g.CompletedAt)
		}
		c := *g
		c.CreatedAt, c.UpdatedAt, c.CompletedAt = want.CreatedAt, want.UpdatedAt, want.CompletedAt
		if !reflect.DeepEqual(&c, want) {
			t.Fatalf("%s after migration:\n got  %.300q\n want %.300q", what, fmt.Sprint(c), fmt.Sprint(*want))
		}
	}
	evs, err := s.EventList(ctx, &store.EventListParams{ResponseID: want.ID, After: -1})
	if err != nil || len(evs) != len(events) {
		t.Fatalf("events after migration: %d (%v), want %d", len(evs), err, len(events))
	}
	for i, ev := range events {
		if evs[i].Seq != ev.Seq || evs[i].Type != ev.Type || !bytes.Equal(evs[i].Payload, ev.Payload) {
			t.Fatalf("event %d after migration: %s %d bytes, want %s %d bytes", i, evs[i].Type, len(evs[i].Payload), ev.Type, len(ev.Payload))
		}
	}
}

// TestMigrateInlineBudget builds a version-15 database whose checkpoints
// hold a part inline (100 bytes) and two as blobs (300 and 1,000 bytes:
// version 15 kept only parts up to 256 bytes inline), opens it with this
// build and requires the same parts back; a commit after the migration
// diffs against the old manifest (the 300-byte part now inline), and
// pruning the old checkpoints deletes the blob only they referenced.
func TestMigrateInlineBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v15.db")
	if err := sqlite.MigrateTo(ctx, path, 15); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	part := func(name string, size int, b byte) store.Part {
		return store.Part{Name: name, Data: bytes.Repeat([]byte{b}, size)}
	}
	steps := [][]store.Part{
		{part("small", 100, 1), part("mid", 300, 2), part("big", 1000, 3)},
		{part("small", 100, 4), part("mid", 300, 2), part("big", 1000, 3)},
	}
	// v15Manifest encodes parts as version 15 did: inline up to 256 bytes.
	v15Manifest := func(parts []store.Part) []byte {
		b := binary.AppendUvarint(nil, uint64(len(parts)))
		for _, p := range parts {
			h := sha256.Sum256(p.Data)
			b = append(append(binary.AppendUvarint(b, uint64(len(p.Name))), p.Name...), h[:]...)
			b = binary.AppendUvarint(b, uint64(len(p.Data)))
			if len(p.Data) > 256 {
				b = append(b, 0)
				continue
			}
			b = append(append(b, 1), p.Data...)
		}
		return b
	}
	expires := time.Now().Add(time.Hour).UnixNano()
	stmts := []struct {
		q    string
		args []any
	}{
		{`INSERT INTO runs (id, num, model, head_response_id, last_step, checkpoint_step, lease_owner,
			lease_epoch, lease_expires_at, active, created_at, updated_at) VALUES ('run_old', 1, 'm', 'resp_old', 1, 1, 'h', 1, ?, 1, 1, 1)`,
			[]any{expires}},
		{`INSERT INTO responses (num, id, run_id, previous_response_id, model, owner, status, request, snapshot,
			next_seq, commit_step, start_step, publication, input, cancel_requested, created_at, updated_at, trace_context)
			VALUES (1, 'resp_old', 'run_old', '', 'm', '', 'in_progress', x'7b7d', x'7b7d', 0, 1, 0, 'committed', x'5b5d', 0, 1, 1, '')`, nil},
	}
	for step, parts := range steps {
		stmts = append(stmts, struct {
			q    string
			args []any
		}{"INSERT INTO checkpoints (k, parent_step, size, manifest, created_at) VALUES (?, ?, 1400, ?, 1)",
			[]any{int64(1)<<32 | int64(step), step - 1, v15Manifest(parts)}})
		for _, p := range parts[1:] {
			h := sha256.Sum256(p.Data)
			stmts = append(stmts, struct {
				q    string
				args []any
			}{"INSERT OR IGNORE INTO blobs (run_id, hash, data) VALUES ('run_old', ?, ?)", []any{h[:], p.Data}})
		}
	}
	for _, st := range stmts {
		if _, err := db.Exec(st.q, st.args...); err != nil {
			t.Fatalf("%s: %v", st.q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openMigrated(ctx, t, path, 15, 16)
	for step, parts := range steps {
		cp, err := s.CheckpointGet(ctx, "run_old", int64(step))
		if err != nil {
			t.Fatalf("CheckpointGet step %d after migration: %v", step, err)
		}
		requireSameParts(t, cp.Parts, parts)
	}
	// Open released the old process's lease: claim it again.
	runs, err := s.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "h2", Duration: time.Hour})
	if err != nil || len(runs) != 1 {
		t.Fatalf("LeaseClaim: %d runs (%v), want 1", len(runs), err)
	}
	steps = append(steps, []store.Part{part("small", 100, 5), part("mid", 300, 2), part("big", 1000, 3)})
	if _, err := s.Commit(ctx, &store.CommitParams{RunID: "run_old", Epoch: runs[0].Lease.Epoch, Step: 2, ResponseID: "resp_old",
		Status: store.StatusInProgress, Checkpoint: steps[2], PruneKeep: 1}); err != nil {
		t.Fatalf("Commit after migration: %v", err)
	}
	cp, err := s.CheckpointGet(ctx, "run_old", 2)
	if err != nil {
		t.Fatalf("CheckpointGet after a pruning commit: %v", err)
	}
	requireSameParts(t, cp.Parts, steps[2])
	if err := store.Check(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, path, "blobs"); n != 1 {
		t.Fatalf("%d blobs after pruning steps 0 and 1, want 1 (the 1,000-byte part's)", n)
	}
}

// countRows counts the rows of table in the database at path.
func countRows(t *testing.T, path, table string) int {
	t.Helper()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMigrateResponseBodies builds a version-18 database whose responses
// hold requests and inputs of every kind (long, short, a long input with
// no request, none), opens it, and reads each back byte for byte: the
// long ones from response_bodies, where migration 19 moved them (their
// row holds NULL), the short ones from their row.
func TestMigrateResponseBodies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v18.db")
	if err := sqlite.MigrateTo(ctx, path, 18); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	long := func(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }
	cases := []struct {
		id             string
		request, input []byte
		apart          bool
	}{
		{"resp_long", long('r', 300<<10), long('i', 2000), true},
		{"resp_short", []byte(`{"model":"m","input":"hi"}`), []byte(`[{"type":"message"}]`), false},
		{"resp_sum", long('r', 600), long('i', 600), true}, // 1 KiB together
		{"resp_input_only", nil, long('i', 5000), true},
		{"resp_none", nil, nil, false},
		{"resp_empty", []byte{}, nil, false},
	}
	for i, c := range cases {
		_, err := db.Exec(`INSERT INTO responses (num, id, run_id, previous_response_id, model, owner, status, request,
			snapshot, error, usage, next_seq, commit_step, start_step, publication, input, cancel_requested, created_at,
			updated_at, completed_at, trace_context)
			VALUES (?, ?, 'run_a', '', 'm', '', 'completed', ?, NULL, NULL, NULL, 0, 1, 0, '', ?, 0, 1, 2, 3, '')`,
			i+1, c.id, c.request, c.input)
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := openMigrated(ctx, t, path, 18, 19)
	ro, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for _, c := range cases {
		got, err := s.ResponseGet(ctx, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Request, c.request) || (got.Request == nil) != (c.request == nil) ||
			!bytes.Equal(got.Input, c.input) || (got.Input == nil) != (c.input == nil) {
			t.Errorf("%s: request %d bytes (nil %v), input %d bytes (nil %v) after migration; want %d (nil %v), %d (nil %v)",
				c.id, len(got.Request), got.Request == nil, len(got.Input), got.Input == nil,
				len(c.request), c.request == nil, len(c.input), c.input == nil)
		}
		var inRow, apart int
		if err := ro.QueryRow(`SELECT (SELECT count(*) FROM responses WHERE id = ?1 AND (request IS NOT NULL OR input IS NOT NULL)),
			(SELECT count(*) FROM response_bodies WHERE num = (SELECT num FROM responses WHERE id = ?1))`, c.id).Scan(&inRow, &apart); err != nil {
			t.Fatal(err)
		}
		if (apart == 1) != c.apart || (c.apart && inRow != 0) {
			t.Errorf("%s: response_bodies rows %d, row holds request or input %d; want apart %v", c.id, apart, inRow, c.apart)
		}
	}
}
