package host_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
	"github.com/superstep/superstep/verify"
)

// waitFor polls cond until it holds, failing the test after a generous
// deadline (pruning runs on the host's own goroutines).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkpointCount returns the length of the run's checkpoint history.
func checkpointCount(t *testing.T, s store.Store, runID string) int {
	t.Helper()
	cps, err := s.CheckpointList(context.Background(), runID)
	if err != nil {
		t.Fatalf("CheckpointList: %v", err)
	}
	return len(cps)
}

// gathered sums a counter (with label op, if not "") in reg.
func gathered(t *testing.T, reg *prometheus.Registry, name, op string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if op == "" || hasLabel(m.GetLabel(), "op", op) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// A long run's checkpoint history stays bounded while it runs and after,
// and a crash between prunes still recovers from the last commit: the
// response completes exactly as without the crash (verify).
func TestHost_CheckpointHistoryBounded_Recover(t *testing.T) {
	t.Parallel()
	const steps = 60
	sc := newScenario(t, host.Config{})
	// Crash in step 41: prunes ran at steps 16 and 32.
	sc.arm(&faultRule{point: host.FaultCommitBefore, mode: modeCrash, match: stepIs(41)})
	r := sc.create(examples.Silent, "x", map[string]string{"steps": "60"})
	c := newClient("streaming", r.ID)
	done := sc.followAsync(c)
	sc.crashAtFault()
	done()
	sc.waitDone(r.ID)
	sc.check(map[string]verify.Outcome{r.ID: silentRef(steps)}, c)
	// The terminal commit pruned down to KeepCheckpointsDefault.
	waitUntil(t, "the finished run's history to be pruned", func() bool {
		return checkpointCount(t, sc.store(), r.RunID) <= host.KeepCheckpointsDefault
	})
	cp, err := sc.store().CheckpointGetLast(testCtx(t), r.RunID)
	if err != nil || cp.Step != steps+1 {
		t.Fatalf("last checkpoint after pruning: %v, %v; want step %d", cp, err, steps+1)
	}
	if n := sc.metric("superstep_host_checkpoints_pruned_total", ""); n < steps-host.KeepCheckpointsDefault {
		t.Fatalf("checkpoints pruned: %v, want at least %d", n, steps-host.KeepCheckpointsDefault)
	}
	if n := sc.metric("superstep_host_failures_total", "prune"); n != 0 {
		t.Fatalf("prune failures: %v", n)
	}
	if err := store.Check(testCtx(t), sc.store()); err != nil {
		t.Fatalf("store.Check after pruning: %v", err)
	}
}

// KeepCheckpoints < 0 keeps every checkpoint.
func TestHost_KeepAllCheckpoints(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{cfg: &host.Config{KeepCheckpoints: -1}})
	r := create(t, b.host, examples.Silent, "x", map[string]string{"steps": "20"})
	wait(t, b.host, r.ID)
	if n := checkpointCount(t, b.store, r.RunID); n != 22 { // step 0 .. 21
		t.Fatalf("checkpoints kept: %d, want 22", n)
	}
}

// retentionFixtures writes, with completion two hours ago, the responses
// retention must delete and those it must keep, straight into s.
type retentionFixtures struct {
	oldFailedHead    *store.ResponseCreateResult // deleted with its run
	oldNonHead       *store.ResponseCreateResult // deleted
	oldHead          *store.ResponseCreateResult // deleted though it could be continued, with its run
	activeOld        *store.ResponseCreateResult // kept: its run is active
	activeHead       *store.ResponseCreateResult
	expectedDeletion int
}

func writeRetentionFixtures(ctx context.Context, t *testing.T, s store.Store) *retentionFixtures {
	t.Helper()
	old := time.Now().Add(-2 * time.Hour)
	f := &retentionFixtures{expectedDeletion: 3}
	f.oldFailedHead = storetest.CreateResponse(ctx, t, s, &storetest.ResponseOpts{Model: "fixture"})
	storetest.Commit(ctx, t, s, f.oldFailedHead.Run.ID, &storetest.CommitOpts{Status: store.StatusFailed, Now: old})
	f.oldNonHead = storetest.CreateResponse(ctx, t, s, &storetest.ResponseOpts{Model: "fixture"})
	storetest.Commit(ctx, t, s, f.oldNonHead.Run.ID, &storetest.CommitOpts{Status: store.StatusCompleted, Now: old})
	f.oldHead = storetest.CreateResponse(ctx, t, s, &storetest.ResponseOpts{Model: "fixture",
		RunID: f.oldNonHead.Run.ID, PreviousResponseID: f.oldNonHead.Response.ID})
	storetest.Commit(ctx, t, s, f.oldNonHead.Run.ID, &storetest.CommitOpts{Status: store.StatusCompleted, Now: old})
	// An active run owned by another host for an hour: nobody resumes
	// it during the test (its model is unknown here anyway).
	f.activeOld = storetest.CreateResponse(ctx, t, s, &storetest.ResponseOpts{Model: "fixture", LeaseOwner: "elsewhere"})
	storetest.Commit(ctx, t, s, f.activeOld.Run.ID, &storetest.CommitOpts{Status: store.StatusCompleted, Now: old})
	f.activeHead = storetest.CreateResponse(ctx, t, s, &storetest.ResponseOpts{Model: "fixture", LeaseOwner: "elsewhere",
		RunID: f.activeOld.Run.ID, PreviousResponseID: f.activeOld.Response.ID})
	return f
}

// check waits until retention deleted what it must and checks what it
// kept; recent are recent responses, kept too.
func (f *retentionFixtures) check(t *testing.T, s store.Store, regs []*prometheus.Registry, recent ...string) {
	t.Helper()
	ctx := testCtx(t)
	sum := func(name, op string) float64 {
		var n float64
		for _, reg := range regs {
			n += gathered(t, reg, name, op)
		}
		return n
	}
	waitUntil(t, "retention to delete the expired responses", func() bool {
		return sum("superstep_host_responses_pruned_total", "") >= float64(f.expectedDeletion)
	})
	for _, id := range []string{f.oldFailedHead.Response.ID, f.oldNonHead.Response.ID, f.oldHead.Response.ID} {
		if _, err := s.ResponseGet(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("expired response %s: %v, want deleted", id, err)
		}
	}
	for _, runID := range []string{f.oldFailedHead.Run.ID, f.oldHead.Run.ID} {
		if _, err := s.RunGet(ctx, runID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("run %s of deleted responses: %v, want deleted with its checkpoints", runID, err)
		}
	}
	kept := append([]string{f.activeOld.Response.ID, f.activeHead.Response.ID}, recent...)
	for _, id := range kept {
		if _, err := s.ResponseGet(ctx, id); err != nil {
			t.Fatalf("response %s: %v, want kept", id, err)
		}
	}
	// Each response counted once, also with several hosts pruning.
	if n := sum("superstep_host_responses_pruned_total", ""); n != float64(f.expectedDeletion) {
		t.Fatalf("responses pruned: %v, want %d", n, f.expectedDeletion)
	}
	if n := sum("superstep_host_failures_total", "retention") + sum("superstep_host_failures_total", "prune"); n != 0 {
		t.Fatalf("retention failures: %v", n)
	}
}

// Retention deletes old finished responses (a run with them), completed
// heads too, and keeps recent ones (also one awaiting input) and active
// runs.
func TestHost_Retention(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "host.db")
	s := openStore(t, path)
	f := writeRetentionFixtures(testCtx(t), t, s)
	// Responses made by the host are recent: kept.
	reg := prometheus.NewRegistry()
	h := newHost(t, s, &host.Config{Retention: time.Hour, Metrics: reg}, registerDemos)
	t.Cleanup(func() {
		shutdown(t, h)
		if err := store.Check(context.Background(), s); err != nil {
			t.Errorf("store.Check: %v", err)
		}
		_ = s.Close()
	})
	echo := create(t, h, examples.Echo, "hi", nil)
	approval := create(t, h, examples.Approval, "deploy?", nil) // awaits input
	wait(t, h, echo.ID)
	wait(t, h, approval.ID)
	f.check(t, s, []*prometheus.Registry{reg}, echo.ID, approval.ID)
}

// On PostgreSQL: a long run's history is bounded and retention deletes
// expired responses (two hosts pruning at once).
func TestHost_Postgres_Storage(t *testing.T) {
	t.Parallel()
	schema := pgSchema(t)
	s1, s2 := openPG(t, schema), openPG(t, schema)
	defer s1.Close()
	defer s2.Close()
	f := writeRetentionFixtures(testCtx(t), t, s1)
	reg1, reg2 := prometheus.NewRegistry(), prometheus.NewRegistry()
	h1 := newHost(t, s1, &host.Config{HostID: "h1", Retention: time.Hour, Metrics: reg1}, registerDemos)
	defer shutdown(t, h1)
	h2 := newHost(t, s2, &host.Config{HostID: "h2", Retention: time.Hour, Metrics: reg2}, registerDemos)
	defer shutdown(t, h2)
	r := create(t, h1, examples.Silent, "x", map[string]string{"steps": "40"})
	wait(t, h1, r.ID)
	waitUntil(t, "the finished run's history to be pruned", func() bool {
		return checkpointCount(t, s1, r.RunID) <= host.KeepCheckpointsDefault
	})
	// Both hosts prune at once: together they delete each response once.
	f.check(t, s1, []*prometheus.Registry{reg1, reg2}, r.ID)
	if err := store.Check(testCtx(t), s1); err != nil {
		t.Fatalf("store.Check: %v", err)
	}
}
