package multihost

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/testkit/resumeclient"
	"github.com/superstep/superstep/internal/testkit/verifytest"
	"github.com/superstep/superstep/internal/testkit/workpool"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/verify"
)

// killLease is the --lease of TestMultihost_Kills. A killed host's runs
// wait for it to expire, so it bounds how fast the test goes; 2s (renewed
// every 667ms) leaves room for the pauses of a loaded CI machine running
// race-enabled servers, so that no lease is lost without a kill.
const killLease = "2s"

// killInFlight is how many workloads run at once during the kills.
const killInFlight = 6

// killConfigs are the workloads: silent supersteps, two outputs in one
// superstep, and a fan-out/fan-in.
var killConfigs = []config{
	{name: "silent-6", model: "demo.silent", meta: map[string]string{"steps": "6"}},
	{name: "two-outputs", model: "demo.two-outputs"},
	{name: "fanout-3", model: "demo.fanout", meta: map[string]string{"workers": "3"}},
}

// workload is one request. A streaming workload has a creating client that
// streams from the start and a reader that joins later; a polling workload
// creates in the background without a stream (so it cannot be streamed,
// as with OpenAI) and polls until the response is final. Every connection
// goes to a random host, and after a broken one to another host.
type workload struct {
	cfg     config
	delayMS int
	poll    bool
	cl      *cluster
	// Pair's Reader is nil for a polling workload; its Cursor is the
	// reader's first starting_after (-2: the primary's last).
	resumeclient.Pair
	polls int
	final []byte // the last polled body (polling workloads)
	err   error
}

// newWorkload draws a workload from rng.
func newWorkload(cl *cluster, n int, rng *rand.Rand) *workload {
	w := &workload{cfg: killConfigs[rng.IntN(len(killConfigs))], delayMS: 20 + rng.IntN(31), poll: rng.IntN(3) == 0, cl: cl}
	w.Primary = newStream(cl, fmt.Sprintf("w%d-primary", n))
	if !w.poll {
		w.Reader = newStream(cl, fmt.Sprintf("w%d-reader", n))
		w.Cursor = int64(rng.IntN(3)) - 2
	}
	return w
}

// run drives the workload to its terminal event through any number of
// kills. A response whose creation was cut before its id reached the
// client is left to the final check, which reads every response in the
// database.
func (w *workload) run(ctx context.Context) {
	if w.poll {
		w.runPoll(ctx)
		return
	}
	w.err = w.Pair.Run(ctx, w.cfg.params(w.delayMS), nil)
}

// runPoll creates the response in the background on a random host and
// polls it on random hosts until it is final.
func (w *workload) runPoll(ctx context.Context) {
	base, err := w.cl.pick(ctx, "")
	if err != nil {
		w.err = err
		return
	}
	c := newClient(base)
	resp, err := c.Responses.New(ctx, w.cfg.params(w.delayMS))
	if w.err = resumeclient.FatalHTTP(err); w.err != nil || err != nil {
		w.Primary.LastErr = err // cut by a kill: the response may exist all the same
		return
	}
	w.Primary.ID = resp.ID
	w.polls, w.final, w.err = poll(ctx, w.cl, resp.ID, 50*time.Millisecond)
}

// streams returns the workload's streaming clients (none for a polling
// one, whose primary never streamed).
func (w *workload) streams() []*stream {
	if w.poll {
		return nil
	}
	return w.Streams()
}

// chaos is the state of TestMultihost_Kills.
type chaos struct {
	t      *testing.T
	cl     *cluster
	st     store.Store
	rng    *rand.Rand
	seed   uint64
	kills  int
	marks  []verify.CrashMark
	refIDs map[string]bool
	// orphans follow the responses no workload knew the id of (the create
	// reply was cut by a kill).
	orphans []*stream
	// pool runs the workloads and holds every one, references first.
	pool *workpool.Pool[*workload]
}

// TestMultihost_Kills runs three hosts on one PostgreSQL database and
// SIGKILLs a random one repeatedly while runs are in flight, restarting it
// as a new process (new host id, new port) each time. Clients stream or
// poll through random hosts and go to another host when theirs dies. At
// the end every response must have completed exactly once: its log is
// contiguous with one terminal event, its outcome equals a crash-free
// run's, every client saw exactly the log, and the journal shows no
// committed superstep executed again and at most one re-run per kill.
func TestMultihost_Kills(t *testing.T) {
	seed := seedOf(t)
	t.Logf("%d kills (more: -kills N)", *flagKills)
	began := time.Now()
	cl := newCluster(t, seed, "--lease", killLease)
	ch := &chaos{t: t, cl: cl, st: openStore(t, cl.db),
		rng: rand.New(rand.NewPCG(seed, 0x5eed)), seed: seed}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second+time.Duration(*flagKills)*3*time.Second)
	defer cancel()
	ch.pool = workpool.New(ctx, func(ctx context.Context, w *workload) { w.run(ctx) })
	defer ch.pool.Stop()
	ch.cl.startAll(ctx)
	refs := ch.references(ctx)
	ch.killLoop(ctx)
	ch.drain(refs)
	ch.finishOrphans(ctx)
	if err := ch.cl.stopAll(30 * time.Second); err != nil {
		t.Error(err)
	}
	ch.verify(ctx, refs)
	t.Logf("took %v", time.Since(began).Round(time.Millisecond))
}

// references runs each config once without kills, streamed through a
// random host, and returns the outcome of each by config name.
func (ch *chaos) references(ctx context.Context) map[string]verify.Outcome {
	refs := map[string]verify.Outcome{}
	ch.refIDs = map[string]bool{}
	for i, cfg := range killConfigs {
		st := newStream(ch.cl, fmt.Sprintf("ref%d", i))
		out := referenceOutcome(ch.t, cfg.name, st, st.Run(ctx, cfg.params(5)))
		if len(out.Output) == 0 {
			ch.t.Fatalf("reference run of %s ended %s: want completed with output", cfg.name, out)
		}
		refs[cfg.name] = out
		ch.refIDs[st.ID] = true
		ch.pool.Add(&workload{cfg: cfg, cl: ch.cl, Pair: resumeclient.Pair{Primary: st}})
	}
	return refs
}

// spawn keeps killInFlight workloads running.
func (ch *chaos) spawn() {
	ch.pool.Fill(killInFlight, func(i int) *workload { return newWorkload(ch.cl, i, ch.rng) })
}

// waitSpawning waits d while keeping workloads running.
func (ch *chaos) waitSpawning(ctx context.Context, d time.Duration) {
	for deadline := time.Now().Add(d); time.Now().Before(deadline) && ctx.Err() == nil; {
		ch.spawn()
		sleep(ctx, min(5*time.Millisecond, time.Until(deadline)))
	}
}

// killLoop kills a random host at random moments under load, records each
// crash and starts a new process in its slot. The next kill may come
// before the killed host's runs were taken over, so failures overlap.
func (ch *chaos) killLoop(ctx context.Context) {
	for ch.kills < *flagKills && ctx.Err() == nil {
		// Kill while executors run: wait (at most a second) for the
		// journal to grow, then a random moment.
		size := journalLen(ch.cl.journal)
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && journalLen(ch.cl.journal) == size; {
			ch.spawn()
			sleep(ctx, 2*time.Millisecond)
		}
		ch.waitSpawning(ctx, time.Duration(ch.rng.IntN(600))*time.Millisecond)
		up := ch.cl.upSlots()
		slot := up[ch.rng.IntN(len(up))]
		if _, err := ch.cl.kill(slot); err != nil {
			ch.t.Fatal(err)
		}
		ch.kills++
		m, err := crashMark(ctx, ch.st, ch.cl.journal)
		if err != nil {
			ch.t.Fatalf("crash mark after kill %d: %v", ch.kills, err)
		}
		ch.marks = append(ch.marks, m)
		ch.waitSpawning(ctx, time.Duration(ch.rng.IntN(400))*time.Millisecond)
		if _, err := ch.cl.start(ctx, slot); err != nil {
			ch.t.Fatalf("restart host %d after kill %d: %v", slot, ch.kills, err)
		}
	}
}

// drain waits for every workload to reach its terminal event.
func (ch *chaos) drain(refs map[string]verify.Outcome) {
	if !ch.pool.Wait(90 * time.Second) {
		ch.t.Errorf("workloads still running 90s after the last kill (seed %d): are runs taken over?", ch.seed)
	}
	all := ch.pool.All()
	cut := map[string]int{}
	var reconnects, switches, polls, pollers int
	for _, w := range all {
		if w.Primary.ID == "" {
			cut[fmt.Sprint(w.Primary.LastErr)]++
		}
		if w.err != nil {
			ch.t.Errorf("workload %s (%s, response %q): %v", w.Primary.Name, w.cfg.name, w.Primary.ID, w.err)
		}
		for _, st := range []*stream{w.Primary, w.Reader} {
			if st != nil {
				reconnects += max(st.Retries-1, 0)
				switches += st.Switches
			}
		}
		if w.poll && w.err == nil && w.Primary.ID != "" {
			pollers++
			polls += w.polls
			// What the poller was shown last is the final outcome.
			if out, err := verify.SnapshotOutcome(w.final); err != nil || !out.Equal(refs[w.cfg.name]) {
				ch.t.Errorf("workload %s (%s, response %s): polled %s (%v), want %s", w.Primary.Name, w.cfg.name,
					w.Primary.ID, out, err, refs[w.cfg.name])
			}
		}
	}
	ch.t.Logf("%d workloads (%d polling, %d polls); %d stream reconnections; %d stream connections went to another host than the previous one",
		len(all), pollers, polls, reconnects, switches)
	ch.t.Logf("creates cut by a kill before the id reached the client, by error: %v", cut)
}

// finishOrphans follows, from sequence 0, every response whose creation
// became durable but whose id never reached a client, so every response
// in the database is finished and seen by some client.
func (ch *chaos) finishOrphans(ctx context.Context) {
	known := map[string]bool{}
	for _, w := range ch.pool.All() {
		known[w.Primary.ID] = true
	}
	var polled []string
	err := verifytest.ForEachResponse(ctx, ch.st, func(_ *store.Run, r *store.Response) error {
		if !known[r.ID] && !createdStreaming(r.Request) {
			// A polling workload's create: the API streams only responses
			// created with stream=true (a 400 otherwise), so wait for it.
			polled = append(polled, r.ID)
		} else if !known[r.ID] {
			st := newStream(ch.cl, "orphan-reader")
			st.ID = r.ID
			ch.orphans = append(ch.orphans, st)
		}
		return nil
	})
	if err != nil {
		ch.t.Fatal(err)
	}
	ch.t.Logf("%d responses whose create reply was cut (%d of them polled)", len(ch.orphans)+len(polled), len(polled))
	for _, st := range ch.orphans {
		if err := st.Follow(ctx); err != nil {
			ch.t.Errorf("follow response %s: %v", st.ID, err)
		}
	}
	for _, id := range polled {
		for {
			r, err := ch.st.ResponseGet(ctx, id)
			if err != nil {
				ch.t.Fatalf("poll response %s: %v", id, err)
			}
			if r.Status.Terminal() {
				break
			}
			sleep(ctx, 100*time.Millisecond)
		}
	}
}

// createdStreaming reports whether a stored create request asked for a
// stream (only those can be streamed later, as on OpenAI).
func createdStreaming(request []byte) bool {
	var req struct {
		Stream bool `json:"stream"`
	}
	return json.Unmarshal(request, &req) == nil && req.Stream
}

// verify checks the database with package verify (logs, client views,
// reference outcomes, journal with the crash marks), store.Check and
// `superstep check`.
func (ch *chaos) verify(ctx context.Context, refs map[string]verify.Outcome) {
	t := ch.t
	entries, err := verify.ReadJournal(ch.cl.journal)
	if err != nil {
		t.Fatal(err)
	}
	streams := ch.orphans
	for _, w := range ch.pool.All() {
		streams = append(streams, w.streams()...)
	}
	clients := resumeclient.ViewsByID(streams...)
	in := &verify.Input{Journal: &verify.Journal{Entries: entries, Crashes: ch.kills, Marks: ch.marks}}
	workloads := loadResponses(ctx, t, ch.st, in, clients, refs)
	in.Journal.PerAttempt = verifytest.PerAttempt(entries, workloads, ch.refIDs, nil)
	rep := verify.Check(in)
	t.Logf("%v after %d kills", rep, ch.kills)
	// A killed host logs nothing more: a lease-lost line means a live host
	// stalled past its lease (a false takeover), which the journal check,
	// counting only kills, cannot place.
	lost := ch.cl.logsContaining("lease lost")
	t.Logf("leases lost by live hosts (stalls past --lease %s): %v", killLease, lost)
	if err := rep.Err(); err != nil {
		t.Errorf("seed %d: %v", ch.seed, err)
	}
	ch.cl.checkCommand(ctx)
	taken := 0
	err = verifytest.ForEachResponse(ctx, ch.st, func(run *store.Run, _ *store.Response) error {
		if run.Lease.Epoch > 1 {
			taken++ // claimed again after its creating host's claim
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	t.Logf("%d runs were claimed by more than one host process", taken)
}
