package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/store/storetest"
)

// TestMigrateFromVersion2 opens a database at schema version 2 (before the
// retention index) holding a finished response: Open migrates it, the
// index is used by ResponsePrune, and the response is pruned.
func TestMigrateFromVersion2(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := storetest.CreateResponse(ctx, t, s, nil)
	storetest.Commit(ctx, t, s, res.Run.ID, &storetest.CommitOpts{Status: store.StatusFailed})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Make it a version-2 database: version 3 only adds the index.
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{undoVersion4, "DROP INDEX responses_completed", "PRAGMA user_version = 2"} {
		if _, err := db.Exec(q); err != nil {
			db.Close()
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err = sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatalf("open a version-2 database: %v", err)
	}
	defer s.Close()
	db, err = sql.Open("sqlite3", path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v, idx int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != sqlite.SchemaVersion() || v < 3 {
		t.Fatalf("user_version %d (%v), want %d", v, err, sqlite.SchemaVersion())
	}
	if err := db.QueryRow("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'responses_completed'").Scan(&idx); err != nil || idx != 1 {
		t.Fatalf("index responses_completed: %d (%v)", idx, err)
	}
	var plan, detail string
	var a, b, c int
	// The candidate query of ResponsePrune.
	rows, err := db.Query(`EXPLAIN QUERY PLAN SELECT r.id FROM responses r JOIN runs u ON u.id = r.run_id
		WHERE r.completed_at IS NOT NULL AND r.completed_at < ?1 AND u.active = 0
		AND (r.id <> u.head_response_id OR r.status <> 'completed')
		ORDER BY r.completed_at LIMIT ?2`, 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		if err := rows.Scan(&a, &b, &c, &detail); err != nil {
			t.Fatal(err)
		}
		plan += detail + "; "
	}
	rows.Close()
	if !strings.Contains(plan, "responses_completed") {
		t.Fatalf("prune candidates do not use the index: %s", plan)
	}
	n, err := s.ResponsePrune(ctx, &store.ResponsePruneParams{Before: time.Now().Add(time.Hour)})
	if err != nil || n != 1 {
		t.Fatalf("ResponsePrune after migration: %d, %v; want 1", n, err)
	}
	if _, err := s.RunGet(ctx, res.Run.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("run after pruning its only response: %v, want not found", err)
	}
}
