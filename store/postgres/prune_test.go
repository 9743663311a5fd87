package postgres

import (
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
