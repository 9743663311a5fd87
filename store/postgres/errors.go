package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/superstep/superstep/store"
)

// SQLSTATE codes raised by the migration's functions, and the PostgreSQL
// codes mapError translates.
const (
	codeNotFound      = "SSN01"
	codeFenced        = "SSF01"
	codeConflict      = "SSC01"
	codeMissingBlob   = "SSB01"
	codeInjected      = "SSI01"
	codeUnique        = "23505"
	codeForeignKey    = "23503"
	codeSerialization = "40001"
	codeDeadlock      = "40P01"
)

// errMissingBlob reports that a part sent by reference is no longer stored
// (the cache of known parts was stale); Commit retries with the bytes.
var errMissingBlob = errors.New("store/postgres: referenced checkpoint part missing")

// mapError is the one place where driver errors become store sentinels. op
// names the operation for the message; runID and epoch fill a FencedError.
// Transient failures (see transient) wrap store.ErrUnavailable, the
// driver's error kept in the chain.
func mapError(op, runID string, epoch int64, err error) error {
	if err == nil {
		return nil
	}
	if isStoreError(err) {
		return err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("store/postgres: %s: %w", op, store.ErrNotFound)
	}
	if transient(err) {
		return fmt.Errorf("store/postgres: %s: %w: %w", op, store.ErrUnavailable, err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return fmt.Errorf("store/postgres: %s: %w", op, err)
	}
	switch pgErr.Code {
	case codeNotFound:
		return fmt.Errorf("store/postgres: %s: %s: %w", op, pgErr.Message, store.ErrNotFound)
	case codeFenced:
		current, _ := strconv.ParseInt(pgErr.Detail, 10, 64)
		return fmt.Errorf("store/postgres: %s: %w", op, &store.FencedError{RunID: runID, Epoch: epoch, CurrentEpoch: current})
	case codeConflict, codeUnique:
		return fmt.Errorf("store/postgres: %s: %s: %w", op, pgErr.Message, store.ErrConflict)
	case codeForeignKey:
		return fmt.Errorf("store/postgres: %s: %s: %w", op, pgErr.Message, store.ErrNotFound)
	case codeMissingBlob:
		return fmt.Errorf("%w: %s", errMissingBlob, op)
	}
	return fmt.Errorf("store/postgres: %s: %w", op, err)
}

// transient reports whether err is a failure that can go away by itself,
// so that the same call may succeed later: the server could not be
// reached or dropped the connection (refused, reset, closed, EOF, a
// failed connect), a timeout (a network one, or a deadline such as
// Options.WriteTimeout: a deadline ends a call that waited too long, not
// one that was wrong), and the SQLSTATEs of the same nature: class 08
// (connection exception), 40001 and 40P01 (serialization failure,
// deadlock: the transaction can be run again), class 53 (insufficient
// resources: disk full, out of memory, too many connections), 57014
// (query cancelled, as a statement_timeout does), 57P01 to 57P03 (server
// shutting down, crashed or starting) and 57P05 (idle session timeout). A cancelled
// context is not transient: the caller gave up. Everything else (a
// constraint violation, bad data, a fencing) is deterministic.
func transient(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		c := pgErr.Code
		return strings.HasPrefix(c, "08") || strings.HasPrefix(c, "53") || c == codeSerialization ||
			c == codeDeadlock || c == "57014" || c == "57P01" || c == "57P02" || c == "57P03" || c == "57P05"
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr), errors.As(err, &netErr), pgconn.Timeout(err), pgconn.SafeToRetry(err):
		return true
	}
	for _, target := range []error{context.DeadlineExceeded, io.EOF, io.ErrUnexpectedEOF, net.ErrClosed,
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE, syscall.ETIMEDOUT,
		syscall.EHOSTUNREACH, syscall.ENETUNREACH} {
		if errors.Is(err, target) {
			return true
		}
	}
	// pgx reports a use of a connection it closed after an error as an
	// error of its own with no type ("conn closed").
	return strings.Contains(err.Error(), "conn closed")
}

// isStoreError reports whether err already carries a store sentinel.
func isStoreError(err error) bool {
	for _, target := range []error{store.ErrNotFound, store.ErrFenced, store.ErrConflict, store.ErrCorrupt, store.ErrClosed,
		store.ErrUnavailable} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// isInjected reports whether err is a fault raised by superstep_fail.
func isInjected(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == codeInjected
}
