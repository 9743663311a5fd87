package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/superstep/superstep/internal/dburl"
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
	if dburl.IsPostgres(db) {
		var err error
		if s, err = openStore(ctx, db); err != nil {
			return fmt.Errorf("check %s: %w", dburl.Redact(db), err)
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
	if checkErr == nil {
		checkErr = reportUnresumable(ctx, s, stdout)
	}
	if checkErr == nil {
		checkErr = reportWebhooks(ctx, s, stdout)
	}
	closeErr := s.Close()
	if checkErr != nil {
		return withCode(exitCheck, fmt.Errorf("check %s: %w", dburl.Redact(db), checkErr))
	}
	if closeErr != nil {
		return fmt.Errorf("check %s: close: %w", dburl.Redact(db), closeErr)
	}
	fmt.Fprintf(stdout, "ok: %s\n", dburl.Redact(db))
	return nil
}

// reportUnresumable lists the active runs that hosts failed to resume
// (store.Run.Resume): a model no host registers, a corrupt checkpoint, a
// changed graph. They are not an inconsistency, but no host drives them.
func reportUnresumable(ctx context.Context, s store.Store, stdout io.Writer) error {
	after := ""
	for {
		runs, err := s.RunList(ctx, &store.RunListParams{After: after, Limit: 100, ActiveOnly: true})
		if err != nil {
			return fmt.Errorf("list active runs: %w", err)
		}
		for _, r := range runs {
			if r.Resume.Failures > 0 {
				fmt.Fprintf(stdout, "unresumable: run %s (model %s, head %s): %d failed resumes, next attempt after %s: %s\n",
					r.ID, r.Model, r.HeadResponseID, r.Resume.Failures, r.Resume.NotBefore.Format("2006-01-02T15:04:05Z07:00"), r.Resume.Error)
			}
			after = r.ID
		}
		if len(runs) < 100 {
			return nil
		}
	}
}
