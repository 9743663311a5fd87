package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// TestMapError_Transient: the store's writes fail with errors that wrap
// store.ErrUnavailable when SQLite cannot do the work now (another
// connection holds the write lock, the database is full) and with
// deterministic ones otherwise, SQLite's own error kept in the chain.
// The errors are SQLite's, from real conditions.
func TestMapError_Transient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("Busy", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "s.db")
		s, err := Open(ctx, path, &Options{BusyTimeout: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		// Another connection (an operator's shell) holds the write lock.
		other, err := sql.Open("sqlite3", path)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		conn, err := other.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		_, err = s.ResponseCreate(ctx, storetest.ResponseParams(nil))
		requireCode(t, err, sqlite3.ErrBusy)
		if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, ErrLocked) {
			t.Fatalf("write under another connection's lock: %v, want ErrUnavailable and ErrLocked", err)
		}
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ResponseCreate(ctx, storetest.ResponseParams(nil)); err != nil {
			t.Fatalf("write once the lock is gone: %v", err)
		}
	})

	t.Run("Full", func(t *testing.T) {
		t.Parallel()
		s, err := Open(ctx, filepath.Join(t.TempDir(), "s.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		c := storetest.CreateResponse(ctx, t, s, nil)
		var pages int64
		if err := s.wconn.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
			t.Fatal(err)
		}
		// The database may not grow: as full as a full disk.
		if _, err := s.wconn.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
			t.Fatal(err)
		}
		big := make([]byte, 1<<20)
		p := storetest.NextCommit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{Checkpoint: []store.Part{{Name: "big", Data: big}}})
		_, err = s.Commit(ctx, p)
		requireCode(t, err, sqlite3.ErrFull)
		if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrConflict) {
			t.Fatalf("commit into a full database: %v, want ErrUnavailable", err)
		}
		if _, err := s.wconn.ExecContext(ctx, "PRAGMA max_page_count = 1073741823"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Commit(ctx, p); err != nil {
			t.Fatalf("the same commit once there is room: %v", err)
		}
	})

	t.Run("ReadOnlyFile", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "s.db")
		s, err := Open(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		_, err = db.ExecContext(ctx, "DELETE FROM hosts")
		err = mapError("delete", err)
		requireCode(t, err, sqlite3.ErrReadonly)
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("write to a read-only file: %v, want ErrUnavailable", err)
		}
	})

	t.Run("ConstraintIsDeterministic", func(t *testing.T) {
		t.Parallel()
		s, err := Open(ctx, filepath.Join(t.TempDir(), "s.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		c := storetest.CreateResponse(ctx, t, s, nil)
		_, err = s.ResponseCreate(ctx, storetest.ResponseParams(&storetest.ResponseOpts{ID: c.Response.ID}))
		if !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("duplicate response id: %v, want ErrConflict and not ErrUnavailable", err)
		}
	})
}

// requireCode fails unless err carries a SQLite error with code.
func requireCode(t *testing.T, err error, code sqlite3.ErrNo) {
	t.Helper()
	var serr sqlite3.Error
	if !errors.As(err, &serr) || serr.Code != code {
		t.Fatalf("error %v, want SQLite's %v in the chain", err, code)
	}
}
