package host_test

import (
	"context"
	"database/sql"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/internal/testkit/pgtest"
	"github.com/superstep/superstep/internal/testkit/tcpproxy"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
	"github.com/superstep/superstep/store/sqlite"
)

// outageRuns and outageSteps size the runs in flight during an outage:
// each commits a superstep every outageStepDelayMS, so every run is in a
// commit (or about to be) when the store goes away.
const (
	outageRuns        = 7
	outageSteps       = "40"
	outageStepDelayMS = "20"
)

// TestHost_Postgres_TransientOutage cuts every connection between the
// host's store and PostgreSQL (a TCP proxy resets them and refuses new
// ones) while runs are in flight: for 1.2 s within the lease, and for
// longer than the lease guard lets a run go without renewal. A transient failure never
// fails a run: every response completes once the database is back, none
// fails. (Before, a commit was retried for ~0.6 s, then the run committed
// `failed`, which stuck when the database was back by then.)
func TestHost_Postgres_TransientOutage(t *testing.T) {
	t.Parallel()
	for _, o := range outages {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			testPostgresOutage(t, o)
		})
	}
}

// outage says how long the store is unavailable and under what lease.
type outage struct {
	name     string
	duration time.Duration
	lease    time.Duration
	// handedBack: the outage outlasts 3/4 of the lease, so the lease
	// guard stops the runs in their commit retries; they are left for
	// recovery and recovered once the store is back.
	handedBack bool
}

var outages = []outage{
	// The lease outlives the outage: the commits are retried through it.
	{name: "WithinLease", duration: 1200 * time.Millisecond, lease: 20 * time.Second},
	{name: "PastLease", duration: 2500 * time.Millisecond, lease: 2 * time.Second, handedBack: true},
}

func testPostgresOutage(t *testing.T, o outage) {
	schema := pgSchema(t)
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := tcpproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	u.Host = proxy.Addr()
	s, err := postgres.Open(context.Background(), u.String(), &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	testOutage(t, s, o, proxy.Cut, proxy.Restore)
}

// TestHost_SQLite_TransientBusy: another connection to the file (an
// operator's shell) holds SQLite's write lock past the busy timeout while
// runs are in flight; every response completes, none fails.
func TestHost_SQLite_TransientBusy(t *testing.T) {
	t.Parallel()
	for _, o := range outages {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			testSQLiteBusy(t, o)
		})
	}
}

func testSQLiteBusy(t *testing.T, o outage) {
	path := filepath.Join(t.TempDir(), "host.db")
	s, err := sqlite.Open(context.Background(), path, &sqlite.Options{BusyTimeout: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
	lock := func() {
		if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
	}
	unlock := func() {
		if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
	}
	testOutage(t, s, o, lock, unlock)
}

// testOutage starts outageRuns runs on a host over s, makes the store
// unavailable with cut once they have committed, for o.duration, undoes
// it with restore, and requires every response to complete.
func testOutage(t *testing.T, s store.Store, o outage, cut, restore func()) {
	t.Helper()
	cfg := host.Config{HostID: "h1", LeaseDuration: o.lease}
	h := newHost(t, s, &cfg, registerDemos)
	defer shutdown(t, h)
	ids := make([]string, outageRuns)
	for i := range ids {
		ids[i] = create(t, h, examples.Silent, "x", map[string]string{"steps": outageSteps, "step_delay_ms": outageStepDelayMS}).ID
	}
	for range 2 * outageRuns {
		h.WaitCommitted(t)
	}
	cut()
	time.Sleep(o.duration) // the outage itself, not a wait for the host
	restore()
	if o.handedBack {
		h.WaitLeaseLost(t) // stopped by the lease guard, not failed
	}

	var wg sync.WaitGroup
	statuses := make([]store.Status, len(ids))
	for i, id := range ids {
		wg.Go(func() {
			r, err := h.Wait(testCtx(t), id, "")
			if err != nil {
				t.Errorf("Wait %s: %v", id, err)
				return
			}
			statuses[i] = r.Status
		})
	}
	wg.Wait()
	for i, id := range ids {
		if statuses[i] != store.StatusCompleted {
			t.Errorf("response %s ended %s after the outage, want completed", id, statuses[i])
			continue
		}
		evs := collect(t, h, id, -1)
		checkLog(t, evs)
		if got := outputs(evs); !slices.Equal(got, []string{"done after " + outageSteps}) {
			t.Errorf("response %s outputs %q", id, got)
		}
	}
}
