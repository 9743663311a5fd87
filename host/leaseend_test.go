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

// TestHost_ReclaimOwnRunAfterStall on PostgreSQL (item 22): a host whose
// commit stalls past its lease, and that claims its own run again, says
// that it did ("this host claimed the run again"), not that another owner
// drives the run, and counts an expired lease, not a lost one.
func TestHost_Postgres_ReclaimOwnRunAfterStall(t *testing.T) {
	t.Parallel()
	s := openPG(t, pgSchema(t))
	defer s.Close()
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
	h := newHost(t, s, &host.Config{HostID: "h", LeaseDuration: 600 * time.Millisecond, Metrics: reg,
		Logger: quietLogger(logs), CommitBackoff: time.Millisecond, Test: host.TestConfig{FaultFunc: fault}}, registerDemos)
	defer shutdown(t, h)
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
