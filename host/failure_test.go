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
	"github.com/superstep/superstep/workflow"
)

func TestHost_FailingExecutor(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{noReg: true})
	var attempts atomic.Int32
	ok := workflow.Func("ok", func(c *workflow.Context, in string) error {
		if err := c.Yield("partial"); err != nil {
			return err
		}
		return c.Send(in)
	})
	bad := workflow.Func("bad", func(c *workflow.Context, in string) error {
		attempts.Add(1)
		return errors.New("boom")
	}, workflow.WithRetry(2, 0))
	wf, err := workflow.NewBuilder("failing").SetStart(ok).AddEdge(ok, bad).Outputs(ok).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.host.RegisterWorkflow("failing", wf); err != nil {
		t.Fatal(err)
	}
	r := create(t, b.host, "failing", "x", nil)
	evs := collect(t, b.host, r.ID, -1)
	checkLog(t, evs)
	last := evs[len(evs)-1]
	if last.Type != "response.failed" || last.Response.Error == nil || last.Response.Error.Code != "server_error" ||
		!strings.Contains(last.Response.Error.Message, "boom") {
		t.Fatalf("last event %s %+v", last.Type, last.Response.Error)
	}
	if got := outputs(evs); len(got) != 1 || got[0] != "partial" {
		t.Fatalf("outputs before the failure %q", got)
	}
	if attempts.Load() != 3 {
		t.Fatalf("bad ran %d times, want 3 (1 + 2 retries)", attempts.Load())
	}
	final := wait(t, b.host, r.ID)
	if final.Status != store.StatusFailed || len(final.Error) == 0 {
		t.Fatalf("final %s error %s", final.Status, final.Error)
	}
}

// failingStore fails the first `fail` commits, then passes every call to
// the real store.
type failingStore struct {
	store.Store
	fail  atomic.Int32
	calls atomic.Int32
}

func (s *failingStore) Commit(ctx context.Context, p *store.CommitParams) (*store.CommitResult, error) {
	s.calls.Add(1)
	if s.fail.Add(-1) >= 0 {
		return nil, errors.New("injected: disk on fire")
	}
	return s.Store.Commit(ctx, p)
}

func TestHost_CommitFailure(t *testing.T) {
	t.Parallel()
	t.Run("RetriedThenSucceeds", func(t *testing.T) {
		t.Parallel()
		fs := &failingStore{}
		fs.fail.Store(3)
		reg := prometheus.NewRegistry()
		b := setup(t, &setupOpts{wrap: func(s store.Store) store.Store { fs.Store = s; return fs },
			cfg: &host.Config{CommitRetries: 5, CommitBackoff: time.Millisecond, Metrics: reg}})
		r := create(t, b.host, examples.TwoOutputs, "x", nil)
		evs := collect(t, b.host, r.ID, -1)
		checkLog(t, evs)
		if got := outputs(evs); strings.Join(got, ",") != "first-2,second-2,done" {
			t.Fatalf("outputs %q", got)
		}
		if n := metricValue(t, reg, "superstep_host_commit_failures_total"); n != 3 {
			t.Fatalf("commit failures metric %v, want 3", n)
		}
	})
	t.Run("SurfacedLoudly", func(t *testing.T) {
		t.Parallel()
		fs := &failingStore{}
		fs.fail.Store(3) // the first commit and its 2 retries
		b := setup(t, &setupOpts{wrap: func(s store.Store) store.Store { fs.Store = s; return fs },
			cfg: &host.Config{CommitRetries: 2, CommitBackoff: time.Millisecond}})
		r := create(t, b.host, examples.Echo, "x", nil)
		evs := collect(t, b.host, r.ID, -1)
		checkLog(t, evs)
		last := evs[len(evs)-1]
		// The cause is logged, not shown (issue 12 #21).
		if last.Type != "response.failed" || strings.Contains(last.Response.Error.Message, "disk on fire") ||
			!strings.Contains(last.Response.Error.Message, "server's log") {
			t.Fatalf("last %s %+v", last.Type, last.Response.Error)
		}
		if len(outputs(evs)) != 0 {
			t.Fatalf("an uncommitted output was published: %q", outputs(evs))
		}
	})
}

// metricValue returns the value of a registered counter or gauge.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

func TestHost_Fencing(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{cfg: &host.Config{LeaseDuration: time.Hour}})
	ctx := testCtx(t)
	r := create(t, b.host, examples.Silent, "x", map[string]string{"steps": "1000", "step_delay_ms": "2"})
	b.host.WaitCommitted(t)
	// Another owner takes the run over (its clock says our lease expired).
	// (A backend may skip a run locked by a commit in flight: try again.)
	var claimed []*store.Run
	var err error
	for i := 0; i < 100 && err == nil && len(claimed) == 0; i++ {
		claimed, err = b.store.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "intruder", Duration: time.Hour,
			Now: time.Now().Add(2 * time.Hour)})
	}
	if err != nil || len(claimed) != 1 || claimed[0].ID != r.RunID {
		run, _ := b.store.RunGet(ctx, r.RunID)
		resp, _ := b.store.ResponseGet(ctx, r.ID)
		t.Fatalf("claim: %v %v; run %+v; response %s %s", claimed, err, run, resp.Status, resp.Snapshot)
	}
	if got := b.host.WaitLeaseLost(t); got != r.RunID {
		t.Fatalf("lease lost for %s, want %s", got, r.RunID)
	}
	b.host.WaitRunExited(t)
	before, err := b.store.ResponseGet(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	run, err := b.store.RunGet(ctx, r.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Lease.Owner != "intruder" || before.Status.Terminal() {
		t.Fatalf("after fencing: owner %s status %s", run.Lease.Owner, before.Status)
	}
	// Give the intruder's run back so cleanup's Check sees a consistent
	// store; the fenced host wrote nothing after losing the lease.
	evs, err := b.store.EventList(ctx, &store.EventListParams{ResponseID: r.ID, After: -1})
	if err != nil || int64(len(evs)) != before.NextSeq {
		t.Fatalf("log %d events, NextSeq %d: %v", len(evs), before.NextSeq, err)
	}
}
