package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/superstep/superstep/internal/fault"
	"github.com/superstep/superstep/store"
)

// Errors of Open.
var (
	// ErrLocked is returned when the database is in use by another process
	// (another superstep server, or a writer holding SQLite's lock past the
	// busy timeout).
	ErrLocked = errors.New("sqlite: database is locked by another process")
	// ErrNotSuperstep is returned when the file is not a SQLite database or
	// is a SQLite database that superstep did not create.
	ErrNotSuperstep = errors.New("sqlite: not a superstep database")
	// ErrTooNew is returned when the database was written by a newer
	// version of superstep (its schema version is unknown to this one).
	ErrTooNew = errors.New("sqlite: database schema is newer than this superstep")
	// ErrTooOld is returned by OpenReadOnly when the database's schema is
	// older than this build's: reading it would need its old layout (the
	// per-event rows before version 5), and a read-only open migrates
	// nothing. Open migrates it.
	ErrTooOld = errors.New("sqlite: database schema is older than this superstep; open it read-write once to migrate it")
)

// mapError is the one place where driver errors become store sentinels:
// sql.ErrNoRows becomes store.ErrNotFound, a constraint violation
// store.ErrConflict, SQLITE_BUSY/LOCKED ErrLocked and store.ErrUnavailable,
// the other transient codes (see mapSQLiteError) store.ErrUnavailable,
// SQLITE_CORRUPT store.ErrCorrupt and SQLITE_NOTADB ErrNotSuperstep. Errors that already are ours pass
// through. Every query's error returns through it, wrapped with op.
func mapError(op string, err error) error {
	if err == nil {
		return nil
	}
	var serr sqlite3.Error
	switch {
	case isOurs(err):
		// Already a sentinel, a typed store error or a context error.
	case errors.Is(err, sql.ErrNoRows):
		err = store.ErrNotFound
	case errors.Is(err, sql.ErrConnDone), err.Error() == "sql: database is closed":
		err = store.ErrClosed
	case errors.As(err, &serr):
		err = mapSQLiteError(serr)
	}
	return fmt.Errorf("sqlite: %s: %w", op, err)
}

// isOurs reports whether err already means something to callers.
func isOurs(err error) bool {
	for _, target := range []error{
		store.ErrNotFound, store.ErrFenced, store.ErrConflict, store.ErrCorrupt, store.ErrClosed,
		store.ErrUnavailable, ErrLocked, ErrNotSuperstep, ErrTooNew, ErrTooOld, fault.ErrInjected, context.Canceled, context.DeadlineExceeded,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// mapSQLiteError maps a driver error by its code. It keeps the driver's
// error in the chain: the writer inspects its code to decide whether a
// failed request may have ended the batch's transaction.
//
// Transient codes wrap store.ErrUnavailable: the same write can succeed
// later, once the condition is gone. They are SQLITE_BUSY and
// SQLITE_LOCKED (another connection holds the lock past the busy
// timeout), SQLITE_FULL (disk full), SQLITE_IOERR (a failed read, write
// or fsync), SQLITE_READONLY (the file or its filesystem became read-only,
// as a remount after disk errors does; a store opened with OpenReadOnly
// refuses writes with ErrReadOnly before SQLite sees them) and
// SQLITE_PROTOCOL (a lost race on the WAL's locks).
func mapSQLiteError(serr sqlite3.Error) error {
	switch serr.Code {
	case sqlite3.ErrConstraint:
		return fmt.Errorf("%w: %w", store.ErrConflict, serr)
	case sqlite3.ErrBusy, sqlite3.ErrLocked:
		return fmt.Errorf("%w: %w: %w", ErrLocked, store.ErrUnavailable, serr)
	case sqlite3.ErrFull, sqlite3.ErrIoErr, sqlite3.ErrReadonly, sqlite3.ErrProtocol:
		return fmt.Errorf("%w: %w", store.ErrUnavailable, serr)
	case sqlite3.ErrNotADB:
		return fmt.Errorf("%w: %w", ErrNotSuperstep, serr)
	case sqlite3.ErrCorrupt:
		return fmt.Errorf("%w: %w", store.ErrCorrupt, serr)
	}
	return serr
}
