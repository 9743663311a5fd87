package host_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
)

// journalHost returns a started host over s with the demos registered
// natively and as agents, journaling to journal.
func journalHost(t *testing.T, s store.Store, cfg host.Config, journal string) *host.Host {
	t.Helper()
	return newHost(t, s, &cfg, func(t *testing.T, h *host.Host) {
		wfs, err := examples.Workflows(&examples.Options{Journal: journal})
		if err != nil {
			t.Fatal(err)
		}
		for name, wf := range wfs {
			if err := h.RegisterWorkflow(name, wf); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// journalSteps counts the journal lines of a response per superstep.
func journalSteps(t *testing.T, path, responseID string) map[int64]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	counts := map[int64]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var id, exec string
		var step int64
		if _, err := fmt.Sscanf(sc.Text(), "%s %d %s", &id, &step, &exec); err != nil {
			t.Fatalf("journal line %q: %v", sc.Text(), err)
		}
		if id == responseID {
			counts[step]++
		}
	}
	return counts
}

// crashStore stops every write once crashed, like a process that died: no
// response, commit, event, cancel, lease renewal or release reaches the
// database any more. Reads still work (the file is still there).
type crashStore struct {
	store.Store
	crashed atomic.Bool
	// crashAfterCancel crashes right after a cancel was recorded.
	crashAfterCancel atomic.Bool
	refused          atomic.Int64
}

var errCrashed = errors.New("injected: process crashed")

// dead reports (and counts) a write refused because of the crash.
func (s *crashStore) dead() bool {
	if s.crashed.Load() {
		s.refused.Add(1)
		return true
	}
	return false
}

func (s *crashStore) ResponseCreate(ctx context.Context, p *store.ResponseCreateParams) (*store.ResponseCreateResult, error) {
	if s.dead() {
		return nil, errCrashed
	}
	return s.Store.ResponseCreate(ctx, p)
}

func (s *crashStore) ResponseCancel(ctx context.Context, id string) (*store.Response, error) {
	if s.dead() {
		return nil, errCrashed
	}
	r, err := s.Store.ResponseCancel(ctx, id)
	if err == nil && s.crashAfterCancel.Load() {
		s.crashed.Store(true)
	}
	return r, err
}

func (s *crashStore) ResponseDelete(ctx context.Context, id string) error {
	if s.dead() {
		return errCrashed
	}
	return s.Store.ResponseDelete(ctx, id)
}

func (s *crashStore) Commit(ctx context.Context, p *store.CommitParams) (*store.CommitResult, error) {
	if s.dead() {
		return nil, errCrashed
	}
	return s.Store.Commit(ctx, p)
}

func (s *crashStore) EventAppend(ctx context.Context, p *store.EventAppendParams) error {
	if s.dead() {
		return errCrashed
	}
	return s.Store.EventAppend(ctx, p)
}

func (s *crashStore) LeaseRenew(ctx context.Context, p *store.LeaseParams) (time.Time, error) {
	if s.dead() {
		return time.Time{}, errCrashed
	}
	return s.Store.LeaseRenew(ctx, p)
}

func (s *crashStore) LeaseRelease(ctx context.Context, p *store.LeaseParams) error {
	if s.dead() {
		return errCrashed
	}
	return s.Store.LeaseRelease(ctx, p)
}

func (s *crashStore) LeaseClaim(ctx context.Context, p *store.LeaseClaimParams) ([]*store.Run, error) {
	if s.dead() {
		return nil, errCrashed
	}
	return s.Store.LeaseClaim(ctx, p)
}

func TestHost_Recover(t *testing.T) {
	t.Parallel()
	for _, model := range []string{examples.Silent} {
		t.Run("Restart/"+model, func(t *testing.T) { t.Parallel(); testRecoverRestart(t, model) })
		t.Run("Crash/"+model, func(t *testing.T) { t.Parallel(); testRecoverCrash(t, model, false) })
		t.Run("CrashExclusive/"+model, func(t *testing.T) { t.Parallel(); testRecoverCrash(t, model, true) })
	}
}

// testRecoverRestart closes the host and the store mid-run and finishes the
// run on a new host over a reopened store.
func testRecoverRestart(t *testing.T, model string) {
	dir := t.TempDir()
	path, journal := filepath.Join(dir, "h.db"), filepath.Join(dir, "journal")
	s1 := openStore(t, path)
	// Hour-long leases: h2 can only take the run over because h1 released
	// its lease at shutdown.
	h1 := journalHost(t, s1, host.Config{HostID: "h1", LeaseDuration: time.Hour}, journal)
	r := create(t, h1, model, "x", map[string]string{"steps": "12", "step_delay_ms": "5"})
	for range 4 {
		h1.WaitCommitted(t)
	}
	shutdown(t, h1) // lets the running superstep commit, then stops
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, path)
	defer s2.Close()
	h2 := journalHost(t, s2, host.Config{HostID: "h2", LeaseDuration: time.Hour}, journal)
	defer shutdown(t, h2)
	checkRecovered(t, h2, s2, r.ID, journal, 0)
}

// testRecoverCrash makes the first host's writes stop mid-run (its lease
// is neither renewed nor released); a second host claims the run once the
// lease expired and finishes it — or at once at Start, when it knows it is
// the store's only user (exclusive).
func testRecoverCrash(t *testing.T, model string, exclusive bool) {
	dir := t.TempDir()
	path, journal := filepath.Join(dir, "h.db"), filepath.Join(dir, "journal")
	raw := openStore(t, path)
	defer raw.Close()
	cs := &crashStore{Store: raw}
	cfg := host.Config{HostID: "h1", LeaseDuration: 1500 * time.Millisecond, CommitRetries: 1, CommitBackoff: time.Millisecond}
	if exclusive {
		cfg.LeaseDuration = time.Minute
	}
	h1 := journalHost(t, cs, cfg, journal)
	defer shutdown(t, h1)
	r := create(t, h1, model, "x", map[string]string{"steps": "12", "step_delay_ms": "5"})
	for range 4 {
		h1.WaitCommitted(t)
	}
	cs.crashed.Store(true)
	h1.WaitRunExited(t)
	cfg.HostID = "h2"
	if exclusive {
		// The dead host's lease would hold for a minute; h2 must not wait.
		cfg.ExclusiveStore = true
	}
	h2 := journalHost(t, raw, cfg, journal)
	defer shutdown(t, h2)
	checkRecovered(t, h2, raw, r.ID, journal, 1)
}

// checkRecovered waits for the run to finish on h and checks the log, the
// output, the journal (no committed superstep ran twice; at most
// maxRerun supersteps ran twice) and the store's invariants.
func checkRecovered(t *testing.T, h *host.Host, s store.Store, id, journal string, maxRerun int) {
	t.Helper()
	final := wait(t, h, id)
	if final.Status != store.StatusCompleted {
		t.Fatalf("final status %s", final.Status)
	}
	evs := collect(t, h, id, -1)
	checkLog(t, evs)
	if got := outputs(evs); !slices.Equal(got, []string{"done after 12"}) {
		t.Fatalf("outputs %q", got)
	}
	counts := journalSteps(t, journal, id)
	reruns := 0
	for step := int64(1); step <= 13; step++ {
		switch counts[step] {
		case 1:
		case 2:
			reruns++
		default:
			t.Fatalf("superstep %d ran %d times (journal %v)", step, counts[step], counts)
		}
	}
	if reruns > maxRerun {
		t.Fatalf("%d supersteps ran twice, want at most %d (journal %v)", reruns, maxRerun, counts)
	}
	if err := store.Check(testCtx(t), s); err != nil {
		t.Fatalf("store.Check: %v", err)
	}
}

// exclusiveStore is a store that says it has one user (as sqlite.Store
// does through Exclusive).
type exclusiveStore struct{ store.Store }

func (exclusiveStore) Exclusive() bool { return true }

// Start over a store that reports itself exclusive (the optional
// interface{ Exclusive() bool }) claims every unfinished run at once, even
// those whose leases a dead process still holds for an hour.
func TestHost_Start_ClaimsEveryRunOfExclusiveStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path, journal := filepath.Join(dir, "h.db"), filepath.Join(dir, "journal")
	raw := openStore(t, path)
	defer raw.Close()
	cs := &crashStore{Store: raw}
	cfg := host.Config{HostID: "h1", LeaseDuration: time.Hour, CommitRetries: -1}
	h1 := journalHost(t, cs, cfg, journal)
	defer shutdown(t, h1)
	var ids []string
	for _, model := range []string{examples.Silent, examples.Silent, examples.Silent} {
		r := create(t, h1, model, "x", map[string]string{"steps": "8", "step_delay_ms": "20"})
		ids = append(ids, r.ID)
	}
	cs.crashed.Store(true) // h1 dies holding three hour-long leases
	for range ids {
		h1.WaitRunExited(t)
	}
	reg := prometheus.NewRegistry()
	cfg.HostID, cfg.Metrics = "h2", reg
	h2 := journalHost(t, exclusiveStore{raw}, cfg, journal)
	defer shutdown(t, h2)
	// Start returned: every run was claimed and resumed by it.
	if n := metricValue(t, reg, "superstep_host_runs_recovered_total"); n != 3 {
		t.Fatalf("recovered %v runs at Start, want 3", n)
	}
	for _, id := range ids {
		if final := wait(t, h2, id); final.Status != store.StatusCompleted {
			t.Fatalf("%s ended %s", id, final.Status)
		}
	}
}
