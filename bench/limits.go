package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/mattn/go-sqlite3" // driver "sqlite3" (cgo), superstep's
	_ "modernc.org/sqlite"          // driver "sqlite" (pure Go), DBOS's and go-workflows'
)

// wLimit is the limit "workload": one durable write of payloadBytes.
const wLimit workload = "limit"

// fsyncLimit appends payloadBytes to a file and fdatasyncs it: the disk's
// limit for one durable write.
type fsyncLimit struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

func (l *fsyncLimit) name() string                 { return "limit: write+fsync" }
func (l *fsyncLimit) storage() string              { return "file, fdatasync" }
func (l *fsyncLimit) supports(w workload) bool     { return w == wLimit }
func (l *fsyncLimit) pgDatabase() string           { return "" }
func (l *fsyncLimit) close(context.Context) error  { return l.f.Close() }
func (l *fsyncLimit) open(_ context.Context) error { return l.openFile() }

func (l *fsyncLimit) openFile() error {
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("bench: open %s: %w", l.path, err)
	}
	l.f = f
	return nil
}

func (l *fsyncLimit) do(context.Context, workload, string) error {
	buf := []byte(payload(payloadBytes))
	if _, err := l.f.Write(buf); err != nil {
		return fmt.Errorf("bench: write: %w", err)
	}
	if err := fdatasync(l.f); err != nil {
		return fmt.Errorf("bench: fdatasync: %w", err)
	}
	return nil
}

// sqliteLimit is a bare one-row INSERT transaction in WAL mode.
type sqliteLimit struct {
	driver, path, sync string
	db                 *sql.DB
}

func (l *sqliteLimit) name() string             { return "limit: SQLite insert tx (" + l.driver + ")" }
func (l *sqliteLimit) storage() string          { return "SQLite " + l.sync }
func (l *sqliteLimit) supports(w workload) bool { return w == wLimit }
func (l *sqliteLimit) pgDatabase() string       { return "" }
func (l *sqliteLimit) close(context.Context) error {
	return l.db.Close()
}

func (l *sqliteLimit) open(ctx context.Context) error {
	dsn := "file:" + l.path + "?_journal_mode=WAL&_synchronous=" + l.sync + "&_busy_timeout=5000&_txlock=immediate"
	if l.driver == "sqlite" {
		dsn = "file:" + l.path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(" + l.sync + ")&_pragma=busy_timeout(5000)&_txlock=immediate"
	}
	db, err := sql.Open(l.driver, dsn)
	if err != nil {
		return fmt.Errorf("bench: open sqlite: %w", err)
	}
	db.SetMaxOpenConns(1) // one writer, as SQLite allows
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v BLOB)`); err != nil {
		_ = db.Close()
		return fmt.Errorf("bench: create table: %w", err)
	}
	var mode string
	if err := db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&mode); err != nil || (l.sync == "FULL" && mode != "2") {
		_ = db.Close()
		return fmt.Errorf("bench: synchronous is %q, want %s: %v", mode, l.sync, err)
	}
	l.db = db
	return nil
}

func (l *sqliteLimit) do(ctx context.Context, _ workload, _ string) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("bench: begin: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO t (v) VALUES (?)`, []byte(payload(payloadBytes))); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("bench: insert: %w", err)
	}
	return tx.Commit()
}

// pgLimit is a bare one-row INSERT transaction (synchronous_commit=on).
type pgLimit struct {
	url, db string
	pool    *pgxpool.Pool
}

func (l *pgLimit) name() string             { return "limit: PostgreSQL insert tx" }
func (l *pgLimit) storage() string          { return "PostgreSQL" }
func (l *pgLimit) supports(w workload) bool { return w == wLimit }
func (l *pgLimit) pgDatabase() string       { return l.db }
func (l *pgLimit) close(context.Context) error {
	l.pool.Close()
	return nil
}

func (l *pgLimit) open(ctx context.Context) error {
	cfg, err := pgxpool.ParseConfig(l.url)
	if err != nil {
		return fmt.Errorf("bench: parse url: %w", err)
	}
	cfg.MaxConns = 64
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench: pool: %w", err)
	}
	if _, err := p.Exec(ctx, `CREATE TABLE IF NOT EXISTS t (id bigserial PRIMARY KEY, v bytea)`); err != nil {
		p.Close()
		return fmt.Errorf("bench: create table: %w", err)
	}
	l.pool = p
	return nil
}

func (l *pgLimit) do(ctx context.Context, _ workload, _ string) error {
	// A single statement is its own transaction: BEGIN, INSERT, COMMIT.
	_, err := l.pool.Exec(ctx, `INSERT INTO t (v) VALUES ($1)`, []byte(payload(payloadBytes)))
	if err != nil {
		return fmt.Errorf("bench: insert: %w", err)
	}
	return nil
}
