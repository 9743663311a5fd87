package host_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/workflow"
)

// quietLogger returns a logger writing to buf.
func quietLogger(buf *lockedBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(buf, nil)) }

// A run whose model this host does not register (a rolling deploy) is
// claimed once, released with its failure recorded, and left alone for the
// back-off: its claims are counted through the store (each claim bumps the
// lease epoch) over many claim rounds.
func TestHost_UnresumableRunBacksOff(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be testDB) {
		s1 := be.open(t)
		h1 := newHost(t, s1, &host.Config{HostID: "h1", LeaseDuration: time.Hour}, registerDemos)
		r := create(t, h1, examples.Silent, "x", map[string]string{"steps": "100000", "step_delay_ms": "10"})
		h1.WaitCommitted(t)
		shutdown(t, h1) // hands the run back: active, unowned
		if be.name == "sqlite" {
			s1.Close()
		} else {
			defer s1.Close()
		}
		s2 := be.open(t)
		defer s2.Close()
		reg := prometheus.NewRegistry()
		h2 := newHost(t, s2, &host.Config{HostID: "h2", LeaseDuration: time.Hour, ClaimInterval: 5 * time.Millisecond,
			ResumeBackoff: time.Hour, Metrics: reg}, nil) // no model registered
		defer shutdown(t, h2)
		ctx := testCtx(t)
		var run *store.Run
		for round := 0; ; round++ {
			var err error
			if run, err = s2.RunGet(ctx, r.RunID); err != nil {
				t.Fatal(err)
			}
			if run.Resume.Failures > 0 {
				break
			}
			if round > 200 {
				t.Fatalf("after %d claim rounds no failed resume is recorded: %+v", round, run)
			}
			h2.WaitClaimRound(t)
		}
		for range 50 {
			h2.WaitClaimRound(t)
		}
		after, err := s2.RunGet(ctx, r.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if after.Lease.Epoch != run.Lease.Epoch || after.Resume.Failures != 1 || after.Lease.Owner != "" || !after.Active {
			t.Fatalf("50 claim rounds after the failed resume: epoch %d -> %d, %+v", run.Lease.Epoch, after.Lease.Epoch, after)
		}
		if !strings.Contains(after.Resume.Error, examples.Silent) || time.Until(after.Resume.NotBefore) < 50*time.Minute {
			t.Fatalf("recorded failure %+v", after.Resume)
		}
		if n := metricValue(t, reg, "superstep_host_resume_backoffs_total"); n != 1 {
			t.Fatalf("%v back-offs counted, want 1", n)
		}
		if err := store.Check(ctx, s2); err != nil {
			t.Fatal(err)
		}
	})
}

// On one host, a GET right after a cancel says cancelled (the store
// decides, not the driver's next commit).
func TestHost_GetAfterCancelSaysCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := testCtx(t)
	for i := range 20 {
		r := create(t, b.host, examples.Silent, "x", map[string]string{"steps": "1000", "step_delay_ms": "2"})
		b.host.WaitCommitted(t)
		got, err := b.host.Cancel(ctx, r.ID, "")
		if err != nil || got.Status != store.StatusCancelled || snapshot(t, got).Status != "cancelled" {
			t.Fatalf("iteration %d: Cancel: %v %v", i, got, err)
		}
		now, err := b.host.Get(ctx, r.ID, "")
		if err != nil || now.Status != store.StatusCancelled || snapshot(t, now).Status != "cancelled" {
			t.Fatalf("iteration %d: GET right after the cancel: %s (snapshot %s), %v", i, now.Status, snapshot(t, now).Status, err)
		}
		final := wait(t, b.host, r.ID)
		if final.Status != store.StatusCancelled {
			t.Fatalf("iteration %d: final %s", i, final.Status)
		}
		evs := collect(t, b.host, r.ID, -1)
		checkLog(t, evs)
		if last := evs[len(evs)-1]; last.Type != "response.cancelled" {
			t.Fatalf("iteration %d: last event %s", i, last.Type)
		}
	}
}

// A cancel through the host that does not drive the run replies what the
// response ends as: cancelled when the cancel came first, the terminal
// status the owner committed otherwise. Short runs put the cancel close to
// their last commit.
func TestHost_Postgres_RemoteCancelReplyAgrees(t *testing.T) {
	t.Parallel()
	schema := pgSchema(t)
	s1, s2 := openPG(t, schema), openPG(t, schema)
	defer s1.Close()
	defer s2.Close()
	cfg := host.Config{HostID: "h1", LeaseDuration: time.Hour, CommitBackoff: time.Millisecond}
	h1 := newHost(t, s1, &cfg, registerDemos)
	defer shutdown(t, h1)
	cfg.HostID = "h2"
	h2 := newHost(t, s2, &cfg, registerDemos)
	defer shutdown(t, h2)
	ctx := testCtx(t)
	statuses := map[store.Status]int{}
	for i := range 40 {
		r := create(t, h1, examples.Silent, "x", map[string]string{"steps": fmt.Sprint(1 + i%3), "step_delay_ms": "0"})
		got, err := h2.Cancel(ctx, r.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		final := wait(t, h2, r.ID)
		if got.Status != final.Status || snapshot(t, got).Status != string(final.Status) {
			t.Fatalf("iteration %d: the cancel replied %s (snapshot %s), the response ended %s",
				i, got.Status, snapshot(t, got).Status, final.Status)
		}
		again, err := h1.Get(ctx, r.ID, "")
		if err != nil || again.Status != final.Status {
			t.Fatalf("iteration %d: GET on the owner %v %v, want %s", i, again, err, final.Status)
		}
		statuses[final.Status]++
	}
	t.Logf("final statuses %v", statuses)
	if err := store.Check(ctx, s1); err != nil {
		t.Fatal(err)
	}
}

// claimCtxStore records whether a claim was made on a request's context.
type claimCtxStore struct {
	store.Store
	onRequest atomic.Int32
}

type requestKey struct{}

func (s *claimCtxStore) LeaseClaim(ctx context.Context, p *store.LeaseClaimParams) ([]*store.Run, error) {
	if ctx.Value(requestKey{}) != nil {
		s.onRequest.Add(1)
	}
	return s.Store.LeaseClaim(ctx, p)
}

// A cancel of a run driven by another host claims nothing on the request's
// context (a client hanging up would strand what it claimed): claims are
// the claim loop's, on the host's own context.
func TestHost_Postgres_CancelClaimsOnHostContext(t *testing.T) {
	t.Parallel()
	schema := pgSchema(t)
	s1, s2 := openPG(t, schema), openPG(t, schema)
	defer s1.Close()
	defer s2.Close()
	cs := &claimCtxStore{Store: s2}
	h1 := newHost(t, s1, &host.Config{HostID: "h1", LeaseDuration: time.Hour}, registerDemos)
	defer shutdown(t, h1)
	h2 := newHost(t, cs, &host.Config{HostID: "h2", LeaseDuration: time.Hour}, registerDemos)
	defer shutdown(t, h2)
	r := create(t, h1, examples.Silent, "x", map[string]string{"steps": "100000", "step_delay_ms": "5"})
	h1.WaitCommitted(t)
	ctx, cancel := context.WithCancel(context.WithValue(testCtx(t), requestKey{}, true))
	got, err := h2.Cancel(ctx, r.ID, "")
	cancel() // the client hangs up
	if err != nil || got.Status != store.StatusCancelled {
		t.Fatalf("Cancel: %v %v", got, err)
	}
	if final := wait(t, h2, r.ID); final.Status != store.StatusCancelled {
		t.Fatalf("final %s", final.Status)
	}
	if n := cs.onRequest.Load(); n != 0 {
		t.Fatalf("%d claims made on the cancel request's context", n)
	}
}

// A DELETE through the host that does not drive the run cancels it first:
// the owner stops quietly (no "run failed", no error logged) and the run
// is gone.
func TestHost_Postgres_RemoteDeleteStopsOwnerQuietly(t *testing.T) {
	t.Parallel()
	schema := pgSchema(t)
	s1, s2 := openPG(t, schema), openPG(t, schema)
	defer s1.Close()
	defer s2.Close()
	logs := &lockedBuffer{}
	h1 := newHost(t, s1, &host.Config{HostID: "h1", LeaseDuration: time.Hour, Logger: quietLogger(logs)}, registerDemos)
	defer shutdown(t, h1)
	h2 := newHost(t, s2, &host.Config{HostID: "h2", LeaseDuration: time.Hour}, registerDemos)
	defer shutdown(t, h2)
	ctx := testCtx(t)
	for range 5 {
		r := create(t, h1, examples.Silent, "x", map[string]string{"steps": "100000", "step_delay_ms": "1"})
		h1.WaitCommitted(t)
		if err := h2.Delete(ctx, r.ID, ""); err != nil {
			t.Fatal(err)
		}
		if id := h1.WaitRunExited(t); id != r.RunID {
			t.Fatalf("run %s exited, want %s", id, r.RunID)
		}
		if _, err := s1.RunGet(ctx, r.RunID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("run after the delete: %v", err)
		}
	}
	// A refused commit is logged at info ("commit refused"); what must not
	// follow is a failed commit, a failed run or a hand-back.
	if out := logs.String(); strings.Contains(out, "run failed") || strings.Contains(out, "cannot finish") ||
		strings.Contains(out, "host: commit failed\"") {
		t.Fatalf("the owner logged errors:\n%s", out)
	}
}

// A delete on the host that drives the run cancels and waits for it
// before deleting, and logs nothing alarming.
func TestHost_DeleteRunningResponse(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	b := setup(t, &setupOpts{cfg: &host.Config{Logger: quietLogger(logs), CommitBackoff: time.Millisecond}})
	ctx := testCtx(t)
	r := create(t, b.host, examples.Silent, "x", map[string]string{"steps": "100000", "step_delay_ms": "1"})
	b.host.WaitCommitted(t)
	if err := b.host.Delete(ctx, r.ID, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.RunGet(ctx, r.RunID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("run after the delete: %v", err)
	}
	if out := logs.String(); strings.Contains(out, "level=ERROR") {
		t.Fatalf("errors logged:\n%s", out)
	}
}

// stuckWorkflow's executor ignores its context the first time it runs,
// until unstick is closed.
func stuckWorkflow(t *testing.T, unstick <-chan struct{}) *workflow.Workflow {
	var ran atomic.Bool
	ex := workflow.Func("stuck", func(c *workflow.Context, in string) error {
		if ran.CompareAndSwap(false, true) {
			<-unstick
		}
		return c.Yield("unstuck")
	})
	wf, err := workflow.NewBuilder("stuck").SetStart(ex).Outputs(ex).Build()
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// One stuck run does not cost the others their leases: run A's executor
// ignores its context while its lease is lost (its renewals fail) and this
// host claims it again (waiting for the stale driver must not stop the
// renewals), run B's commit stalls holding the run's lock; the healthy run
// C, and B, keep their leases (epochs unchanged in the store) through
// several lease periods, counted in C's renewals.
func TestHost_StuckRunKeepsOthersLeases(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be testDB) {
		s := be.open(t)
		defer s.Close()
		const renewals = 15 // 5 lease periods
		unstick, release := make(chan struct{}), make(chan struct{})
		stalled, reached := make(chan struct{}), make(chan struct{})
		var aID, bID, cID atomic.Value
		for _, v := range []*atomic.Value{&aID, &bID, &cID} {
			v.Store("")
		}
		var cRenewals atomic.Int32
		var stallOnce atomic.Bool
		fault := func(ctx context.Context, f *host.Fault) error {
			switch {
			case f.Point == host.FaultLeaseRenew && f.RunID == aID.Load():
				return errors.New("injected: renewal of the stuck run fails")
			case f.Point == host.FaultLeaseRenew && f.RunID == cID.Load():
				if cRenewals.Add(1) == renewals {
					close(reached)
				}
			case f.Point == host.FaultCommitBefore && f.RunID == bID.Load() && stallOnce.CompareAndSwap(false, true):
				close(stalled)
				<-release // holds B's lock for the whole stall
			}
			return nil
		}
		cfg := &host.Config{HostID: "h", LeaseDuration: 600 * time.Millisecond, CommitBackoff: time.Millisecond,
			CancelPollInterval: 10 * time.Millisecond, Test: host.TestConfig{FaultFunc: fault}}
		h := newHost(t, s, cfg, func(t *testing.T, h *host.Host) {
			registerDemos(t, h)
			if err := h.RegisterWorkflow("stuck", stuckWorkflow(t, unstick)); err != nil {
				t.Fatal(err)
			}
		})
		defer shutdown(t, h)
		long := map[string]string{"steps": "100000", "step_delay_ms": "5"}
		rb := create(t, h, examples.Silent, "b", long)
		bID.Store(rb.RunID)
		rc := create(t, h, examples.Silent, "c", long)
		cID.Store(rc.RunID)
		<-stalled
		ra := create(t, h, "stuck", "a", nil)
		aID.Store(ra.RunID)
		ctx := testCtx(t)
		before := map[string]int64{}
		for _, id := range []string{rb.RunID, rc.RunID} {
			run, err := s.RunGet(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			before[id] = run.Lease.Epoch
		}
		select {
		case <-reached:
		case <-ctx.Done():
			t.Fatalf("run C renewed %d times, want %d: the renewals stopped", cRenewals.Load(), renewals)
		}
		for _, id := range []string{rb.RunID, rc.RunID} {
			run, err := s.RunGet(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if run.Lease.Epoch != before[id] || run.Lease.Owner != "h" {
				t.Fatalf("run %s: lease %+v, epoch before %d", id, run.Lease, before[id])
			}
		}
		close(release)
		close(unstick)
		for _, r := range []*store.Response{rb, rc} {
			if _, err := h.Cancel(ctx, r.ID, ""); err != nil {
				t.Fatal(err)
			}
		}
		if final := wait(t, h, ra.ID); final.Status != store.StatusCompleted {
			t.Fatalf("the stuck run ended %s", final.Status)
		}
	})
}
