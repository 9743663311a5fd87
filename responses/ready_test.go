package responses

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/internal/testkit/pgtest"
	"github.com/superstep/superstep/store/sqlite"
)

// internals are strings of the test set-ups that must never reach a
// client: the database's user, name, address and driver.
var internals = []string{"postgres", "127.0.0.1", "sqlite", "dial", "user=", "database"}

// requireUnavailable requires a 503 with Retry-After whose error says
// what failed without internals.
func requireUnavailable(t *testing.T, what string, rp reply) {
	t.Helper()
	if rp.status != 503 || rp.header.Get("Retry-After") == "" {
		t.Fatalf("%s: %d (Retry-After %q) %s; want 503 with Retry-After", what, rp.status, rp.header.Get("Retry-After"), rp.body)
	}
	e := errorOf(t, rp)
	for _, s := range internals {
		if strings.Contains(strings.ToLower(e.Message), s) {
			t.Fatalf("%s: message %q reveals %q", what, e.Message, s)
		}
	}
	if e.Type != typeServer {
		t.Fatalf("%s: type %q", what, e.Type)
	}
}

// TestReadyz_Postgres_StoreCut: while PostgreSQL is cut off (a TCP proxy
// resets every connection), /readyz says 503 and /healthz still ok; a
// GET of a response is a 503 with Retry-After that names no database
// (before: a 500 without Retry-After, and no readiness at all); once the
// database is back, /readyz says ok and the GET works again.
func TestReadyz_Postgres_StoreCut(t *testing.T) {
	t.Parallel()
	st, proxy, _ := openPostgresBehindProxy(t)
	ts := newTestServer(t, st, nil)
	id := ts.createBackground(`{"model":"demo.echo","input":"hi","background":true}`)
	if rp := ts.do("GET", "/readyz", ""); rp.status != 200 || rp.body != "ok\n" {
		t.Fatalf("readyz before the cut: %d %q", rp.status, rp.body)
	}
	proxy.Cut()
	waitFor(t, "/readyz to say 503", func() bool { return ts.do("GET", "/readyz", "").status == 503 })
	if rp := ts.do("GET", "/readyz", ""); rp.status != 503 || strings.Contains(rp.body, "127.0.0.1") {
		t.Fatalf("readyz during the cut: %d %q", rp.status, rp.body)
	}
	if rp := ts.do("GET", "/healthz", ""); rp.status != 200 {
		t.Fatalf("healthz during the cut: %d", rp.status)
	}
	requireUnavailable(t, "GET during the cut", ts.do("GET", "/v1/responses/"+id, ""))
	proxy.Restore()
	waitFor(t, "/readyz to say ok", func() bool { return ts.do("GET", "/readyz", "").status == 200 })
	if rp := ts.do("GET", "/v1/responses/"+id, ""); rp.status != 200 {
		t.Fatalf("GET after the cut: %d %s", rp.status, rp.body)
	}
}

// TestReadyz_SQLite_WriteLocked: another connection to the file holds
// SQLite's write lock (reads still work, writes cannot): /readyz says
// 503, and a DELETE, which must write, is a 503 with Retry-After rather
// than a 500; both recover once the lock is released.
func TestReadyz_SQLite_WriteLocked(t *testing.T) {
	t.Parallel()
	st, path := openSQLite(t, &sqlite.Options{BusyTimeout: 10 * time.Millisecond})
	ts := newTestServer(t, st, &Options{StoreTimeout: 2 * time.Second})
	id := ts.createBackground(`{"model":"demo.echo","input":"hi","background":true}`)
	waitFor(t, "the response to complete", func() bool {
		return strings.Contains(ts.do("GET", "/v1/responses/"+id, "").body, `"status":"completed"`)
	})
	other, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	locked := true
	defer func() {
		if locked {
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
		}
	}()
	waitFor(t, "/readyz to say 503", func() bool { return ts.do("GET", "/readyz", "").status == 503 })
	if rp := ts.do("GET", "/healthz", ""); rp.status != 200 {
		t.Fatalf("healthz while locked: %d", rp.status)
	}
	if rp := ts.do("GET", "/v1/responses/"+id, ""); rp.status != 200 {
		t.Fatalf("GET (a read) while locked: %d %s", rp.status, rp.body)
	}
	requireUnavailable(t, "DELETE while locked", ts.do("DELETE", "/v1/responses/"+id, ""))
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	locked = false
	waitFor(t, "/readyz to say ok", func() bool { return ts.do("GET", "/readyz", "").status == 200 })
	if rp := ts.do("DELETE", "/v1/responses/"+id, ""); rp.status != 200 {
		t.Fatalf("DELETE after the lock: %d %s", rp.status, rp.body)
	}
}

// TestStoreTimeout_Postgres_BlockedReads: another transaction holds an
// exclusive lock on the tables (reads block until it ends, as in a
// network blackhole): GET of a response and /v1/hosts end after
// StoreTimeout with 503 + Retry-After instead of hanging for the whole
// stall (before: they waited for the lock, 40 s in the blackhole probe).
func TestStoreTimeout_Postgres_BlockedReads(t *testing.T) {
	t.Parallel()
	st, _, schema := openPostgresBehindProxy(t)
	ts := newTestServer(t, st, &Options{StoreTimeout: 300 * time.Millisecond})
	id := ts.createBackground(`{"model":"demo.echo","input":"hi","background":true}`)
	ctx := context.Background()
	lockConn, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer lockConn.Close(ctx)
	tx, err := lockConn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, fmt.Sprintf("LOCK TABLE %[1]s.responses, %[1]s.runs, %[1]s.hosts IN ACCESS EXCLUSIVE MODE", schema)); err != nil {
		t.Fatal(err)
	}
	requireUnavailable(t, "GET while the tables are locked", ts.do("GET", "/v1/responses/"+id, ""))
	requireUnavailable(t, "GET /v1/hosts while the tables are locked", ts.do("GET", "/v1/hosts", ""))
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if rp := ts.do("GET", "/v1/responses/"+id, ""); rp.status != 200 {
		t.Fatalf("GET after the lock: %d %s", rp.status, rp.body)
	}
}
