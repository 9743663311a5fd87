package host_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
)

// A single host whose commit stalls past its lease claims its own run
// again and says so: "lease expired", not "another owner", and no lost
// lease counted.
func TestHost_ReclaimOwnRunAfterStall(t *testing.T) {
	t.Parallel()
	testReclaimOwnRunAfterStall(t, 300*time.Millisecond, func(cfg *host.Config) (*host.Host, store.Store) {
		b := setup(t, &setupOpts{cfg: cfg})
		return b.host, b.store
	})
}

// TestHost_ReclaimOwnRunAfterStall on PostgreSQL (item 22).
func TestHost_Postgres_ReclaimOwnRunAfterStall(t *testing.T) {
	t.Parallel()
	testReclaimOwnRunAfterStall(t, 600*time.Millisecond, func(cfg *host.Config) (*host.Host, store.Store) {
		s := openPG(t, pgSchema(t))
		t.Cleanup(func() { _ = s.Close() })
		h := newHost(t, s, cfg, registerDemos)
		t.Cleanup(func() { shutdown(t, h) }) // before the store closes
		return h, s
	})
}

// testReclaimOwnRunAfterStall stalls a commit of the host start returns
// (renewals failing as a stalled process's would) until the host claimed
// its own run again, then checks what the host said and counted.
func testReclaimOwnRunAfterStall(t *testing.T, lease time.Duration, start func(*host.Config) (*host.Host, store.Store)) {
	logs := &lockedBuffer{}
	reg := prometheus.NewRegistry()
	release, stalled := make(chan struct{}), make(chan struct{})
	var stallOnce, released atomic.Bool
	fault := func(ctx context.Context, f *host.Fault) error {
		switch {
		case f.Point == host.FaultCommitBefore && f.Step == 3 && stallOnce.CompareAndSwap(false, true):
			close(stalled)
			<-release
		case f.Point == host.FaultLeaseRenew && stallOnce.Load() && !released.Load():
			return errors.New("injected: the host stalls") // as a whole process would
		}
		return nil
	}
	h, s := start(&host.Config{HostID: "h", LeaseDuration: lease, Metrics: reg,
		Logger: quietLogger(logs), CommitBackoff: time.Millisecond, Test: host.TestConfig{FaultFunc: fault}})
	r := create(t, h, examples.Silent, "x", map[string]string{"steps": "12", "step_delay_ms": "1"})
	<-stalled
	ctx := testCtx(t)
	for {
		run, err := s.RunGet(ctx, r.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if run.Lease.Epoch > 1 {
			break
		}
		h.WaitClaimRound(t)
	}
	released.Store(true)
	close(release)
	if final := wait(t, h, r.ID); final.Status != store.StatusCompleted {
		t.Fatalf("final %s", final.Status)
	}
	// The stalled driver ended (and said why) before the resumed one
	// started.
	out := logs.String()
	if strings.Contains(out, "another owner") || !strings.Contains(out, "this host claimed the run again") {
		t.Fatalf("logs:\n%s", out)
	}
	if n := metricValue(t, reg, "superstep_host_leases_lost_total"); n != 0 {
		t.Fatalf("%v lost leases counted", n)
	}
	if n := metricValue(t, reg, "superstep_host_leases_expired_total"); n != 1 {
		t.Fatalf("%v expired leases counted, want 1", n)
	}
}
