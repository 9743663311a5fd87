package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
)

// runCheck implements `superstep check <db>`: it runs store.Check, the
// same integrity check the tests run, and exits 4 when it finds a
// violation. A SQLite file is opened read-only, so it can be checked while
// a server runs on it.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) != 1 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "usage: superstep check <db>   (a SQLite file path or a postgres:// URL)")
		return withCode(exitUsage, errors.New("check takes exactly one database"))
	}
	db := args[0]
	var s store.Store
	if isPostgresURL(db) {
		var err error
		if s, err = openStore(ctx, db); err != nil {
			return fmt.Errorf("check %s: %w", redactURL(db), err)
		}
	} else {
		// Read-only: a server may hold the file, and checking must change
		// nothing (not create it, not release its leases).
		ro, err := sqlite.OpenReadOnly(ctx, db, nil)
		if err != nil {
			return withCode(exitStoreOpen, fmt.Errorf("check %s: %w", db, err))
		}
		s = ro
	}
	checkErr := store.Check(ctx, s)
	closeErr := s.Close()
	if checkErr != nil {
		return withCode(exitCheck, fmt.Errorf("check %s: %w", redactURL(db), checkErr))
	}
	if closeErr != nil {
		return fmt.Errorf("check %s: close: %w", redactURL(db), closeErr)
	}
	fmt.Fprintf(stdout, "ok: %s\n", redactURL(db))
	return nil
}
