package host_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
)

// claimClock is a PostgreSQL store handle that records when each run was
// last claimed through it. It embeds the concrete store, so the optional
// interfaces (store.Notifier, store.HostRegistry) stay visible to the host.
type claimClock struct {
	*postgres.Store
	mu      sync.Mutex
	claimed map[string]time.Time // run id -> when LeaseClaim returned it
}

func (c *claimClock) LeaseClaim(ctx context.Context, p *store.LeaseClaimParams) ([]*store.Run, error) {
	runs, err := c.Store.LeaseClaim(ctx, p)
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range runs {
		c.claimed[r.ID] = now
	}
	return runs, err
}

// claimedAt returns when run was claimed through c.
func (c *claimClock) claimedAt(runID string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.claimed[runID]
	return t, ok
}

// openClaimClock opens a claimClock on schema.
func openClaimClock(t *testing.T, schema string) *claimClock {
	t.Helper()
	return &claimClock{Store: openPG(t, schema).(*postgres.Store), claimed: map[string]time.Time{}}
}

// noRegistry hides every optional interface of a store: a host over it
// behaves like one of a version without the host registry and notices.
type noRegistry struct{ store.Store }

// TestHost_Postgres_QueuedRunsSpreadAtOnce: three hosts on one schema,
// capped at MaxRuns each; the runs created on one host beyond its cap are
// queued and claimed by the other two through the store's notices. Their
// ClaimInterval is an hour, so only the notices can make them claim within
// the test. It logs the time from a queued run's creation to its claim.
func TestHost_Postgres_QueuedRunsSpreadAtOnce(t *testing.T) {
	t.Parallel()
	const hosts, maxRuns = 3, 3
	schema := pgSchema(t)
	journal := filepath.Join(t.TempDir(), "journal")
	var stores []*claimClock
	var hs []*host.Host
	for i := range hosts {
		s := openClaimClock(t, schema)
		defer s.Close()
		stores = append(stores, s)
		cfg := host.Config{HostID: fmt.Sprintf("h%d", i+1), LeaseDuration: time.Hour, ClaimInterval: time.Hour,
			MaxRuns: maxRuns, Addr: fmt.Sprintf("10.0.0.%d:8080", i+1)}
		h := journalHost(t, s, cfg, journal)
		defer shutdown(t, h)
		hs = append(hs, h)
	}
	// Runs that last until cancelled.
	md := map[string]string{"steps": "1", "step_delay_ms": "600000"}
	type created struct {
		resp *store.Response
		at   time.Time
	}
	var runs []created
	for range hosts * maxRuns {
		r := create(t, hs[0], examples.Silent, "x", md)
		runs = append(runs, created{r, time.Now()})
	}
	ctx := testCtx(t)
	owners := map[string]string{}
	var waits []time.Duration
	for _, c := range runs[maxRuns:] { // the first maxRuns run on h1
		for {
			run, err := stores[0].RunGet(ctx, c.resp.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if o := run.Lease.Owner; o != "" {
				if o == "h1" {
					t.Fatalf("queued run %s owned by h1, which is at its cap", c.resp.ID)
				}
				i := slices.IndexFunc(hs, func(h *host.Host) bool { return h.HostID() == o })
				// The claim is visible in the store a moment before the
				// wrapper around LeaseClaim records it.
				if at, ok := stores[i].claimedAt(c.resp.RunID); ok {
					owners[c.resp.ID] = o
					waits = append(waits, at.Sub(c.at))
					break
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("queued run %s not claimed by another host (ClaimInterval is an hour: only notices can do it)", c.resp.ID)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	perHost := map[string]int{}
	for _, o := range owners {
		perHost[o]++
	}
	if perHost["h2"] != maxRuns || perHost["h3"] != maxRuns {
		t.Fatalf("queued runs per host %v, want %d on h2 and h3", perHost, maxRuns)
	}
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
	t.Logf("time from create (queued) to claim by another host, %d runs: min %v p50 %v max %v",
		len(waits), waits[0], waits[len(waits)/2], waits[len(waits)-1])
	// Every host is listed with its address and runs.
	list, err := hs[1].Hosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != hosts {
		t.Fatalf("Hosts = %+v", list)
	}
	for i, hi := range list {
		if hi.ID != hs[i].HostID() || hi.Addr != fmt.Sprintf("10.0.0.%d:8080", i+1) || len(hi.Runs) != maxRuns {
			t.Fatalf("Hosts[%d] = %+v", i, hi)
		}
	}
	for _, c := range runs {
		if _, err := hs[2].Cancel(ctx, c.resp.ID, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range runs {
		if final := wait(t, hs[2], c.resp.ID); final.Status != store.StatusCancelled {
			t.Fatalf("%s ended %s", c.resp.ID, final.Status)
		}
	}
}

// TestHost_Postgres_CancelNoticeReachesOwner: a cancel made on h2 stops
// the run on h1 through the store's cancel notice. With hour-long leases
// the cancel watch (a fallback at LeaseDuration/3 with notices) and the
// lease renewal never run during the test.
func TestHost_Postgres_CancelNoticeReachesOwner(t *testing.T) {
	t.Parallel()
	schema := pgSchema(t)
	journal := filepath.Join(t.TempDir(), "journal")
	s1, s2 := openPG(t, schema), openPG(t, schema)
	defer s1.Close()
	defer s2.Close()
	cfg := host.Config{HostID: "h1", LeaseDuration: time.Hour}
	h1 := journalHost(t, s1, cfg, journal)
	defer shutdown(t, h1)
	cfg.HostID = "h2"
	h2 := journalHost(t, s2, cfg, journal)
	defer shutdown(t, h2)
	var lat []time.Duration
	for range 5 {
		r := create(t, h1, examples.Silent, "x", map[string]string{"steps": "1", "step_delay_ms": "600000"})
		start := time.Now()
		if _, err := h2.Cancel(testCtx(t), r.ID, ""); err != nil {
			t.Fatal(err)
		}
		if final := wait(t, h2, r.ID); final.Status != store.StatusCancelled {
			t.Fatalf("final status %s", final.Status)
		}
		lat = append(lat, time.Since(start))
		checkLog(t, collect(t, h2, r.ID, -1))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("cancel on h2 to cancelled (committed by h1), 5 runs: min %v p50 %v max %v", lat[0], lat[2], lat[4])
}

// TestHost_Postgres_HostsRegistry: hosts driving no run are listed with
// their address; a host without the registry (an older version) is
// listed through its leases; a host that shut down is gone at once.
func TestHost_Postgres_HostsRegistry(t *testing.T) {
	t.Parallel()
	schema := pgSchema(t)
	journal := filepath.Join(t.TempDir(), "journal")
	s1, s2, s3 := openPG(t, schema), openPG(t, schema), openPG(t, schema)
	defer s1.Close()
	defer s2.Close()
	defer s3.Close()
	h1 := journalHost(t, s1, host.Config{HostID: "h1", LeaseDuration: time.Hour, Addr: "a1"}, journal)
	defer shutdown(t, h1)
	h2 := journalHost(t, s2, host.Config{HostID: "h2", LeaseDuration: time.Hour, Addr: "a2"}, journal)
	old := journalHost(t, noRegistry{s3}, host.Config{HostID: "old", LeaseDuration: time.Hour, Addr: "a3"}, journal)
	defer shutdown(t, old)
	r := create(t, old, examples.Silent, "x", map[string]string{"steps": "1", "step_delay_ms": "600000"})
	ctx := testCtx(t)
	list, err := h1.Hosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []host.HostInfo{{ID: "h1", Addr: "a1"}, {ID: "h2", Addr: "a2"}, {ID: "old", Runs: []string{r.ID}}}
	if err := sameHosts(list, want); err != nil {
		t.Fatal(err)
	}
	shutdown(t, h2)
	list, err = h1.Hosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameHosts(list, slices.Delete(want, 1, 2)); err != nil {
		t.Fatalf("after h2's shutdown: %v", err)
	}
	if _, err := old.Cancel(ctx, r.ID, ""); err != nil {
		t.Fatal(err)
	}
	wait(t, old, r.ID)
}

// sameHosts compares Hosts' result with want, ignoring LeaseExpiresAt but
// requiring it to be in the future.
func sameHosts(got, want []host.HostInfo) error {
	if len(got) != len(want) {
		return fmt.Errorf("hosts %+v, want %+v", got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Addr != w.Addr || !slices.Equal(g.Runs, w.Runs) || !g.LeaseExpiresAt.After(time.Now()) {
			return fmt.Errorf("hosts %+v, want %+v", got, want)
		}
	}
	return nil
}

// TestHost_LeaseGuardStopsUnrenewedRun: when every lease renewal fails
// (the lease.renew fault point), the run is stopped while its lease is
// still valid in the store, so no other host can be driving it yet; once
// renewals work again the run is recovered and finishes.
func TestHost_LeaseGuardStopsUnrenewedRun(t *testing.T) {
	t.Parallel()
	const lease = 6 * time.Second
	var failing atomic.Bool
	failing.Store(true)
	var failed atomic.Int64
	b := setup(t, &setupOpts{cfg: &host.Config{LeaseDuration: lease, Test: host.TestConfig{
		FaultFunc: func(_ context.Context, f *host.Fault) error {
			if f.Point == host.FaultLeaseRenew && failing.Load() {
				failed.Add(1)
				return errors.New("store unreachable")
			}
			return nil
		}}}})
	r := create(t, b.host, examples.Silent, "x", map[string]string{"steps": "1", "step_delay_ms": "600000"})
	b.host.WaitLeaseLost(t)
	stopped := time.Now()
	run, err := b.store.RunGet(testCtx(t), r.RunID)
	if err != nil {
		t.Fatal(err)
	}
	// The lease was never renewed: it expires LeaseDuration after the
	// create. The guard must have stopped the run before.
	if !stopped.Before(run.Lease.ExpiresAt) {
		t.Fatalf("run stopped at %v, after its lease expired at %v", stopped, run.Lease.ExpiresAt)
	}
	if failed.Load() < 2 {
		t.Fatalf("%d failed renewals before the stop, want the first one and at least one retry", failed.Load())
	}
	t.Logf("stopped %v before the lease expiry after %d failed renewals", run.Lease.ExpiresAt.Sub(stopped), failed.Load())
	failing.Store(false)
	if _, err := b.host.Cancel(testCtx(t), r.ID, ""); err != nil {
		t.Fatal(err)
	}
	if final := wait(t, b.host, r.ID); final.Status != store.StatusCancelled {
		t.Fatalf("final status %s", final.Status)
	}
}

// TestHost_LeaseRenewalRetried: renewals failing twice in a row (a short
// outage) are retried before the guard's limit, so the run keeps going.
func TestHost_LeaseRenewalRetried(t *testing.T) {
	t.Parallel()
	const lease = 3 * time.Second
	var failures atomic.Int64
	reg := prometheus.NewRegistry()
	b := setup(t, &setupOpts{cfg: &host.Config{LeaseDuration: lease, Metrics: reg, Test: host.TestConfig{
		FaultFunc: func(_ context.Context, f *host.Fault) error {
			if f.Point == host.FaultLeaseRenew && failures.Add(1) <= 2 {
				return errors.New("store unreachable")
			}
			return nil
		}}}})
	// About 2 leases long, so that renewals fail and succeed meanwhile.
	r := create(t, b.host, examples.Silent, "x", map[string]string{"steps": "60", "step_delay_ms": "100"})
	if final := wait(t, b.host, r.ID); final.Status != store.StatusCompleted {
		t.Fatalf("final status %s", final.Status)
	}
	if n := failures.Load(); n < 3 {
		t.Fatalf("%d renewal attempts, want the 2 failures and a success", n)
	}
	if n := metricValue(t, reg, "superstep_host_leases_lost_total"); n != 0 {
		t.Fatalf("%v runs lost their lease", n)
	}
}
