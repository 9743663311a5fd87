package postgres

import (
	"errors"
	"fmt"
	"strconv"

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
	case codeConflict, codeUnique, codeSerialization, codeDeadlock:
		return fmt.Errorf("store/postgres: %s: %s: %w", op, pgErr.Message, store.ErrConflict)
	case codeForeignKey:
		return fmt.Errorf("store/postgres: %s: %s: %w", op, pgErr.Message, store.ErrNotFound)
	case codeMissingBlob:
		return fmt.Errorf("%w: %s", errMissingBlob, op)
	}
	return fmt.Errorf("store/postgres: %s: %w", op, err)
}

// isStoreError reports whether err already carries a store sentinel.
func isStoreError(err error) bool {
	for _, target := range []error{store.ErrNotFound, store.ErrFenced, store.ErrConflict, store.ErrCorrupt, store.ErrClosed} {
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
