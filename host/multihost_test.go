package host_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
)

// A cancel made on another host reaches the run's owner through its cancel
// watch: with hour-long leases no renewal happens during the test, so only
// the watch can stop the run.
func TestHost_Postgres_RemoteCancel(t *testing.T) {
	t.Parallel()
	schema := pgSchema(t)
	journal := filepath.Join(t.TempDir(), "journal")
	s1, s2 := openPG(t, schema), openPG(t, schema)
	defer s1.Close()
	defer s2.Close()
	reg := prometheus.NewRegistry()
	cfg := host.Config{HostID: "h1", LeaseDuration: time.Hour, CancelPollInterval: 20 * time.Millisecond, Metrics: reg}
	h1 := journalHost(t, s1, cfg, journal)
	defer shutdown(t, h1)
	cfg.HostID, cfg.Metrics = "h2", nil
	h2 := journalHost(t, s2, cfg, journal)
	defer shutdown(t, h2)
	r := create(t, h1, examples.Silent, "x", map[string]string{"steps": "500", "step_delay_ms": "10"})
	h1.WaitCommitted(t)
	got, err := h2.Cancel(testCtx(t), r.ID, "")
	if err != nil || got.Status != store.StatusCancelled {
		t.Fatalf("Cancel on h2: %v %v", got, err)
	}
	final := wait(t, h2, r.ID)
	if final.Status != store.StatusCancelled {
		t.Fatalf("final status %s", final.Status)
	}
	checkLog(t, collect(t, h2, r.ID, -1))
	if n := metricValue(t, reg, "superstep_host_remote_cancels_total"); n != 1 {
		t.Fatalf("h1 noticed %v remote cancels", n)
	}
}

// Shutdown hands runs over at once: it releases their leases, and another
// host claims and finishes them without waiting for the (hour-long) lease.
func TestHost_Postgres_DrainReleasesLeases(t *testing.T) {
	t.Parallel()
	schema := pgSchema(t)
	journal := filepath.Join(t.TempDir(), "journal")
	s1, s2 := openPG(t, schema), openPG(t, schema)
	defer s1.Close()
	defer s2.Close()
	h1 := journalHost(t, s1, host.Config{HostID: "h1", LeaseDuration: time.Hour}, journal)
	r := create(t, h1, examples.Silent, "x", map[string]string{"steps": "12", "step_delay_ms": "10"})
	h1.WaitCommitted(t)
	shutdown(t, h1)
	run, err := s2.RunGet(testCtx(t), r.RunID)
	if err != nil || run.Lease.Owner != "" || !run.Active {
		t.Fatalf("after h1's shutdown the run is %+v (%v), want released and active", run, err)
	}
	h2 := journalHost(t, s2, host.Config{HostID: "h2", LeaseDuration: time.Hour, ClaimInterval: 20 * time.Millisecond}, journal)
	defer shutdown(t, h2)
	checkRecovered(t, h2, s2, r.ID, journal, 0)
}

// With MaxRuns, a host at its cap queues new responses for any host with
// capacity: two hosts capped at one run each drive two runs created on
// the first, one each, and Hosts shows it.
func TestHost_Postgres_MaxRunsSpreadsRuns(t *testing.T) {
	t.Parallel()
	schema := pgSchema(t)
	journal := filepath.Join(t.TempDir(), "journal")
	s1, s2 := openPG(t, schema), openPG(t, schema)
	defer s1.Close()
	defer s2.Close()
	cfg := host.Config{HostID: "h1", LeaseDuration: time.Hour, ClaimInterval: 20 * time.Millisecond, MaxRuns: 1,
		Addr: "10.0.0.1:8080"}
	h1 := journalHost(t, s1, cfg, journal)
	defer shutdown(t, h1)
	cfg.HostID, cfg.Addr = "h2", "10.0.0.2:8080"
	h2 := journalHost(t, s2, cfg, journal)
	defer shutdown(t, h2)
	md := map[string]string{"steps": "2000", "step_delay_ms": "5"}
	a := create(t, h1, examples.Silent, "x", md)
	b := create(t, h1, examples.Silent, "x", md) // h1 is full: queued
	ctx := testCtx(t)
	var hosts []host.HostInfo
	var seen []string
	for {
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		hs, err := h1.Hosts(hctx)
		cancel()
		if err != nil {
			runs, _ := s1.RunList(context.Background(), &store.RunListParams{})
			var desc []string
			for _, r := range runs {
				desc = append(desc, fmt.Sprintf("%s active=%v step=%d lease=%+v", r.HeadResponseID, r.Active, r.LastStep, r.Lease))
			}
			t.Fatalf("Hosts: %v (seen %d views, first %q last %+v; runs %q; a %s b %s)", err, len(seen), seen[:min(3, len(seen))], hosts, desc, a.ID, b.ID)
		}
		hosts = hs
		seen = append(seen, fmt.Sprintf("%+v", hs))
		// One run each (which one depends on whether h1's claim loop held
		// its slot when a was created).
		if len(hosts) == 2 && len(hosts[0].Runs) == 1 && len(hosts[1].Runs) == 1 {
			got := []string{hosts[0].Runs[0], hosts[1].Runs[0]}
			if hosts[0].ID != "h1" || hosts[0].Addr != "10.0.0.1:8080" || hosts[1].ID != "h2" ||
				!slices.Contains(got, a.ID) || !slices.Contains(got, b.ID) {
				t.Fatalf("hosts %+v", hosts)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("runs not spread: hosts %+v", hosts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, id := range []string{a.ID, b.ID} {
		if _, err := h1.Cancel(ctx, id, ""); err != nil {
			t.Fatal(err)
		}
		if final := wait(t, h1, id); final.Status != store.StatusCancelled {
			t.Fatalf("%s ended %s", id, final.Status)
		}
	}
}

// With MaxRuns on a single host, queued runs start as slots free: the
// runs execute one after the other, never two at once.
func TestHost_MaxRunsQueues(t *testing.T) {
	t.Parallel()
	sc := newScenario(t, host.Config{MaxRuns: 1})
	var ids []string
	for range 3 {
		ids = append(ids, sc.create(examples.Silent, "x", map[string]string{"steps": "3", "step_delay_ms": "5"}).ID)
	}
	for _, id := range ids {
		if final := sc.waitDone(id); final.Status != store.StatusCompleted {
			t.Fatalf("%s ended %s", id, final.Status)
		}
	}
	// One run at a time: each response's journal lines are contiguous.
	var order []string
	for _, e := range sc.journalEntries() {
		if len(order) == 0 || order[len(order)-1] != e.ResponseID {
			order = append(order, e.ResponseID)
		}
	}
	if len(order) != 3 {
		t.Fatalf("runs interleaved: %v", order)
	}
}
