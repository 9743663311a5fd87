package crash

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/superstep/superstep/internal/testkit/proctest"
	"github.com/superstep/superstep/internal/testkit/resumeclient"
	"github.com/superstep/superstep/internal/testkit/verifytest"
	"github.com/superstep/superstep/internal/testkit/workpool"
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
	db := filepath.Join(proctest.WorkDir(t, *flagKeep, "superstep-crash"), "superstep.db")
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
	// killedAt is when each kill was sent.
	killedAt []time.Time
	// refIDs are the reference runs' response ids.
	refIDs map[string]bool
	// orphans follow the responses no workload knew the id of (the create
	// reply was cut by a kill).
	orphans []*resumeclient.Stream
	// pool runs the workloads and holds every one, references first.
	pool *workpool.Pool[*workload]
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
	dir := proctest.WorkDir(t, *flagKeep, "superstep-crash")
	args := append(append([]string(nil), b.extraArgs...), s.serveArgs...)
	ch := &chaos{t: t, b: b, s: s, cl: newCluster(binary, b.dbArg, dir, args...), rng: rand.New(rand.NewPCG(seed, 0x5eed)), seed: seed}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second+time.Duration(s.kills)*s.perKill())
	defer cancel()
	ch.pool = workpool.New(ctx, func(ctx context.Context, w *workload) { w.run(ctx, ch.cl) })
	defer ch.pool.Stop()
	t.Cleanup(ch.cl.killAtCleanup)
	if err := ch.cl.start(ctx); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	refs := ch.references(ctx)
	refsDone := time.Now()
	ch.killLoop(ctx)
	killsDone := time.Now()
	ch.drain(ctx)
	ch.checkResumeAtEnd(ctx)
	if err := ch.cl.stop(30 * time.Second); err != nil {
		t.Error(err)
	}
	drained := time.Now()
	ch.finishOrphans(ctx)
	n, mean := ch.cl.startStats()
	t.Logf("%d server starts, %v each on average", n, mean.Round(time.Millisecond))
	orphaned := time.Now()
	ch.verify(ctx, refs)
	r := func(a, b time.Time) time.Duration { return b.Sub(a).Round(100 * time.Millisecond) }
	t.Logf("phases: references %v, kills %v, drain %v, orphans %v, checks %v",
		r(began, refsDone), r(refsDone, killsDone), r(killsDone, drained), r(drained, orphaned), r(orphaned, time.Now()))
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
		w := &workload{cfg: cfg, delayMS: 5, tag: fmt.Sprintf("r%04d", i)}
		w.Primary = newStream(ch.cl, fmt.Sprintf("ref%d-primary", i))
		w.Reader = newStream(ch.cl, fmt.Sprintf("ref%d-reader", i))
		w.Cursor = -1
		w.run(ctx, ch.cl)
		if w.err != nil || !w.Primary.Terminal {
			ch.t.Fatalf("reference run of %s: terminal=%v err=%v", cfg.name, w.Primary.Terminal, w.err)
		}
		ev := w.Primary.View.Events[len(w.Primary.View.Events)-1]
		out, err := verify.OutcomeOf(ev.Data)
		if err != nil {
			ch.t.Fatalf("reference run of %s: %v", cfg.name, err)
		}
		if out.Status != "completed" || len(out.Output) == 0 {
			ch.t.Fatalf("reference run of %s ended %s: want completed with output", cfg.name, out)
		}
		ch.t.Logf("reference %s: %s", cfg.name, out)
		refs[cfg.name] = out
		ch.refIDs[w.Primary.ID] = true
		ch.pool.Add(w)
	}
	return refs
}

// spawn keeps inFlight workloads running.
func (ch *chaos) spawn() {
	ch.pool.Fill(inFlight, func(i int) *workload {
		w := newWorkload(ch.cl, i, ch.rng, ch.s.configs)
		if ch.s.rotate {
			w.cfg = ch.s.configs[i%len(ch.s.configs)]
		}
		return w
	})
}

// killLoop kills the server at random moments under load, records each
// crash and restarts the server on the same database.
func (ch *chaos) killLoop(ctx context.Context) {
	for ch.kills < ch.s.kills && ctx.Err() == nil {
		// Kill while work is happening: wait (at most a second) for an
		// executor to finish after the restart, then a random moment.
		size := fileSize(ch.cl.journal)
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && fileSize(ch.cl.journal) == size; {
			ch.spawn()
			sleep(ctx, 2*time.Millisecond)
		}
		if ch.s.killAfterDelta {
			ch.waitDelta(ctx)
		}
		if ch.s.aimed(ch.kills) {
			for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && !ch.s.aim(); {
				ch.spawn()
				sleep(ctx, time.Millisecond)
			}
		} else {
			deadline := time.Now().Add(time.Duration(ch.rng.IntN(ch.s.jitter())) * time.Millisecond)
			for time.Now().Before(deadline) {
				ch.spawn()
				sleep(ctx, min(5*time.Millisecond, time.Until(deadline)))
			}
		}
		ch.killedAt = append(ch.killedAt, time.Now())
		if err := ch.cl.kill(); err != nil {
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
	err = verifytest.ForEachResponse(ctx, s, func(run *store.Run, r *store.Response) error {
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
	if !ch.pool.Wait(60 * time.Second) {
		ch.t.Errorf("workloads still running 60s after the last restart (seed %d): is recovery resuming runs?", ch.seed)
	}
	cut := map[string]int{}
	cancels := map[string]int{}
	for _, w := range ch.pool.All() {
		if w.cfg.cancel {
			cancels[w.cancelStatus]++
		}
		if w.Primary.ID == "" {
			cut[fmt.Sprint(w.Primary.LastErr)]++
		}
		if w.err != nil {
			ch.t.Errorf("workload %s (%s, response %q): %v", w.Primary.Name, w.cfg.name, w.Primary.ID, w.err)
		}
		if err := w.checkCancel(); err != nil {
			ch.t.Errorf("workload %s (seed %d): %v", w.Primary.Name, ch.seed, err)
		}
	}
	ch.t.Logf("creates cut by a kill before response.created, by error: %v", cut)
	ch.t.Logf("cancel replies by status: %v", cancels)
}

// checkResumeAtEnd resumes each reference response after its terminal
// event: the stream must end cleanly with nothing in it (responses-api.md
// §4), not break, which a client would take for a dropped connection and
// retry forever.
func (ch *chaos) checkResumeAtEnd(ctx context.Context) {
	for _, w := range ch.pool.All() {
		if !ch.refIDs[w.Primary.ID] {
			continue
		}
		base, err := ch.cl.current(ctx)
		if err != nil {
			ch.t.Fatal(err)
		}
		st := newStream(ch.cl, "at-end")
		st.ID = w.Primary.ID
		st.View.StartAt = w.Primary.Last() + 1
		c := newClient(ch.cl, base)
		err = st.Read(c.Responses.GetStreaming(ctx, st.ID, responses.ResponseGetParams{StartingAfter: openai.Int(w.Primary.Last())}))
		if err != nil || len(st.View.Events) > 0 {
			ch.t.Errorf("GET %s stream starting_after=%d (its terminal event): got %d events, err %v; want a clean end ([DONE])",
				st.ID, w.Primary.Last(), len(st.View.Events), err)
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

// orphanReader returns a client that follows response id from sequence 0.
func orphanReader(cl *cluster, id string) *resumeclient.Stream {
	st := newStream(cl, "orphan-reader")
	st.ID = id
	return st
}

// finishOrphans finds the responses whose creation became durable but
// whose id never reached a client (a kill cut the create reply), restarts
// the server, and follows each to its end from sequence 0, so every
// response in the database is finished and seen by some client.
func (ch *chaos) finishOrphans(ctx context.Context) {
	known := map[string]bool{}
	for _, w := range ch.pool.All() {
		known[w.Primary.ID] = true
	}
	s, err := ch.b.open(ctx)
	if err != nil {
		ch.t.Fatalf("open the database: %v", err)
	}
	err = verifytest.ForEachResponse(ctx, s, func(_ *store.Run, r *store.Response) error {
		if !known[r.ID] {
			ch.orphans = append(ch.orphans, orphanReader(ch.cl, r.ID))
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
		if err := st.Follow(ctx); err != nil {
			ch.t.Errorf("follow response %s: %v", st.ID, err)
		}
	}
	if err := ch.cl.stop(30 * time.Second); err != nil {
		ch.t.Error(err)
	}
}
