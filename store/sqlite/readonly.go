package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
)

// ErrReadOnly is returned by every write of a store opened with
// OpenReadOnly.
var ErrReadOnly = errors.New("sqlite: store opened read-only")

// OpenReadOnly opens the superstep database at path for reading only, as
// `superstep check` does: it takes no lock (a server may be running on the
// file), creates nothing, migrates nothing and releases no lease; reads
// see the last committed state (WAL readers do not block the writer), and
// every write fails with ErrReadOnly. A nil opts means the defaults.
// Errors: ErrNotSuperstep, ErrTooNew, ErrTooOld (an older schema, which
// only Open migrates), and the *fs.PathError of a missing file.
func OpenReadOnly(ctx context.Context, path string, opts *Options) (*Store, error) {
	o := opts.WithDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	// A clear error for a missing file rather than SQLite's "unable to
	// open database file".
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s := &Store{path: path, opts: o, readOnly: true}
	s.idle.L = &s.mu
	r := url.Values{"mode": {"ro"}, "_stmt_cache_size": {"64"}, "_txlock": {"deferred"},
		"_busy_timeout": {fmt.Sprint(o.BusyTimeout.Milliseconds())}, "_query_only": {"1"}}
	var err error
	if s.rdb, err = sql.Open("sqlite3", "file:"+path+"?"+r.Encode()); err != nil {
		return nil, mapError("open "+path, err)
	}
	s.rdb.SetMaxOpenConns(o.ReadConns)
	s.rdb.SetMaxIdleConns(o.ReadConns)
	if err := checkReadable(ctx, s.rdb, path); err != nil {
		s.rdb.Close()
		return nil, err
	}
	return s, nil
}

// checkReadable checks that db is a superstep database at a schema version
// this build can read.
func checkReadable(ctx context.Context, db *sql.DB, path string) error {
	appID, version, _, err := readHeader(ctx, db)
	if err != nil {
		return mapError("open "+path, err)
	}
	switch {
	case appID != applicationID || version == 0:
		return fmt.Errorf("%w: %s (application_id %#x, schema version %d)", ErrNotSuperstep, path, appID, version)
	case version > SchemaVersion():
		return fmt.Errorf("%w: %s has schema version %d, this build knows up to %d", ErrTooNew, path, version, SchemaVersion())
	case version < SchemaVersion():
		// Reads would fail on the first table or column that changed
		// (the event log's, since version 5) with a bare "no such table".
		return fmt.Errorf("%w: %s has schema version %d, this build's is %d", ErrTooOld, path, version, SchemaVersion())
	}
	return nil
}

// ReadOnly reports whether s was opened with OpenReadOnly.
func (s *Store) ReadOnly() bool { return s.readOnly }

// errIfReadOnly returns ErrReadOnly (wrapped with op) for a read-only store.
func (s *Store) errIfReadOnly(op string) error {
	if s.readOnly {
		return fmt.Errorf("sqlite: %s: %w", op, ErrReadOnly)
	}
	return nil
}
