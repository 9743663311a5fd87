// Package pgtest gives each test its own PostgreSQL database or schema on
// the server at $SUPERSTEP_TEST_POSTGRES, and drops it when the test ends,
// so tests that share one server run in parallel and leave nothing behind.
//
// A test that cannot reach the server fails when $CI is set (CI always has
// PostgreSQL, so a missing one is a broken set-up, not a reason to pass)
// and is skipped with the reason otherwise.
//
// It is a test harness (see internal/testkit): only tests import it.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultURL is the server used when $SUPERSTEP_TEST_POSTGRES is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// Timeout bounds each connection and statement: generous, since tests run
// on loaded machines, and an unreachable local server refuses at once.
const Timeout = 30 * time.Second

// TB is the part of testing.TB the package uses.
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// URL returns the server tests use: $SUPERSTEP_TEST_POSTGRES, or
// DefaultURL.
func URL() string {
	if u := os.Getenv("SUPERSTEP_TEST_POSTGRES"); u != "" {
		return u
	}
	return DefaultURL
}

// prefixPattern is what a name prefix may hold: the names it starts are
// used unquoted in SQL and as postgres.Options.Schema, which takes plain
// identifiers only.
var prefixPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,30}$`)

// Database creates a database of its own for tb, named prefix followed by
// a unique suffix, drops it (closing any connection left to it) when tb
// ends, and returns its URL: URL() with the database name replaced.
func Database(tb TB, prefix string) string {
	tb.Helper()
	admin := URL()
	u, err := url.Parse(admin)
	if err != nil {
		tb.Fatalf("pgtest: parse %s: %v", admin, err)
	}
	name := uniqueName(tb, prefix)
	run(tb, admin, "CREATE DATABASE "+name, true)
	tb.Cleanup(func() { run(tb, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)", false) })
	u.Path = "/" + name
	return u.String()
}

// Schema returns the name of a fresh schema in the database at URL(),
// named prefix followed by a unique suffix, and drops it with all it holds
// when tb ends. It does not create the schema: postgres.Open does, with
// Options.Schema set to it.
func Schema(tb TB, prefix string) string {
	tb.Helper()
	name := uniqueName(tb, prefix)
	run(tb, URL(), "SELECT 1", true)
	tb.Cleanup(func() { run(tb, URL(), "DROP SCHEMA IF EXISTS "+name+" CASCADE", false) })
	return name
}

// SchemaURL is Schema for code that takes a URL only (a server's --db, a
// store opened without Options): it returns URL() with search_path set to
// the fresh schema, which postgres.Open creates, and the schema's name.
func SchemaURL(tb TB, prefix string) (u, schema string) {
	tb.Helper()
	schema = Schema(tb, prefix)
	parsed, err := url.Parse(URL())
	if err != nil {
		tb.Fatalf("pgtest: parse %s: %v", URL(), err)
	}
	q := parsed.Query()
	q.Set("search_path", schema)
	parsed.RawQuery = q.Encode()
	return parsed.String(), schema
}

// uniqueName returns prefix, "_" and random hex: unique across the tests
// and processes sharing the server.
func uniqueName(tb TB, prefix string) string {
	tb.Helper()
	if !prefixPattern.MatchString(prefix) {
		tb.Fatalf("pgtest: name prefix %q is not a lower-case identifier of at most 31 characters", prefix)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// run runs one statement on a connection of its own to server. With
// setup, an unreachable server fails tb under $CI and skips it otherwise,
// and a failing statement fails it; without (at cleanup), errors are
// reported and tb goes on.
func run(tb TB, server, sql string, setup bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, server)
	switch {
	case err != nil && !setup:
		tb.Errorf("pgtest: %s: %v", sql, err)
		return
	case err != nil:
		unreachable(tb, server, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		err = fmt.Errorf("pgtest: %s: %w", sql, err)
		if setup {
			tb.Fatalf("%v", err)
			return
		}
		tb.Errorf("%v", err)
	}
}

// unreachable fails tb when $CI is set and skips it otherwise.
func unreachable(tb TB, server string, err error) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatalf("PostgreSQL at %s unreachable (CI is set): %v", server, err)
		return
	}
	tb.Skipf("PostgreSQL at %s unreachable, skipping (set SUPERSTEP_TEST_POSTGRES; set CI to make this fail): %v", server, err)
}
