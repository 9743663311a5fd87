package multihost

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/testkit/resumeclient"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/verify"
)

// zombieLease is the --lease of TestMultihost_Zombie: the pause must
// outlast it, so a short one keeps the test fast.
const zombieLease = "1500ms"

// The zombie's runs: short finishes under its new owner before the
// zombie is continued, long is still running then.
var (
	zombieShort = config{name: "silent-25", model: "demo.silent", meta: map[string]string{"steps": "25"}}
	zombieLong  = config{name: "silent-150", model: "demo.silent", meta: map[string]string{"steps": "150"}}
	zombieAfter = config{name: "two-outputs", model: "demo.two-outputs"}
)

// zombieRun is one run the zombie owned when it was paused.
type zombieRun struct {
	cfg     config
	delayMS int
	id      string
	runID   string
	// onZombie streams the response from the zombie itself, across the
	// pause; elsewhere from another host.
	onZombie, elsewhere *stream
	errs                [2]error
	// At the pause: the run's lease epoch and last committed step.
	epoch, committed int64
	// zombieLast is the run's last step when the new owner claimed it:
	// the last one committed under the zombie's epoch. A commit sent
	// before the pause may land after the store was read at the pause,
	// and still before the takeover; none may land after it.
	zombieLast int64
	// tookOver is when a new owner's first commit was seen.
	tookOver time.Duration
}

// TestMultihost_Zombie pauses (SIGSTOP) a host past its lease while it
// drives two runs, lets the other hosts take them over (one finishes, one
// is still running), then continues (SIGCONT) the paused host. The zombie
// must commit and publish nothing for the runs it lost: its commit counter
// stays at the commits the store holds from before the pause, the finished
// run's log is unchanged, every client (one of them streaming from the
// zombie throughout) saw exactly the log, and no superstep committed
// before the pause ran again. It must step down (its metrics count both
// leases lost, it drives no run), keep serving new work, and exit cleanly
// on SIGTERM.
func TestMultihost_Zombie(t *testing.T) {
	seed := seedOf(t)
	began := time.Now()
	cl := newCluster(t, seed, "--lease", zombieLease)
	st := openStore(t, cl.db)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	cl.startAll(ctx)
	refs, refStreams := zombieReferences(ctx, t, cl)
	baseCommits := make([]float64, hostCount)
	for i := range hostCount {
		m, err := scrape(ctx, cl.host(i))
		if err != nil {
			t.Fatal(err)
		}
		baseCommits[i] = m["superstep_host_commits_total"]
	}
	var wg sync.WaitGroup
	// On failure, end the clients (one may be stuck on the paused host)
	// before waiting for them.
	defer func() {
		cancel()
		wg.Wait()
	}()
	var creators []*stream
	var creatorErrs []error
	var mu sync.Mutex
	// createOn creates a response of cfg on h with a streaming client that
	// reads it to its end, and returns the response id and its run once a
	// host owns the run.
	createOn := func(h *hostProc, cfg config, delayMS int) (string, *store.Run) {
		ids := make(chan string, 1)
		s := pinnedStream(fmt.Sprintf("creator-%d-%s", len(creators), cfg.name), h.url())
		s.OnID = func(id string) { ids <- id }
		creators = append(creators, s)
		wg.Go(func() {
			err := s.Run(ctx, cfg.params(delayMS))
			mu.Lock()
			creatorErrs = append(creatorErrs, err)
			mu.Unlock()
		})
		var id string
		select {
		case id = <-ids:
		case <-ctx.Done():
			t.Fatalf("no response.created for %s from host %s", cfg.name, h.id)
		}
		resp, err := st.ResponseGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return id, waitRun(ctx, t, st, resp.RunID, "to be owned", func(run *store.Run) bool {
			return run.Lease.Owner != ""
		})
	}

	// The zombie-to-be is the host that drives the long run; the short one
	// is created on it until it drives that too (at once when a host
	// drives what it creates, which it does below --max-runs).
	short, long := &zombieRun{cfg: zombieShort, delayMS: 40}, &zombieRun{cfg: zombieLong, delayMS: 20}
	runs := []*zombieRun{short, long}
	var longRun *store.Run
	long.id, longRun = createOn(cl.host(0), long.cfg, long.delayMS)
	long.runID = longRun.ID
	z := cl.byID(longRun.Lease.Owner)
	if z == nil {
		t.Fatalf("run %s is owned by %q, not one of the hosts", longRun.ID, longRun.Lease.Owner)
	}
	for try := 0; ; try++ {
		id, run := createOn(z, short.cfg, short.delayMS)
		if run.Lease.Owner == z.id {
			short.id, short.runID = id, run.ID
			break
		}
		if try == 10 {
			t.Fatalf("none of 10 runs created on host %s is driven by it", z.id)
		}
	}
	other := cl.host((z.slot + 1) % hostCount)
	for _, r := range runs {
		r.onZombie = pinnedStream(r.cfg.name+"-on-zombie", z.url())
		r.elsewhere = pinnedStream(r.cfg.name+"-elsewhere", other.url())
		r.onZombie.ID, r.elsewhere.ID = r.id, r.id
		wg.Go(func() { r.errs[0] = r.onZombie.Follow(ctx) })
		wg.Go(func() { r.errs[1] = r.elsewhere.Follow(ctx) })
		waitRun(ctx, t, st, r.runID, "to commit 3 steps", func(run *store.Run) bool {
			return run.LastStep >= 3
		})
	}

	// Pause the host, then read what the store holds from it: everything
	// it committed before the pause.
	if err := z.proc.Stop(); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	for _, r := range runs {
		run, err := st.RunGet(ctx, r.runID)
		if err != nil {
			t.Fatal(err)
		}
		if run.Lease.Owner != z.id {
			t.Fatalf("run %s of response %s is owned by %q at the pause, want %q", r.runID, r.id, run.Lease.Owner, z.id)
		}
		r.epoch, r.committed = run.Lease.Epoch, run.LastStep
	}
	markLen := journalLen(cl.journal)
	for _, r := range runs {
		waitRun(ctx, t, st, r.runID, "to be taken over and committed by a new owner", func(run *store.Run) bool {
			return run.Lease.Epoch > r.epoch && run.LastStep > r.committed
		})
		r.tookOver = time.Since(stoppedAt)
		r.zombieLast = takeoverStep(ctx, t, st, r.runID, r.epoch)
	}
	waitResponse(ctx, t, st, short.id, "to finish under its new owner", func(resp *store.Response) bool {
		return resp.Status.Terminal()
	})
	checkHostsListing(ctx, t, other, long, z.id)
	_, shortLog, err := verify.Load(ctx, st, short.id)
	if err != nil {
		t.Fatal(err)
	}
	longRun, err = st.RunGet(ctx, long.runID)
	if err != nil || !longRun.Active {
		t.Fatalf("the long run finished before the zombie was continued (%+v, %v): make it longer", longRun, err)
	}
	t.Logf("paused %s for %v; takeovers after %v and %v; continuing it with the long run at step %d",
		z.id, time.Since(stoppedAt).Round(time.Millisecond), short.tookOver.Round(time.Millisecond),
		long.tookOver.Round(time.Millisecond), longRun.LastStep)
	if err := z.proc.Cont(); err != nil {
		t.Fatal(err)
	}

	// The zombie steps down: both leases counted as lost, no run driven,
	// and not one commit beyond those the store held at the pause.
	want := baseCommits[z.slot] + float64(short.zombieLast+long.zombieLast)
	m := waitMetrics(ctx, t, z, "to count both runs' leases as lost and drive no run", func(m map[string]float64) bool {
		return m["superstep_host_leases_lost_total"] >= 2 && m["superstep_host_active_runs"] == 0
	})
	if got := m["superstep_host_commits_total"]; got != want {
		t.Errorf("zombie committed %v supersteps in all; %v before its runs and %v of theirs before the takeovers (%v at the pause): it committed after losing its leases",
			got, baseCommits[z.slot], short.zombieLast+long.zombieLast, short.committed+long.committed)
	}
	t.Logf("zombie metrics after stepping down: leases_lost=%v leases_expired=%v commits=%v commit_failures=%v",
		m["superstep_host_leases_lost_total"], m["superstep_host_leases_expired_total"], m["superstep_host_commits_total"],
		m["superstep_host_commit_failures_total"])
	if n := cl.logsContaining("lease lost")[z.id]; n < 2 {
		t.Errorf("zombie logged %d lease-lost lines, want one per run it lost (2)", n)
	}
	_, after, err := verify.Load(ctx, st, short.id)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(shortLog, after, eventEqual) {
		t.Errorf("response %s: its log changed after the zombie was continued: %d events before, %d after", short.id, len(shortLog), len(after))
	}

	// It keeps serving: it answers new requests and drives new runs (one
	// created on it, at once below --max-runs; more should runs be spread).
	var afterStreams []*stream
	for i := 0; ; i++ {
		s := pinnedStream(fmt.Sprintf("after-%d", i), z.url())
		err := s.Run(ctx, zombieAfter.params(5))
		if err != nil || !s.Terminal {
			t.Fatalf("a run created on the zombie after it stepped down: terminal=%v err=%v (last: %v)", s.Terminal, err, s.LastErr)
		}
		afterStreams = append(afterStreams, s)
		if m, err = scrape(ctx, z); err != nil {
			t.Fatal(err)
		}
		if m["superstep_host_commits_total"] > want {
			break
		}
		if i == 10 {
			t.Fatalf("the zombie drove none of %d runs created on it after it stepped down", i+1)
		}
	}
	wg.Wait()
	for _, r := range runs {
		for i, err := range r.errs {
			if err != nil {
				t.Errorf("client %d of response %s: %v", i, r.id, err)
			}
		}
	}
	for _, err := range creatorErrs {
		if err != nil {
			t.Errorf("creating client: %v", err)
		}
	}
	if err := cl.stopAll(30 * time.Second); err != nil {
		t.Error(err)
	}

	clientStreams := append(append(refStreams, afterStreams...), creators...)
	for _, r := range runs {
		clientStreams = append(clientStreams, r.onZombie, r.elsewhere)
	}
	clients := resumeclient.ViewsByID(clientStreams...)
	in := &verify.Input{}
	loadResponses(ctx, t, st, in, clients, refs)
	rep := verify.Check(in)
	t.Logf("%v", rep)
	if err := rep.Err(); err != nil {
		t.Error(err)
	}
	checkZombieJournal(t, cl.journal, markLen, runs)
	cl.checkCommand(ctx)
	t.Logf("took %v", time.Since(began).Round(time.Millisecond))
}

// zombieReferences runs each config of the test once on host 1, at once,
// and returns their outcomes by config name and their clients.
func zombieReferences(ctx context.Context, t *testing.T, cl *cluster) (map[string]verify.Outcome, []*stream) {
	cfgs := []config{zombieShort, zombieLong, zombieAfter}
	streams := make([]*stream, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		streams[i] = pinnedStream("ref-"+cfg.name, cl.host(1).url())
		wg.Go(func() {
			errs[i] = streams[i].Run(ctx, cfg.params(1))
		})
	}
	wg.Wait()
	refs := map[string]verify.Outcome{}
	for i, s := range streams {
		refs[cfgs[i].name] = referenceOutcome(t, cfgs[i].name, s, errs[i])
	}
	return refs, streams
}

// checkHostsListing requires GET /v1/hosts on h to list r's response under
// its new owner, not under the paused host.
func checkHostsListing(ctx context.Context, t *testing.T, h *hostProc, r *zombieRun, paused string) {
	reply, err := getHosts(ctx, h.url())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range reply.Data {
		if slices.Contains(e.Runs, r.id) && e.ID != paused {
			return
		}
	}
	t.Errorf("GET /v1/hosts on host %s does not list response %s under a host other than the paused %s: %+v", h.id, r.id, paused, reply.Data)
}

// checkZombieJournal checks the executor journal of the zombie's runs:
// after the pause no invocation belongs to a superstep committed before
// it, and only the superstep the pause interrupted may have run twice
// (the zombie's attempt and its new owner's; the zombie's may finish after
// the takeover, since a paused process cannot stop its executors).
func checkZombieJournal(t *testing.T, path string, markLen int, runs []*zombieRun) {
	entries, err := verify.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	byResp := map[string]*zombieRun{}
	for _, r := range runs {
		byResp[r.id] = r
	}
	count := map[verify.JournalEntry]int{}
	late := 0
	for n, e := range entries {
		r := byResp[e.ResponseID]
		if r == nil {
			continue
		}
		count[e]++
		if n >= markLen && e.Step <= r.committed {
			t.Errorf("journal entry %d: %s ran after the pause, when superstep %d was committed", n+1, e, r.committed)
		}
		if e.Step == r.committed+1 && count[e] == 2 {
			late++
		}
	}
	for e, c := range count {
		limit := 1
		if e.Step == byResp[e.ResponseID].committed+1 {
			limit = 2
		}
		if c > limit {
			t.Errorf("journal: %s ran %d times, at most %d allowed", e, c, limit)
		}
	}
	for _, r := range runs {
		for step := int64(1); step <= r.committed; step++ {
			if !hasStep(count, r.id, step) {
				t.Errorf("journal: no invocation of committed superstep %d of %s", step, r.id)
			}
		}
	}
	t.Logf("interrupted supersteps that ran twice (the zombie's attempt finished too): %d of %d", late, len(runs))
}

// hasStep reports whether count holds an invocation of step of resp.
func hasStep(count map[verify.JournalEntry]int, resp string, step int64) bool {
	for e := range count {
		if e.ResponseID == resp && e.Step == step {
			return true
		}
	}
	return false
}

// eventEqual compares two log entries.
func eventEqual(a, b store.Event) bool {
	return a.Seq == b.Seq && a.Type == b.Type && a.Step == b.Step && string(a.Payload) == string(b.Payload)
}

// waitRun polls run id in s until ok holds, failing t after 60s.
func waitRun(ctx context.Context, t *testing.T, s store.Store, id, what string, ok func(*store.Run) bool) *store.Run {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		run, err := s.RunGet(ctx, id)
		if err == nil && ok(run) {
			return run
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("run %s did not come %s within 60s: %+v (%v)", id, what, run, err)
		}
		sleep(ctx, 5*time.Millisecond)
	}
}

// waitResponse polls response id in s until ok holds, failing t after 60s.
func waitResponse(ctx context.Context, t *testing.T, s store.Store, id, what string, ok func(*store.Response) bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := s.ResponseGet(ctx, id)
		if err == nil && ok(resp) {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("response %s did not come %s within 60s: %v", id, what, err)
		}
		sleep(ctx, 10*time.Millisecond)
	}
}

// waitMetrics scrapes h until ok holds, failing t after 60s.
func waitMetrics(ctx context.Context, t *testing.T, h *hostProc, what string, ok func(map[string]float64) bool) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, err := scrape(ctx, h)
		if err == nil && ok(m) {
			return m
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("host %s did not come %s within 60s: %v; metrics leases_lost=%v leases_expired=%v active_runs=%v commits=%v",
				h.id, what, err, m["superstep_host_leases_lost_total"], m["superstep_host_leases_expired_total"],
				m["superstep_host_active_runs"], m["superstep_host_commits_total"])
		}
		sleep(ctx, 20*time.Millisecond)
	}
}

// takeoverStep returns the last step of run committed under epoch: the
// run's LastStep when the next epoch claimed it (commits are fenced by
// epoch), from the store's record of the run's lease claims.
func takeoverStep(ctx context.Context, t *testing.T, st store.Store, runID string, epoch int64) int64 {
	t.Helper()
	ri, ok := st.(store.RunInspector)
	if !ok {
		t.Fatalf("store %T keeps no lease claims (store.RunInspector)", st)
	}
	claims, err := ri.RunClaims(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims {
		if c.Epoch == epoch+1 {
			return c.LastStep
		}
	}
	t.Fatalf("run %s: no claim of epoch %d in %+v", runID, epoch+1, claims)
	return 0
}
