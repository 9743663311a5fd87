package host_test

import (
	"context"
	"errors"
	"fmt"
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

// unreadableRunStore fails the next RunGet calls (as many as fail holds)
// with store.ErrUnavailable: a store that cannot answer in time.
type unreadableRunStore struct {
	store.Store
	fail  atomic.Int32
	reads atomic.Int32 // RunGet calls failed
}

func (s *unreadableRunStore) RunGet(ctx context.Context, id string) (*store.Run, error) {
	if s.fail.Add(-1) >= 0 {
		s.reads.Add(1)
		return nil, fmt.Errorf("injected: run %s: %w", id, store.ErrUnavailable)
	}
	return s.Store.RunGet(ctx, id)
}

// A run fenced because another owner claimed it counts as a lost lease
// even when the store cannot be read as it stops (a host continued after
// a pause, its store slow to answer): the host asks again until the store
// answers, rather than counting an expiry with nobody else holding the
// run (TestMultihost_Zombie saw leases_lost_total 1 of 2).
func TestHost_LeaseLostCountedOnceStoreAnswers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be testDB) {
		s := be.open(t)
		defer s.Close()
		unreadable := &unreadableRunStore{Store: s}
		logs := &lockedBuffer{}
		reg := prometheus.NewRegistry()
		h := newHost(t, unreadable, &host.Config{HostID: "h", LeaseDuration: 2 * time.Second, Metrics: reg,
			Logger: quietLogger(logs), CommitBackoff: time.Millisecond}, registerDemos)
		defer shutdown(t, h)
		ctx := testCtx(t)
		r := create(t, h, examples.Silent, "x", map[string]string{"steps": "100000", "step_delay_ms": "2"})
		h.WaitCommitted(t)
		// The first read as the run stops and the first one asked again
		// fail; another owner has taken the run over by then.
		unreadable.fail.Store(2)
		var claimed []*store.Run
		var err error
		for i := 0; i < 100 && err == nil && len(claimed) == 0; i++ {
			if i > 0 {
				// PostgreSQL's claim skips a run whose row a commit
				// holds locked (SKIP LOCKED), and this run commits
				// every few milliseconds: back-to-back tries can all
				// land inside commits (seen once in CI, 100 of them).
				time.Sleep(5 * time.Millisecond)
			}
			claimed, err = s.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "intruder", Duration: time.Hour,
				Now: time.Now().Add(2 * time.Hour)})
		}
		if err != nil || len(claimed) != 1 || claimed[0].ID != r.RunID {
			t.Fatalf("claim: %v %v", claimed, err)
		}
		h.WaitRunExited(t)
		deadline := time.Now().Add(10 * time.Second)
		for metricValue(t, reg, "superstep_host_leases_lost_total") == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		lost, expired := metricValue(t, reg, "superstep_host_leases_lost_total"),
			metricValue(t, reg, "superstep_host_leases_expired_total")
		if lost != 1 || expired != 0 || unreadable.reads.Load() != 2 {
			t.Fatalf("leases lost %v, expired %v (want 1, 0) after %d failed reads of the run; logs:\n%s",
				lost, expired, unreadable.reads.Load(), logs)
		}
		if out := logs.String(); !strings.Contains(out, "another owner drives the run now") ||
			!strings.Contains(out, "could not be read to tell why, asking again") {
			t.Fatalf("no lost lease logged after asking the store again:\n%s", out)
		}
	})
}
