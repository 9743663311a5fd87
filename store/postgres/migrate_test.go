package postgres

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/internal/eventrec"
)

// undoCommitBatch undoes the commit-batch migration (after undoStepRows).
const undoCommitBatch = "DROP FUNCTION superstep_commit_batch; "

// undoJournal undoes the journal migration and the ones after it.
const undoJournal = undoCommitBatch + "DROP TABLE journal; "

// undoRunLineage undoes the run-lineage migration and the ones after it.
const undoRunLineage = undoJournal + "DROP TABLE lease_claims; DROP INDEX runs_created; ALTER TABLE runs DROP COLUMN forked_from_run, DROP COLUMN forked_from_step; "

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
// schema of an older version from a new one.
const undoVersion6 = undoVersion7 + "ALTER TABLE responses DROP COLUMN publication, DROP COLUMN input; "

// undoVersion5 undoes migrations 6 and 5 (event records) for tests that
// build a schema of an older version from a new one: the events table
// comes back empty and every log with it (next_seq 0), as those tests do
// not read events, and the record-taking functions go (migration 5 drops
// the older ones only if they exist). TestMigrateEventRecords builds a
// version-4 schema with events.
const undoVersion5 = undoVersion6 + "DROP TABLE event_records; CREATE TABLE events (response_id text NOT NULL, seq bigint NOT NULL, " +
	"type text NOT NULL, payload bytea, step bigint NOT NULL, PRIMARY KEY (response_id, seq)); " +
	"DROP FUNCTION superstep_commit(text, bigint, bigint, text, bigint, bigint, bigint, bytea, text[], bytea[], bytea[], " +
	"bytea[], bytea[], bigint, text, bytea, bytea, bytea, timestamptz, boolean, text, text, boolean); " +
	"DROP FUNCTION superstep_append_batch(text[], bigint[], text[], bigint[], int[], bigint[], bytea[], timestamptz[], text); " +
	"UPDATE responses SET next_seq = 0; "

// undoVersion4 undoes migrations 5 and 4 (durable facts), for tests that
// build a database of an older schema version from a new one.
const undoVersion4 = undoVersion5 + "ALTER TABLE responses DROP COLUMN start_step; ALTER TABLE runs DROP COLUMN resume_failures, " +
	"DROP COLUMN resume_error, DROP COLUMN resume_not_before; "

// latestVersion is the version of the newest embedded migration.
func latestVersion(t testing.TB) int {
	t.Helper()
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	return ms[len(ms)-1].Version
}

// migrateSchemaTo creates schema and migrates it to version with the
// embedded migrations, as a build of that version would have, and returns
// a pool on it (closed at cleanup).
func migrateSchemaTo(t *testing.T, schema string, version int) *pgxpool.Pool {
	t.Helper()
	ctx := t.Context()
	cfg, err := pgxpool.ParseConfig(testURL())
	if err != nil {
		t.Fatal(err)
	}
	if err := createSchema(ctx, cfg.ConnConfig, schema); err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if err := migrateTo(ctx, pool, schema, ms[:version]); err != nil {
		t.Fatalf("migrate to version %d: %v", version, err)
	}
	return pool
}

// oldEvents are events as a version-4 schema held them, one row each:
// payloads of every uvarint length class (1, 2 and 3 bytes), a NULL and
// an empty payload, bytes that are not UTF-8, a type that is not ASCII and
// an empty type, steps 0 and -1.
func oldEvents(responseID string) []store.Event {
	evs := []store.Event{
		{Type: "response.created", Payload: []byte(`{"type":"response.created","sequence_number":0}`), Step: 0},
		{Type: "response.output_text.delta", Payload: []byte{0, 1, 0xff, 0xfe, 0, '\n'}, Step: -1},
		{Type: "héllo.wörld", Payload: []byte{}, Step: -1},
		{Type: "null.payload", Payload: nil, Step: -1},
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

// TestMigrateEventRecords builds a version-4 schema (the migrations of
// that version, then rows in its one-row-per-event layout), opens it with
// this build, which migrates it to event records, and requires the same
// events back, whole and sliced (a NULL payload stays nil, an empty one
// empty), and store.Check to accept the layout.
func TestMigrateEventRecords(t *testing.T) {
	t.Parallel()
	requireDB(t)
	ctx := t.Context()
	schema := newSchemaName(t)
	pool := migrateSchemaTo(t, schema, 4)
	want := map[string][]store.Event{"resp_a": oldEvents("resp_a"), "resp_b": oldEvents("resp_b")[:3]}
	if _, err := pool.Exec(ctx, `INSERT INTO runs (id, model, head_response_id, last_step, active, created_at, updated_at)
		VALUES ('run_a', 'm', 'resp_b', 0, false, now(), now())`); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"resp_a", "resp_b"} {
		_, err := pool.Exec(ctx, `INSERT INTO responses (id, run_id, model, status, next_seq, created_at, updated_at, completed_at)
			VALUES ($1, 'run_a', 'm', 'completed', $2, now(), now(), now())`, id, len(want[id]))
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range want[id] {
			_, err := pool.Exec(ctx, "INSERT INTO events (response_id, seq, type, payload, step) VALUES ($1, $2, $3, $4, $5)",
				id, ev.Seq, ev.Type, ev.Payload, ev.Step)
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	pool.Close()

	s := openStore(t, schema, nil)
	if v := schemaVersionOf(t, s); v != latestVersion(t) {
		t.Fatalf("schema version %d after Open, want %d", v, latestVersion(t))
	}
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
	var old bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_name = 'events')`).Scan(&old); err != nil || old {
		t.Fatalf("events table still there (%v, %v)", old, err)
	}
	checkStore(t, s)
}

// TestMigrateResponseFacts builds a version-5 schema (the migrations of
// that version, then a run of two responses in its layout), opens it with
// this build, which migrates it to version 6, and requires each response
// to read Publication "" and Input nil with every other field as it was,
// its events included. (The run has no checkpoints, so that its rows stay
// few; store.Check would want those of the responses' CommitSteps.)
func TestMigrateResponseFacts(t *testing.T) {
	t.Parallel()
	requireDB(t)
	ctx := t.Context()
	schema := newSchemaName(t)
	pool := migrateSchemaTo(t, schema, 5)
	at := func(us int64) time.Time { return time.UnixMicro(us).UTC() }
	done := at(1_700_000_000_300_003)
	want := []*store.Response{{
		ID: "resp_a", RunID: "run_a", Model: "m", Owner: "key-1", Status: store.StatusCompleted,
		Request: []byte(`{"model":"m","input":"hi"}`), Snapshot: []byte(`{"id":"resp_a","status":"completed"}`),
		Error: []byte(`{"code":"x"}`), Usage: []byte(`{"total_tokens":3}`), NextSeq: 2, CommitStep: 2, StartStep: 0,
		CreatedAt: at(1_700_000_000_100_001), UpdatedAt: at(1_700_000_000_200_002), CompletedAt: &done,
	}, {
		ID: "resp_b", RunID: "run_a", PreviousResponseID: "resp_a", Model: "m", Status: store.StatusCancelled,
		NextSeq: 2, CommitStep: 3, StartStep: 2, CancelRequested: true,
		CreatedAt: at(1_700_000_000_400_004), UpdatedAt: at(1_700_000_000_500_005), CompletedAt: &done,
	}}
	if _, err := pool.Exec(ctx, `INSERT INTO runs (id, model, head_response_id, last_step, active, created_at, updated_at)
		VALUES ('run_a', 'm', 'resp_b', 3, false, now(), now())`); err != nil {
		t.Fatal(err)
	}
	for _, r := range want {
		_, err := pool.Exec(ctx, `INSERT INTO responses (id, run_id, previous_response_id, model, owner, status, request,
			snapshot, error, usage, next_seq, commit_step, start_step, cancel_requested, created_at, updated_at, completed_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
			r.ID, r.RunID, r.PreviousResponseID, r.Model, r.Owner, string(r.Status), r.Request, r.Snapshot, r.Error, r.Usage,
			r.NextSeq, r.CommitStep, r.StartStep, r.CancelRequested, r.CreatedAt, r.UpdatedAt, r.CompletedAt)
		if err != nil {
			t.Fatal(err)
		}
		data := eventrec.Append(eventrec.Append(nil, "response.created", []byte("{}")), "response.done", []byte("{}"))
		if _, err := pool.Exec(ctx, `INSERT INTO event_records (response_id, first_seq, last_seq, step, bytes, data)
			VALUES ($1, 0, 1, 0, 4, $2)`, r.ID, data); err != nil {
			t.Fatal(err)
		}
	}
	pool.Close()

	s := openStore(t, schema, nil)
	if v := schemaVersionOf(t, s); v < 6 || v != latestVersion(t) {
		t.Fatalf("schema version %d after Open, want the latest, %d (at least 6)", v, latestVersion(t))
	}
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

// schemaVersionOf reads the newest version recorded in s's schema.
func schemaVersionOf(t *testing.T, s *Store) int {
	t.Helper()
	var v int
	if err := s.pool.QueryRow(t.Context(), "SELECT max(version) FROM superstep_schema_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// requireEvents fails unless got equals want event by event, a nil
// payload included.
func requireEvents(t *testing.T, got, want []store.Event, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ResponseID != w.ResponseID || g.Seq != w.Seq || g.Type != w.Type || g.Step != w.Step ||
			!bytes.Equal(g.Payload, w.Payload) || (g.Payload == nil) != (w.Payload == nil) {
			t.Fatalf("%s: event %d = {%s %d %q step %d, %d bytes, nil %v}, want {%s %d %q step %d, %d bytes, nil %v}", what, i,
				g.ResponseID, g.Seq, g.Type, g.Step, len(g.Payload), g.Payload == nil,
				w.ResponseID, w.Seq, w.Type, w.Step, len(w.Payload), w.Payload == nil)
		}
	}
}

// TestMigrateLongSnapshot builds a version-13 schema holding a response as
// that version wrote it (a long snapshot inline, next to the terminal event
// that carries it; the recorded input; the event record with its shared
// strings), opens it with this build, which migrates it to the version
// that stores long snapshots by reference, and requires the response and
// its events to read back byte for byte.
func TestMigrateLongSnapshot(t *testing.T) {
	t.Parallel()
	requireDB(t)
	ctx := t.Context()
	schema := newSchemaName(t)
	pool := migrateSchemaTo(t, schema, 13)
	text := fmt.Sprintf("%q", strings.Repeat("an old <long> \"reply\" & more\n", 700))
	snap := []byte(`{"id":"resp_old","object":"response","status":"completed","output":[{"content":[{"text":` + text + `}]}]}`)
	at := func(us int64) time.Time { return time.UnixMicro(us).UTC() }
	done := at(1_700_000_000_300_003)
	want := &store.Response{ID: "resp_old", RunID: "run_old", Model: "m", Status: store.StatusCompleted,
		Request: []byte(`{"model":"m","input":` + text + `}`), Snapshot: snap, Usage: []byte(`{"total_tokens":3}`),
		NextSeq: 3, CommitStep: 1, StartStep: 0, Publication: "committed", Input: []byte(`[{"type":"message","text":` + text + `}]`),
		CreatedAt: at(1_700_000_000_100_001), UpdatedAt: at(1_700_000_000_200_002), CompletedAt: &done}
	events := []store.EventInput{
		{Seq: 0, Type: "response.created", Payload: []byte(`{"type":"response.created","sequence_number":0}`)},
		{Seq: 1, Type: "response.output_text.done", Payload: []byte(`{"type":"response.output_text.done","text":` + text + `}`)},
		{Seq: 2, Type: "response.completed", Payload: []byte(`{"type":"response.completed","sequence_number":2,"response":` + string(snap) + `}`)},
	}
	if _, err := pool.Exec(ctx, `INSERT INTO runs (id, model, head_response_id, last_step, active, created_at, updated_at)
		VALUES ('run_old', 'm', 'resp_old', 1, false, now(), now())`); err != nil {
		t.Fatal(err)
	}
	r := want
	if _, err := pool.Exec(ctx, `INSERT INTO responses (id, run_id, previous_response_id, model, owner, status, request,
		snapshot, error, usage, next_seq, commit_step, start_step, publication, input, cancel_requested, created_at, updated_at,
		completed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)`,
		r.ID, r.RunID, r.PreviousResponseID, r.Model, r.Owner, string(r.Status), r.Request, r.Snapshot, r.Error, r.Usage,
		r.NextSeq, r.CommitStep, r.StartStep, r.Publication, r.Input, r.CancelRequested, r.CreatedAt, r.UpdatedAt,
		r.CompletedAt); err != nil {
		t.Fatal(err)
	}
	size := 0
	for _, ev := range events {
		size += len(ev.Payload)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO event_records (response_id, first_seq, last_seq, step, bytes, data)
		VALUES ($1, 0, 2, 1, $2, $3)`, r.ID, size, eventrec.Encode(events)); err != nil {
		t.Fatal(err)
	}
	pool.Close()

	s := openStore(t, schema, nil)
	if v := schemaVersionOf(t, s); v < 15 || v != latestVersion(t) {
		t.Fatalf("schema version %d after Open, want the latest, %d (at least 15)", v, latestVersion(t))
	}
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
