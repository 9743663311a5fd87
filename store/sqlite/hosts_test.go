package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/store/storetest"
)

// TestMigrateVersion1: a file written at schema version 1 (before the host
// registry) opens, gains the hosts table and keeps its data.
func TestMigrateVersion1(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := storetest.CreateResponse(ctx, t, s, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Undo migrations 4, 3 and 2: what a version-1 superstep left behind.
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(undoVersion4 + "DROP INDEX responses_completed; DROP TABLE hosts; PRAGMA user_version = 1"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatalf("open a version-1 file: %v", err)
	}
	defer s.Close()
	if _, err := s.HostHeartbeat(ctx, &store.HostHeartbeatParams{Host: store.HostInfo{ID: "h"}, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResponseGet(ctx, res.Response.ID); err != nil {
		t.Fatalf("response written at version 1: %v", err)
	}
	if err := store.Check(ctx, s); err != nil {
		t.Fatal(err)
	}
}

// TestOpenForgetsHosts: the hosts registered by a previous process are gone
// at Open (the file lock proves it), like its leases.
func TestOpenForgetsHosts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.HostHeartbeat(ctx, &store.HostHeartbeatParams{Host: store.HostInfo{ID: "old"}, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if hosts, err := s.HostList(ctx, time.Time{}); err != nil || len(hosts) != 0 {
		t.Fatalf("hosts after reopen: %v, %v; want none", hosts, err)
	}
}
