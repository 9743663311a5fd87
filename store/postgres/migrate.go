package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/superstep/superstep/store/internal/migration"
)

//go:embed migration/*.up.sql
var migrationFS embed.FS

// superstepTables are the tables of a superstep schema; finding any of them
// without the version table means the schema is not superstep's.
var superstepTables = []string{"runs", "responses", "events", "event_records", "blobs", "checkpoints", "hosts", "idempotency_keys", "conversations", "conversation_items", "pending_calls", "webhook_deliveries", "lease_claims", "journal"}

// loadMigrations reads migration/NNN_name.up.sql in version order.
func loadMigrations() ([]migration.Migration, error) {
	ms, err := migration.Load(migrationFS, "migration")
	if err != nil {
		return nil, fmt.Errorf("store/postgres: %w", err)
	}
	return ms, nil
}

// migrate brings the schema up to the newest embedded migration in one
// transaction, serialised across hosts by an advisory lock.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	return migrateTo(ctx, pool, schema, ms)
}

// migrateTo is migrate with the migrations ms, a prefix of
// loadMigrations() (tests build schemas of an older version with it).
func migrateTo(ctx context.Context, pool *pgxpool.Pool, schema string, ms []migration.Migration) error {
	latest := ms[len(ms)-1].Version
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('superstep.migrate.' || current_schema()))"); err != nil {
			return fmt.Errorf("store/postgres: migrate: lock: %w", err)
		}
		current, err := schemaVersion(ctx, tx, schema)
		if err != nil {
			return err
		}
		if current > latest {
			return fmt.Errorf("store/postgres: schema %q is at version %d, newer than this superstep supports (%d): upgrade superstep", schema, current, latest)
		}
		for _, m := range ms {
			if m.Version <= current {
				continue
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("store/postgres: migration %03d_%s: %w", m.Version, m.Name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO superstep_schema_version (version, name, applied_at) VALUES ($1, $2, now())", m.Version, m.Name); err != nil {
				return fmt.Errorf("store/postgres: migration %03d_%s: record: %w", m.Version, m.Name, err)
			}
		}
		return nil
	})
}

// schemaVersion returns the schema's migration version, creating the
// version table in an empty schema; 0 means nothing applied yet.
func schemaVersion(ctx context.Context, tx pgx.Tx, schema string) (int, error) {
	var hasVersion bool
	var foreign int
	err := tx.QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'superstep_schema_version'),
		(SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ANY ($1))`,
		superstepTables).Scan(&hasVersion, &foreign)
	if err != nil {
		return 0, fmt.Errorf("store/postgres: migrate: inspect schema: %w", err)
	}
	if !hasVersion {
		if foreign > 0 {
			return 0, fmt.Errorf("store/postgres: schema %q has tables named like superstep's but no superstep_schema_version table: not a superstep database", schema)
		}
		_, err := tx.Exec(ctx, `CREATE TABLE superstep_schema_version (
			version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)`)
		if err != nil {
			return 0, fmt.Errorf("store/postgres: migrate: create version table: %w", err)
		}
		return 0, nil
	}
	var v int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM superstep_schema_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("store/postgres: migrate: read version: %w", err)
	}
	return v, nil
}
