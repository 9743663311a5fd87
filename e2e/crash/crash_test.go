package crash

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/verify"
)

// inFlight is how many workloads run at once during the kills.
const inFlight = 4

// backend is a database the server runs on.
type backend struct {
	// dbArg is the server's --db value.
	dbArg string
	// open opens the database in the test process while no server runs.
	open func(ctx context.Context) (store.Store, error)
	// extraArgs are added to `superstep serve`.
	extraArgs []string
}

func TestCrash_SQLite(t *testing.T) {
	t.Parallel()
	db := filepath.Join(workDir(t), "superstep.db")
	runCrash(t, &backend{
		dbArg: db,
		open:  func(ctx context.Context) (store.Store, error) { return sqlite.Open(ctx, db, nil) },
	})
}

// chaos is the state of one crash test.
type chaos struct {
	t     *testing.T
	b     *backend
	s     *suite
	cl    *cluster
	rng   *rand.Rand
	seed  uint64
	kills int
	marks []verify.CrashMark
	// refIDs are the reference runs' response ids.
	refIDs map[string]bool
	// orphans follow the responses no workload knew the id of (the create
	// reply was cut by a kill).
	orphans []*stream
	wg      sync.WaitGroup
	live    atomic.Int64
	// wctx bounds the workloads; drain cancels it when they hang.
	wctx        context.Context
	stopClients context.CancelFunc
	mu          struct {
		sync.Mutex
		all []*workload
	}
}

// runCrash runs the whole crash test on b with the demo workloads.
func runCrash(t *testing.T, b *backend) {
	runSuite(t, b, &suite{configs: configs, kills: *flagKills})
}

// runSuite runs the whole crash test of s on b: reference runs, kills and
// restarts under load, a drain, and the final checks.
func runSuite(t *testing.T, b *backend, s *suite) {
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d, %d kills (replay: go test ./e2e/crash -run '^%s$' -seed %d -kills %d)", seed, s.kills, t.Name(), seed, *flagKills)
	dir := workDir(t)
	args := append(append([]string(nil), b.extraArgs...), s.serveArgs...)
	ch := &chaos{t: t, b: b, s: s, cl: newCluster(binary, b.dbArg, dir, args...), rng: rand.New(rand.NewPCG(seed, 0x5eed)), seed: seed}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second+time.Duration(s.kills)*s.perKill())
	defer cancel()
	ch.wctx, ch.stopClients = context.WithCancel(ctx)
	defer ch.stopClients()
	t.Cleanup(func() {
		if p := ch.cl.detach(); p != nil {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	if err := ch.cl.start(ctx); err != nil {
		t.Fatal(err)
	}
	refs := ch.references(ctx)
	ch.killLoop(ctx)
	ch.drain(ctx)
	ch.checkResumeAtEnd(ctx)
	if err := ch.cl.stop(30 * time.Second); err != nil {
		t.Error(err)
	}
	ch.finishOrphans(ctx)
	n, mean := ch.cl.startStats()
	t.Logf("%d server starts, %v each on average", n, mean.Round(time.Millisecond))
	ch.verify(ctx, refs)
}

// references runs each config once without kills and returns the outcome
// of each, by config name.
func (ch *chaos) references(ctx context.Context) map[string]verify.Outcome {
	refs := map[string]verify.Outcome{}
	ch.refIDs = map[string]bool{}
	for i, cfg := range ch.s.configs {
		if cfg.cancel {
			continue
		}
		w := &workload{cfg: cfg, delayMS: 5, cursor: -1}
		w.primary = &stream{cl: ch.cl, name: fmt.Sprintf("ref%d-primary", i)}
		w.reader = &stream{cl: ch.cl, name: fmt.Sprintf("ref%d-reader", i)}
		w.run(ctx)
		if w.err != nil || !w.primary.terminal {
			ch.t.Fatalf("reference run of %s: terminal=%v err=%v", cfg.name, w.primary.terminal, w.err)
		}
		ev := w.primary.view.Events[len(w.primary.view.Events)-1]
		out, err := verify.OutcomeOf(ev.Data)
		if err != nil {
			ch.t.Fatalf("reference run of %s: %v", cfg.name, err)
		}
		if out.Status != "completed" || len(out.Output) == 0 {
			ch.t.Fatalf("reference run of %s ended %s: want completed with output", cfg.name, out)
		}
		ch.t.Logf("reference %s: %s", cfg.name, out)
		refs[cfg.name] = out
		ch.refIDs[w.primary.id] = true
		ch.mu.all = append(ch.mu.all, w)
	}
	return refs
}

// spawn keeps inFlight workloads running.
func (ch *chaos) spawn(ctx context.Context) {
	for ch.live.Load() < inFlight {
		ch.mu.Lock()
		w := newWorkload(ch.cl, len(ch.mu.all), ch.rng, ch.s.configs)
		ch.mu.all = append(ch.mu.all, w)
		ch.mu.Unlock()
		ch.live.Add(1)
		ch.wg.Go(func() {
			defer ch.live.Add(-1)
			w.run(ch.wctx)
		})
	}
}

// killLoop kills the server at random moments under load, records each
// crash and restarts the server on the same database.
func (ch *chaos) killLoop(ctx context.Context) {
	for ch.kills < ch.s.kills && ctx.Err() == nil {
		// Kill while work is happening: wait (at most a second) for an
		// executor to finish after the restart, then a random moment.
		size := fileSize(ch.cl.journal)
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && fileSize(ch.cl.journal) == size; {
			ch.spawn(ctx)
			sleep(ctx, 2*time.Millisecond)
		}
		if ch.s.killAfterDelta {
			ch.waitDelta(ctx)
		}
		deadline := time.Now().Add(time.Duration(ch.rng.IntN(ch.s.jitter())) * time.Millisecond)
		for time.Now().Before(deadline) {
			ch.spawn(ctx)
			sleep(ctx, min(5*time.Millisecond, time.Until(deadline)))
		}
		if _, err := ch.cl.kill(); err != nil {
			ch.t.Fatal(err)
		}
		ch.kills++
		ch.marks = append(ch.marks, ch.mark(ctx))
		if err := ch.cl.start(ctx); err != nil {
			ch.t.Fatalf("restart after kill %d: %v", ch.kills, err)
		}
	}
}

// mark reads the journal length and every run's last committed step while
// the server is down.
func (ch *chaos) mark(ctx context.Context) verify.CrashMark {
	m := verify.CrashMark{Committed: map[string]int64{}}
	if entries, err := verify.ReadJournal(ch.cl.journal); err == nil {
		m.JournalLen = len(entries)
	}
	s, err := ch.b.open(ctx)
	if err != nil {
		ch.t.Fatalf("open the database after kill %d: %v", ch.kills, err)
	}
	defer s.Close()
	err = forEachResponse(ctx, s, func(run *store.Run, r *store.Response) error {
		m.Committed[r.ID] = run.LastStep
		return nil
	})
	if err != nil {
		ch.t.Fatalf("read the database after kill %d: %v", ch.kills, err)
	}
	return m
}

// drain waits for every workload to reach its terminal event.
func (ch *chaos) drain(ctx context.Context) {
	done := make(chan struct{})
	go func() { // owned by drain: ends when every workload has ended (ctx bounds them)
		ch.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		ch.t.Errorf("workloads still running 60s after the last restart (seed %d): is recovery resuming runs?", ch.seed)
		ch.stopClients()
		<-done
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	cut := map[string]int{}
	cancels := map[string]int{}
	for _, w := range ch.mu.all {
		if w.cfg.cancel {
			cancels[w.cancelStatus]++
		}
		if w.primary.id == "" {
			cut[fmt.Sprint(w.primary.lastErr)]++
		}
		if w.err != nil {
			ch.t.Errorf("workload %s (%s, response %q): %v", w.primary.name, w.cfg.name, w.primary.id, w.err)
		}
		if err := w.checkCancel(); err != nil {
			ch.t.Errorf("workload %s (seed %d): %v", w.primary.name, ch.seed, err)
		}
	}
	ch.t.Logf("creates cut by a kill before response.created, by error: %v", cut)
	ch.t.Logf("cancel replies by status: %v", cancels)
}

// forEachResponse calls fn for every response of every run in s.
func forEachResponse(ctx context.Context, s store.Store, fn func(*store.Run, *store.Response) error) error {
	after := ""
	for {
		runs, err := s.RunList(ctx, &store.RunListParams{After: after})
		if err != nil {
			return fmt.Errorf("crash: list runs: %w", err)
		}
		if len(runs) == 0 {
			return nil
		}
		for _, run := range runs {
			rs, err := s.ResponseListByRun(ctx, run.ID)
			if err != nil {
				return fmt.Errorf("crash: responses of run %s: %w", run.ID, err)
			}
			for _, r := range rs {
				if err := fn(run, r); err != nil {
					return err
				}
			}
		}
		after = runs[len(runs)-1].ID
	}
}

// checkResumeAtEnd resumes each reference response after its terminal
// event: the stream must end cleanly with nothing in it (responses-api.md
// §4), not break, which a client would take for a dropped connection and
// retry forever.
func (ch *chaos) checkResumeAtEnd(ctx context.Context) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, w := range ch.mu.all {
		if !ch.refIDs[w.primary.id] {
			continue
		}
		base, err := ch.cl.current(ctx)
		if err != nil {
			ch.t.Fatal(err)
		}
		st := &stream{cl: ch.cl, name: "at-end", id: w.primary.id}
		st.view.StartAt = w.primary.last() + 1
		c := newClient(base)
		err = st.read(c.Responses.GetStreaming(ctx, st.id, responses.ResponseGetParams{StartingAfter: openai.Int(w.primary.last())}))
		if err != nil || len(st.view.Events) > 0 {
			ch.t.Errorf("GET %s stream starting_after=%d (its terminal event): got %d events, err %v; want a clean end ([DONE])",
				st.id, w.primary.last(), len(st.view.Events), err)
		}
	}
}

// fileSize returns the size of the file at path, 0 when it does not exist.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// finishOrphans finds the responses whose creation became durable but
// whose id never reached a client (a kill cut the create reply), restarts
// the server, and follows each to its end from sequence 0, so every
// response in the database is finished and seen by some client.
func (ch *chaos) finishOrphans(ctx context.Context) {
	known := map[string]bool{}
	for _, w := range ch.mu.all {
		known[w.primary.id] = true
	}
	s, err := ch.b.open(ctx)
	if err != nil {
		ch.t.Fatalf("open the database: %v", err)
	}
	err = forEachResponse(ctx, s, func(_ *store.Run, r *store.Response) error {
		if !known[r.ID] {
			ch.orphans = append(ch.orphans, &stream{cl: ch.cl, name: "orphan-reader", id: r.ID})
		}
		return nil
	})
	s.Close()
	if err != nil {
		ch.t.Fatal(err)
	}
	ch.t.Logf("%d responses whose create reply was cut", len(ch.orphans))
	if len(ch.orphans) == 0 {
		return
	}
	if err := ch.cl.start(ctx); err != nil {
		ch.t.Fatal(err)
	}
	for _, st := range ch.orphans {
		if err := st.follow(ctx); err != nil {
			ch.t.Errorf("follow response %s: %v", st.id, err)
		}
	}
	if err := ch.cl.stop(30 * time.Second); err != nil {
		ch.t.Error(err)
	}
}

// workDir returns the directory for the server's journal and logs: a
// temporary one, kept (and named) when the test fails under -keep.
func workDir(t *testing.T) string {
	if !*flagKeep {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("", "superstep-crash-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept the journal and server logs in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}
