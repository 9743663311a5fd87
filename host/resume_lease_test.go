package host_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
)

// slowClaimStore returns claimed runs only after delay once armed, as a
// loaded host does when it resumes a batch of claimed runs one by one.
type slowClaimStore struct {
	store.Store
	armed atomic.Bool
	delay time.Duration
}

func (s *slowClaimStore) LeaseClaim(ctx context.Context, p *store.LeaseClaimParams) ([]*store.Run, error) {
	runs, err := s.Store.LeaseClaim(ctx, p)
	if len(runs) > 0 && s.armed.Load() {
		time.Sleep(s.delay)
	}
	return runs, err
}

// A run whose claim was made most of a lease before its resume starts
// (a batch of claims resumed in turn on a loaded host) is not stopped by
// the lease guard before the renewal loop first renews it: its superstep
// would run twice with nothing crashed (seen in TestMultihost_Spread).
func TestHost_LateResumeKeepsLease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be testDB) {
		s := be.open(t)
		defer s.Close()
		const lease = time.Second
		slow := &slowClaimStore{Store: s, delay: lease * 9 / 10}
		reg := prometheus.NewRegistry()
		h := newHost(t, slow, &host.Config{HostID: "h", LeaseDuration: lease, MaxRuns: 1, Metrics: reg,
			CommitBackoff: time.Millisecond}, registerDemos)
		defer shutdown(t, h)
		ctx := testCtx(t)
		busy := create(t, h, examples.Silent, "busy", map[string]string{"steps": "100000", "step_delay_ms": "5"})
		queued := create(t, h, examples.Silent, "queued", map[string]string{"steps": "40", "step_delay_ms": "10"})
		slow.armed.Store(true)
		if _, err := h.Cancel(ctx, busy.ID, ""); err != nil {
			t.Fatal(err)
		}
		if final := wait(t, h, queued.ID); final.Status != store.StatusCompleted {
			t.Fatalf("queued run ended %s", final.Status)
		}
		if n := metricValue(t, reg, "superstep_host_leases_expired_total"); n != 0 {
			t.Fatalf("%v leases expired: the guard stopped the late-resumed run", n)
		}
	})
}
