package host_test

import (
	"context"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/internal/testkit/pgtest"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
)

// clockCrashStore is a crashStore that keeps the store's clock
// (store.Clock), which crashStore's embedding of store.Store hides.
type clockCrashStore struct{ *crashStore }

func (s clockCrashStore) StoreNow(ctx context.Context) (time.Time, error) {
	return s.crashStore.Store.(store.Clock).StoreNow(ctx)
}

// requireLease fails unless run id's lease is owner's at epoch.
func requireLease(t *testing.T, s store.Store, id, owner string, epoch int64) {
	t.Helper()
	run, err := s.RunGet(testCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if run.Lease.Owner != owner || run.Lease.Epoch != epoch {
		t.Fatalf("run %s: lease %+v, want %s's at epoch %d", id, run.Lease, owner, epoch)
	}
}

// A host whose clock is an hour ahead, on PostgreSQL: it takes no live run
// of a healthy host; it keeps its own runs (its lease guard maps the
// database's expiries onto its clock rather than finding them an hour
// past); it says once that its clock is off, and exports the offset; and
// when it dies, the healthy host takes its run over as soon as the lease
// expired by the database's clock, not an hour later (issue 12).
func TestHost_Postgres_SkewedHostClock(t *testing.T) {
	t.Parallel()
	schema := pgSchema(t)
	ctx := testCtx(t)
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	s1 := openPG(t, schema)
	defer s1.Close()
	raw2, err := postgres.Open(ctx, pgtest.URL(), &postgres.Options{Schema: schema, HostClock: ahead})
	if err != nil {
		t.Fatal(err)
	}
	defer raw2.Close()
	cs := &crashStore{Store: raw2}

	const lease = time.Second
	const periods = 3 // lease periods run B must live through on h2
	var bID atomic.Value
	bID.Store("")
	var bRenewals atomic.Int32
	renewed := make(chan struct{})
	fault := func(_ context.Context, f *host.Fault) error {
		if f.Point == host.FaultLeaseRenew && f.RunID == bID.Load() && bRenewals.Add(1) == 3*periods {
			close(renewed)
		}
		return nil
	}
	reg1, reg2 := prometheus.NewRegistry(), prometheus.NewRegistry()
	logs2 := &lockedBuffer{}
	h1 := newHost(t, s1, &host.Config{HostID: "h1", LeaseDuration: lease, Metrics: reg1, CommitBackoff: time.Millisecond}, registerDemos)
	defer shutdown(t, h1)
	long := map[string]string{"steps": "100000", "step_delay_ms": "5"}
	a := create(t, h1, examples.Silent, "a", long)

	h2 := newHost(t, clockCrashStore{cs}, &host.Config{HostID: "h2", LeaseDuration: lease, Metrics: reg2,
		Logger: quietLogger(logs2), CommitBackoff: time.Millisecond, CommitRetries: 1,
		Test: host.TestConfig{Now: ahead, FaultFunc: fault}}, registerDemos)
	defer shutdown(t, h2)
	for range 3 {
		h2.WaitClaimRound(t)
	}
	requireLease(t, s1, a.RunID, "h1", 1)

	b := create(t, h2, examples.Silent, "b", long)
	bID.Store(b.RunID)
	poll := time.NewTicker(lease / 10)
	defer poll.Stop()
	for waiting := true; waiting; {
		select {
		case <-renewed:
			waiting = false
		case <-poll.C:
			requireLease(t, s1, b.RunID, "h2", 1) // h2's guard did not stop it, nobody took it
		case <-ctx.Done():
			t.Fatalf("run B renewed %d times on h2, want %d", bRenewals.Load(), 3*periods)
		}
	}
	requireLease(t, s1, b.RunID, "h2", 1)
	requireLease(t, s1, a.RunID, "h1", 1)

	if off := metricValue(t, reg2, "superstep_host_clock_offset_seconds"); math.Abs(off-3600) > 30 {
		t.Fatalf("h2's clock offset %vs, want about 3600", off)
	}
	if off := metricValue(t, reg1, "superstep_host_clock_offset_seconds"); math.Abs(off) > 30 {
		t.Fatalf("h1's clock offset %vs, want about 0", off)
	}
	if n := strings.Count(logs2.String(), "clock is off"); n != 1 {
		t.Fatalf("h2 said %d times that its clock is off, want once:\n%s", n, logs2.String())
	}

	// h2 dies: its lease is neither renewed nor released.
	cs.crashed.Store(true)
	for {
		run, err := s1.RunGet(ctx, b.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if run.Lease.Owner == "h1" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("run B not taken over after h2 died: lease %+v", run.Lease)
		}
		h1.WaitClaimRound(t)
	}
	dead, cancel := context.WithCancel(context.Background())
	cancel() // no grace
	_ = h2.Shutdown(dead)
	shutdownOnce.Store(h2, true)
	for _, r := range []*store.Response{a, b} {
		if _, err := h1.Cancel(ctx, r.ID, ""); err != nil {
			t.Fatal(err)
		}
		if final := wait(t, h1, r.ID); final.Status != store.StatusCancelled {
			t.Fatalf("response %s ended %s", r.ID, final.Status)
		}
	}
}
