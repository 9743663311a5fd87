package main

import (
	"context"

	"github.com/superstep/superstep/internal/dburl"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
	"github.com/superstep/superstep/store/sqlite"
)

// openStore opens db: a postgres:// URL selects PostgreSQL, anything else
// is a SQLite file path.
func openStore(ctx context.Context, db string) (store.Store, error) {
	if dburl.IsPostgres(db) {
		s, err := postgres.Open(ctx, db, nil)
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
