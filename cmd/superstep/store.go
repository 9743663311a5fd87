package main

import (
	"context"
	"strings"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
	"github.com/superstep/superstep/store/sqlite"
)

// isPostgresURL reports whether db names a PostgreSQL database rather than
// a SQLite file.
func isPostgresURL(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// openStore opens db: a postgres:// URL selects PostgreSQL, anything else
// is a SQLite file path.
func openStore(ctx context.Context, db string) (store.Store, error) {
	return openStoreWith(ctx, db, storeOptions{})
}

// storeOptions are the store settings serve takes as flags.
type storeOptions struct {
	noGroupCommit bool // PostgreSQL: postgres.Options.NoGroupCommit
}

// openStoreWith is openStore with o.
func openStoreWith(ctx context.Context, db string, o storeOptions) (store.Store, error) {
	if isPostgresURL(db) {
		s, err := postgres.Open(ctx, db, &postgres.Options{NoGroupCommit: o.noGroupCommit})
		if err != nil {
			return nil, withCode(exitStoreOpen, err)
		}
		return s, nil
	}
	s, err := sqlite.Open(ctx, db, nil)
	if err != nil {
		return nil, withCode(exitStoreOpen, err)
	}
	return s, nil
}

// redactURL hides a password in a database URL for logs.
func redactURL(db string) string {
	if !isPostgresURL(db) {
		return db
	}
	scheme, rest, _ := strings.Cut(db, "://")
	userinfo, hostpart, ok := strings.Cut(rest, "@")
	if !ok {
		return db
	}
	user, _, hasPass := strings.Cut(userinfo, ":")
	if !hasPass {
		return db
	}
	return scheme + "://" + user + ":xxxxx@" + hostpart
}
