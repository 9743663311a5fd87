package pgtest_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/superstep/superstep/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// withConn runs fn on a connection of its own to the server at u.
func withConn(t *testing.T, u string, fn func(ctx context.Context, conn *pgx.Conn) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := fn(ctx, conn); err != nil {
		t.Fatal(err)
	}
}

// exists reports whether query (with one argument, name) counts a row on
// the server at URL().
func exists(t *testing.T, query, name string) bool {
	t.Helper()
	var n int
	withConn(t, pgtest.URL(), func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, query, name).Scan(&n)
	})
	return n > 0
}

// execOn runs sql on the server at u.
func execOn(t *testing.T, u, sql string) {
	t.Helper()
	withConn(t, u, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, sql)
		return err
	})
}

// A database is usable during the test and gone after it, even with a
// connection left open to it.
func TestDatabase(t *testing.T) {
	var name string
	var left *pgx.Conn
	t.Cleanup(func() {
		if left != nil {
			_ = left.Close(context.Background())
		}
	})
	t.Run("use", func(t *testing.T) {
		u := pgtest.Database(t, "pgtest_db")
		name = u[strings.LastIndexByte(u, '/')+1:]
		if i := strings.IndexByte(name, '?'); i >= 0 {
			name = name[:i]
		}
		if !strings.HasPrefix(name, "pgtest_db_") {
			t.Fatalf("database %q from URL %s", name, u)
		}
		execOn(t, u, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)")
		// Left open past the test: the drop must end it.
		var err error
		if left, err = pgx.Connect(context.Background(), u); err != nil {
			t.Fatal(err)
		}
	})
	if name == "" {
		t.Skip("no database (PostgreSQL unreachable)")
	}
	if exists(t, "SELECT count(*) FROM pg_database WHERE datname = $1", name) {
		t.Errorf("database %s still exists after its test", name)
	}
}

// A schema is created by its first user and gone, with its tables, after
// the test.
func TestSchema(t *testing.T) {
	var name string
	t.Run("use", func(t *testing.T) {
		name = pgtest.Schema(t, "pgtest_schema")
		if !strings.HasPrefix(name, "pgtest_schema_") {
			t.Fatalf("schema %q", name)
		}
		execOn(t, pgtest.URL(), fmt.Sprintf("CREATE SCHEMA %s; CREATE TABLE %s.t (x int)", name, name))
	})
	if name == "" {
		t.Skip("no schema (PostgreSQL unreachable)")
	}
	if exists(t, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1", name) {
		t.Errorf("schema %s still exists after its test", name)
	}
}

// fakeTB records what pgtest asks of a test; Fatalf and Skipf end the
// calling goroutine as testing.T's do.
type fakeTB struct {
	mu       sync.Mutex
	fatal    string
	skip     string
	errs     []string
	cleanups []func()
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Cleanup(fn func()) { f.mu.Lock(); f.cleanups = append(f.cleanups, fn); f.mu.Unlock() }
func (f *fakeTB) Errorf(s string, a ...any) {
	f.mu.Lock()
	f.errs = append(f.errs, fmt.Sprintf(s, a...))
	f.mu.Unlock()
}
func (f *fakeTB) Fatalf(s string, a ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(s, a...)
	f.mu.Unlock()
	runtime.Goexit()
}
func (f *fakeTB) Skipf(s string, a ...any) {
	f.mu.Lock()
	f.skip = fmt.Sprintf(s, a...)
	f.mu.Unlock()
	runtime.Goexit()
}

// call runs fn with a fake test in a goroutine of its own, as Fatalf and
// Skipf end it.
func call(fn func(tb pgtest.TB)) *fakeTB {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f
}

// An unreachable server fails the test under CI and skips it otherwise,
// for databases and schemas alike.
func TestUnreachable(t *testing.T) {
	t.Setenv("SUPERSTEP_TEST_POSTGRES", "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5")
	uses := map[string]func(pgtest.TB){
		"Database": func(tb pgtest.TB) { pgtest.Database(tb, "pgtest_x") },
		"Schema":   func(tb pgtest.TB) { pgtest.Schema(tb, "pgtest_x") },
	}
	for name, use := range uses {
		t.Setenv("CI", "")
		f := call(use)
		if f.fatal != "" || !strings.Contains(f.skip, "unreachable") || len(f.cleanups) != 0 {
			t.Errorf("%s without CI: fatal %q, skip %q, %d cleanups; want a skip", name, f.fatal, f.skip, len(f.cleanups))
		}
		t.Setenv("CI", "true")
		f = call(use)
		if f.skip != "" || !strings.Contains(f.fatal, "CI is set") {
			t.Errorf("%s with CI: fatal %q, skip %q; want a failure", name, f.fatal, f.skip)
		}
	}
}

// A prefix that is not a plain identifier fails before any SQL is built.
func TestBadPrefix(t *testing.T) {
	for _, p := range []string{"", "Upper", "a-b", "x; DROP DATABASE test", strings.Repeat("a", 32)} {
		f := call(func(tb pgtest.TB) { pgtest.Database(tb, p) })
		if !strings.Contains(f.fatal, "prefix") {
			t.Errorf("prefix %q: fatal %q", p, f.fatal)
		}
	}
}
