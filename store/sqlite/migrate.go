package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"strings"

	"github.com/superstep/superstep/store/internal/migration"
)

// applicationID marks a superstep database in the SQLite header
// (PRAGMA application_id): "SPST".
const applicationID = 0x53505354

//go:embed migration/*.up.sql
var migrationFS embed.FS

// migrations returns the embedded migrations in version order; versions
// are contiguous from 1 (store/internal/migration checks it).
func migrations() ([]migration.Migration, error) {
	ms, err := migration.Load(migrationFS, "migration")
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return ms, nil
}

// SchemaVersion is the schema version this build writes.
func SchemaVersion() int {
	ms, _ := migrations()
	return len(ms)
}

// migrate checks that db is a superstep database (or an empty file) at a
// version this build knows, then applies the pending migrations, each in
// its own transaction together with the new user_version.
func migrate(ctx context.Context, db *sql.DB, path string, pageSize int) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	return migrateTo(ctx, db, path, pageSize, ms)
}

// migrateTo is migrate with the migrations ms, a prefix of migrations()
// (tests build databases of an older schema version with it).
func migrateTo(ctx context.Context, db *sql.DB, path string, pageSize int, ms []migration.Migration) error {
	appID, version, tables, err := readHeader(ctx, db)
	if err != nil {
		return mapError("open "+path, err)
	}
	switch {
	case appID == 0 && version == 0 && tables == 0:
		// A new, empty database: set the page size before WAL and the
		// first table.
		if _, err := db.ExecContext(ctx, fmt.Sprintf("PRAGMA page_size = %d", pageSize)); err != nil {
			return mapError("set page size", err)
		}
	case appID != applicationID:
		return fmt.Errorf("%w: %s (application_id %#x)", ErrNotSuperstep, path, appID)
	case version > len(ms):
		return fmt.Errorf("%w: %s has schema version %d, this build knows up to %d", ErrTooNew, path, version, len(ms))
	}
	if err := setWAL(ctx, db); err != nil {
		return err
	}
	for _, m := range ms[version:] {
		if err := applyMigration(ctx, db, m); err != nil {
			return err
		}
	}
	return nil
}

// readHeader reads the application id, schema version and table count.
func readHeader(ctx context.Context, db *sql.DB) (appID, version, tables int, err error) {
	if err = db.QueryRowContext(ctx, "PRAGMA application_id").Scan(&appID); err != nil {
		return
	}
	if err = db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return
	}
	err = db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&tables)
	return
}

// setWAL switches the database to write-ahead logging (persistent).
func setWAL(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode); err != nil {
		return mapError("set WAL", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("sqlite: set WAL: journal_mode is %q", mode)
	}
	return nil
}

// applyMigration applies m and records its version in one transaction.
func applyMigration(ctx context.Context, db *sql.DB, m migration.Migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return mapError("migrate "+m.File, err)
	}
	defer tx.Rollback()
	stmts := []string{
		m.SQL,
		fmt.Sprintf("PRAGMA application_id = %d", applicationID),
		fmt.Sprintf("PRAGMA user_version = %d", m.Version),
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return mapError("migrate "+m.File, err)
		}
	}
	return mapError("migrate "+m.File, tx.Commit())
}
