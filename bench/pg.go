package main

import (
	"context"
	"fmt"
	"net/url"
	"os"

	"github.com/jackc/pgx/v5"
)

// pgAdminURL is the maintenance connection (database "test" by default).
func pgAdminURL() string {
	if u := os.Getenv("SUPERSTEP_TEST_POSTGRES"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// pgURLFor is the admin URL pointed at database db.
func pgURLFor(db string) (string, error) {
	u, err := url.Parse(pgAdminURL())
	if err != nil {
		return "", fmt.Errorf("bench: parse postgres url: %w", err)
	}
	u.Path = "/" + db
	return u.String(), nil
}

// pgAdmin runs CREATE/DROP DATABASE and reads the statistics counters.
type pgAdmin struct{ conn *pgx.Conn }

func newPGAdmin(ctx context.Context) (*pgAdmin, error) {
	c, err := pgx.Connect(ctx, pgAdminURL())
	if err != nil {
		return nil, fmt.Errorf("bench: connect postgres: %w", err)
	}
	return &pgAdmin{conn: c}, nil
}

func (a *pgAdmin) close(ctx context.Context) error { return a.conn.Close(ctx) }

// createDB (re)creates database db, empty.
func (a *pgAdmin) createDB(ctx context.Context, db string) error {
	if err := a.dropDB(ctx, db); err != nil {
		return err
	}
	if _, err := a.conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		return fmt.Errorf("bench: create database %s: %w", db, err)
	}
	return nil
}

func (a *pgAdmin) dropDB(ctx context.Context, db string) error {
	if _, err := a.conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("bench: drop database %s: %w", db, err)
	}
	return nil
}

// pgCounters are cumulative counters read from the server.
type pgCounters struct {
	xactCommit int64 // pg_stat_database.xact_commit of the database
	walLSN     int64 // pg_current_wal_lsn() in bytes (cluster-wide)
	nextXID    int64 // next transaction id: write transactions started (cluster-wide)
}

func (a *pgAdmin) counters(ctx context.Context, db string) (pgCounters, error) {
	var c pgCounters
	if _, err := a.conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return c, fmt.Errorf("bench: clear stats snapshot: %w", err)
	}
	err := a.conn.QueryRow(ctx, `SELECT coalesce((SELECT xact_commit FROM pg_stat_database WHERE datname = $1), 0),
		(pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint, pg_snapshot_xmax(pg_current_snapshot())::text::bigint`, db).Scan(&c.xactCommit, &c.walLSN, &c.nextXID)
	if err != nil {
		return c, fmt.Errorf("bench: read counters: %w", err)
	}
	return c, nil
}

// settings returns the durability settings in force, for the report.
func (a *pgAdmin) settings(ctx context.Context) (string, error) {
	var ver, sc, fs, wsm string
	err := a.conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('synchronous_commit'),
		current_setting('fsync'), current_setting('wal_sync_method')`).Scan(&ver, &sc, &fs, &wsm)
	if err != nil {
		return "", fmt.Errorf("bench: read settings: %w", err)
	}
	return fmt.Sprintf("PostgreSQL %s, synchronous_commit=%s, fsync=%s, wal_sync_method=%s", ver, sc, fs, wsm), nil
}
