package postgres

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// TestMigrateFromVersion2 reopens a schema at version 2 (before the
// retention index) holding a finished response: Open applies migration 3
// and ResponsePrune deletes the response and its run.
func TestMigrateFromVersion2(t *testing.T) {
	t.Parallel()
	schema := newSchemaName(t)
	ctx := t.Context()
	s, err := Open(ctx, testURL(), &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	res := storetest.CreateResponse(ctx, t, s, nil)
	storetest.Commit(ctx, t, s, res.Run.ID, &storetest.CommitOpts{Status: store.StatusCancelled})
	undoStepRows(t, s)
	for _, q := range []string{undoVersion4, "DROP INDEX responses_completed", "DELETE FROM superstep_schema_version WHERE version >= 3"} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	_ = s.Close()

	s, err = Open(ctx, testURL(), &Options{Schema: schema})
	if err != nil {
		t.Fatalf("open a version-2 schema: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	var version, idx int
	err = s.pool.QueryRow(ctx, `SELECT (SELECT max(version) FROM superstep_schema_version),
		(SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'responses_completed')`).Scan(&version, &idx)
	if err != nil || version < 3 || idx != 1 {
		t.Fatalf("after migration: version %d, index %d, %v; want >= 3 and the index", version, idx, err)
	}
	n, err := s.ResponsePrune(ctx, &store.ResponsePruneParams{Before: time.Now().Add(time.Hour)})
	if err != nil || n != 1 {
		t.Fatalf("ResponsePrune after migration: %d, %v; want 1", n, err)
	}
	if _, err := s.RunGet(ctx, res.Run.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("run after pruning its only response: %v, want not found", err)
	}
	checkStore(t, s)
}

// TestPruneCollectsBlobs: a pruning commit deletes the blobs that only
// the checkpoints it deleted referred to, and keeps those a kept
// checkpoint still refers to: the blob of every finished response's
// checkpoint (each turn of a conversation resumes from one), and a blob
// shared by a deleted and a kept checkpoint. Migration 22 looks only at
// the deleted checkpoints' blobs instead of every blob of the run.
func TestPruneCollectsBlobs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := Open(ctx, testURL(), &Options{Schema: newSchemaName(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	blob := func(seed byte) store.Part {
		return store.Part{Name: "history", Data: bytes.Repeat([]byte{seed}, 4*inlineMax)}
	}
	shared := store.Part{Name: "shared", Data: bytes.Repeat([]byte{'s'}, 4*inlineMax)}
	count := func(runID string) (n int) {
		t.Helper()
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM blobs WHERE run_id = $1", runID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	c := storetest.CreateResponse(ctx, t, s, nil)
	prev := c.Response.ID
	const turns = 4
	for turn := range turns {
		if turn > 0 {
			prev = storetest.CreateResponse(ctx, t, s, &storetest.ResponseOpts{RunID: c.Run.ID, PreviousResponseID: prev}).Response.ID
		}
		// Three steps of the turn, each with a blob of its own; the last
		// finishes the response and prunes, keeping 2.
		for st := range 3 {
			p := storetest.NextCommit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{NoEvents: true,
				Checkpoint: []store.Part{shared, blob(byte(10*turn + st))}})
			if st == 2 {
				p.Status, p.PruneKeep = store.StatusCompleted, 2
			}
			if _, err := s.Commit(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		// Left: the shared blob, the blob of each finished turn's last
		// checkpoint, and that of the step before this turn's last.
		if got, want := count(c.Run.ID), 1+(turn+1)+1; got != want {
			t.Fatalf("turn %d: %d blobs left, want %d", turn, got, want)
		}
	}
	cps, err := s.CheckpointList(ctx, c.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range cps {
		full, err := s.CheckpointGet(ctx, c.Run.ID, cp.Step)
		if err != nil || len(full.Parts) != 2 {
			t.Fatalf("checkpoint %d after the prunes: %v, %d parts", cp.Step, err, len(full.Parts))
		}
	}
	checkStore(t, s)
}
