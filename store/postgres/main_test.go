package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

// testParallel is the default -test.parallel of this package: its tests
// wait on PostgreSQL (fsync, DDL) far more than they use the CPU, and each
// opens its own schema, so running more of them at once than there are
// CPUs keeps the package well under a minute.
const testParallel = "8"

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", testParallel)
	}
	goleak.VerifyTestMain(m)
}

const defaultTestURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// testURL is the database the tests use: $SUPERSTEP_TEST_POSTGRES or the
// local default.
func testURL() string {
	if u := os.Getenv("SUPERSTEP_TEST_POSTGRES"); u != "" {
		return u
	}
	return defaultTestURL
}

var (
	reachOnce sync.Once
	reachErr  error
)

// requireDB fails the test when the database is unreachable and $CI is set,
// and skips it with the reason otherwise.
func requireDB(t testing.TB) {
	t.Helper()
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testURL())
		if err != nil {
			reachErr = err
			return
		}
		reachErr = conn.Ping(ctx)
		closeConn(conn)
	})
	if reachErr == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("PostgreSQL at %s unreachable (CI is set): %v", testURL(), reachErr)
	}
	t.Skipf("PostgreSQL at %s unreachable, skipping (set CI to make this fail): %v", testURL(), reachErr)
}

// newSchemaName returns a fresh schema name and registers its DROP.
func newSchemaName(t testing.TB) string {
	t.Helper()
	requireDB(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "test_" + hex.EncodeToString(b)
	t.Cleanup(func() { dropSchema(t, schema) })
	return schema
}

func dropSchema(t testing.TB, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
		return
	}
	defer closeConn(conn)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
	}
}

// openStore opens a Store on schema and registers its Close.
func openStore(t testing.TB, schema string, opts *Options) *Store {
	t.Helper()
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.Schema = schema
	s, err := Open(context.Background(), testURL(), &o)
	if err != nil {
		t.Fatalf("Open(schema %s): %v", schema, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newStore opens a Store on a fresh schema dropped at cleanup.
func newStore(t testing.TB) *Store {
	t.Helper()
	return openStore(t, newSchemaName(t), nil)
}

// testDSN names a store's schema and database in one string for
// storetest's Harness (and its crash child processes).
func testDSN(s *Store) string { return s.opts.Schema + "|" + testURL() }

// parseTestDSN splits a testDSN string.
func parseTestDSN(dsn string) (schema, url string) {
	schema, url, _ = strings.Cut(dsn, "|")
	return schema, url
}

// withParam adds a query parameter to a PostgreSQL URL.
func withParam(url, kv string) string {
	if strings.Contains(url, "?") {
		return url + "&" + kv
	}
	return url + "?" + kv
}
