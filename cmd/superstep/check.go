package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/superstep/superstep/store"
)

// runCheck implements `superstep check <db>`: it runs store.Check, the
// same integrity check the tests run, and exits 4 when it finds a
// violation.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) != 1 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "usage: superstep check <db>   (a SQLite file path or a postgres:// URL)")
		return withCode(exitUsage, errors.New("check takes exactly one database"))
	}
	db := args[0]
	if !isPostgresURL(db) {
		// Opening a SQLite path creates the file; checking must not.
		if _, err := os.Stat(db); err != nil {
			return withCode(exitStoreOpen, fmt.Errorf("check: %w", err))
		}
	}
	s, err := openStore(ctx, db)
	if err != nil {
		return fmt.Errorf("check %s: %w", redactURL(db), err)
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
