package sqlite_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/store/storetest"
)

// A read-only store opens a file another store (a running server) holds,
// reads what that store committed, passes store.Check, refuses every
// write, and leaves the file as it was: the server's lease is kept.
func TestOpenReadOnly_WhileServing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	w, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	res := storetest.CreateResponse(ctx, t, w, nil)

	r, err := sqlite.OpenReadOnly(ctx, path, nil)
	if err != nil {
		t.Fatalf("OpenReadOnly while the file is held: %v", err)
	}
	defer r.Close()
	if !r.ReadOnly() || w.ReadOnly() {
		t.Fatal("ReadOnly reports the wrong mode")
	}
	got, err := r.ResponseGet(ctx, res.Response.ID)
	if err != nil || got.RunID != res.Run.ID {
		t.Fatalf("ResponseGet through the read-only store: %+v %v", got, err)
	}
	if err := store.Check(ctx, r); err != nil {
		t.Fatalf("store.Check: %v", err)
	}
	_, err = r.ResponseCancel(ctx, res.Response.ID)
	if !errors.Is(err, sqlite.ErrReadOnly) {
		t.Fatalf("ResponseCancel on a read-only store: %v, want ErrReadOnly", err)
	}
	// The server goes on writing, and the reader sees its commits.
	if _, err := w.ResponseCancel(ctx, res.Response.ID); err != nil {
		t.Fatalf("the writer's cancel: %v", err)
	}
	if got, err := r.ResponseGet(ctx, res.Response.ID); err != nil || !got.CancelRequested {
		t.Fatalf("the reader after the writer's cancel: %+v %v", got, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	run, err := w.RunGet(ctx, res.Run.ID)
	if err != nil || run.Lease.Owner != storetest.LeaseOwnerDefault {
		t.Fatalf("after a read-only open the run is %+v (%v), want its lease kept", run, err)
	}
}

// A read-only open creates nothing and refuses what is not a superstep
// database of a known version.
func TestOpenReadOnly_Refuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	if _, err := sqlite.OpenReadOnly(ctx, missing, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a read-only open created %s", missing)
	}
	foreign := filepath.Join(dir, "foreign.db")
	if err := os.WriteFile(foreign, []byte("not a database, just text that is long enough to be read"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.OpenReadOnly(ctx, foreign, nil); !errors.Is(err, sqlite.ErrNotSuperstep) && !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("foreign file: %v", err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.OpenReadOnly(ctx, empty, nil); !errors.Is(err, sqlite.ErrNotSuperstep) {
		t.Fatalf("empty file: %v", err)
	}
	// An older schema is not read in its old layout: the error says to
	// migrate it, and the file stays at its version.
	old := filepath.Join(dir, "v4.db")
	if err := sqlite.MigrateTo(ctx, old, 4); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.OpenReadOnly(ctx, old, nil); !errors.Is(err, sqlite.ErrTooOld) {
		t.Fatalf("version-4 file: %v, want ErrTooOld", err)
	}
	s, err := sqlite.Open(ctx, old, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	ro, err := sqlite.OpenReadOnly(ctx, old, nil)
	if err != nil {
		t.Fatalf("read-only open after Open migrated the file: %v", err)
	}
	ro.Close()
}
