package crash

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
)

// postgresURL is the server the PostgreSQL variant uses.
func postgresURL() string {
	if u := os.Getenv("SUPERSTEP_TEST_POSTGRES"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// postgresDatabase creates a database of its own for t and drops it at
// cleanup; it returns its URL. Unreachable PostgreSQL fails the test in CI
// and skips it elsewhere.
func postgresDatabase(t *testing.T) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin := postgresURL()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL at %s unreachable in CI: %v", admin, err)
		}
		t.Skipf("PostgreSQL at %s unreachable (set SUPERSTEP_TEST_POSTGRES): %v", admin, err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("superstep_crash_%d_%d", os.Getpid(), time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("parse %s: %v", admin, err)
	}
	u.Path = "/" + name
	return u.String()
}

func TestCrash_Postgres(t *testing.T) {
	t.Parallel()
	db := postgresDatabase(t)
	runCrash(t, &backend{
		dbArg:     db,
		open:      func(ctx context.Context) (store.Store, error) { return postgres.Open(ctx, db, nil) },
		extraArgs: postgresServeArgs,
	})
}
