package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/store/storetest"
)

func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("LockedByAnotherOpen", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "s.db")
		s, err := sqlite.Open(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = sqlite.Open(ctx, path, nil)
		if !errors.Is(err, sqlite.ErrLocked) || !strings.Contains(err.Error(), path) {
			t.Fatalf("second Open: %v, want ErrLocked naming the file", err)
		}
		s.Close()
		s2, err := sqlite.Open(ctx, path, nil)
		if err != nil {
			t.Fatalf("Open after Close: %v", err)
		}
		s2.Close()
	})

	t.Run("RejectsForeignSQLiteFile", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "other.db")
		db, err := sql.Open("sqlite3", path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("CREATE TABLE notes (body TEXT)"); err != nil {
			t.Fatal(err)
		}
		db.Close()
		_, err = sqlite.Open(ctx, path, nil)
		if !errors.Is(err, sqlite.ErrNotSuperstep) {
			t.Fatalf("Open of a foreign SQLite file: %v, want ErrNotSuperstep", err)
		}
	})

	t.Run("RejectsNonSQLiteFile", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "notes.txt")
		if err := os.WriteFile(path, []byte(strings.Repeat("not a database\n", 100)), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := sqlite.Open(ctx, path, nil)
		if !errors.Is(err, sqlite.ErrNotSuperstep) {
			t.Fatalf("Open of a text file: %v, want ErrNotSuperstep", err)
		}
	})

	t.Run("RejectsNewerSchema", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "s.db")
		s, err := sqlite.Open(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		db, err := sql.Open("sqlite3", path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
			t.Fatal(err)
		}
		db.Close()
		_, err = sqlite.Open(ctx, path, nil)
		if !errors.Is(err, sqlite.ErrTooNew) {
			t.Fatalf("Open of a newer schema: %v, want ErrTooNew", err)
		}
	})

	t.Run("ReopensAtCurrentVersion", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "s.db")
		for range 2 {
			s, err := sqlite.Open(ctx, path, nil)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
		}
		db, err := sql.Open("sqlite3", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var v int
		var mode string
		if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != sqlite.SchemaVersion() {
			t.Fatalf("user_version %d (%v), want %d", v, err, sqlite.SchemaVersion())
		}
		if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Fatalf("journal_mode %q (%v), want wal", mode, err)
		}
	})

	t.Run("ValidatesOptions", func(t *testing.T) {
		t.Parallel()
		_, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"), &sqlite.Options{Synchronous: "OFF", MaxBatch: -1})
		if err == nil || !strings.Contains(err.Error(), "Synchronous") || !strings.Contains(err.Error(), "MaxBatch") {
			t.Fatalf("Open with bad options: %v, want errors naming Synchronous and MaxBatch", err)
		}
	})
}

// TestOpenReleasesLeases: leases left by a previous process are released at
// Open (the file lock proves their holder is gone), epochs kept.
func TestOpenReleasesLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := storetest.CreateResponse(ctx, t, s, nil)
	s.Close()
	s, err = sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run, err := s.RunGet(ctx, c.Run.ID)
	if err != nil || run.Lease.Owner != "" || run.Lease.Epoch != c.Run.Lease.Epoch {
		t.Fatalf("lease after reopen: %+v (%v), want released at epoch %d", run.Lease, err, c.Run.Lease.Epoch)
	}
	_, err = s.Commit(ctx, storetest.NextCommit(ctx, t, s, c.Run.ID, nil))
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("commit under the previous process's lease: %v, want ErrFenced", err)
	}
	claimed, err := s.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "host-b", Duration: time.Minute})
	if err != nil || len(claimed) != 1 || claimed[0].Lease.Epoch != c.Run.Lease.Epoch+1 {
		t.Fatalf("LeaseClaim after reopen: %+v (%v)", claimed, err)
	}
}
