package multihost

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/testkit/resumeclient"
	"github.com/superstep/superstep/internal/testkit/verifytest"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/verify"
)

// Settings of TestMultihost_Spread.
const (
	spreadMaxRuns   = 8  // --max-runs of every host: queues form
	spreadCreators  = 16 // concurrent creating clients
	spreadStreamOne = 20 // one run in this many is streamed, from a random host
	spreadDelayMS   = 10 // step_delay_ms: each executor works a little
	// spreadLease is --lease: nothing is killed here, so the lease only
	// has to outlast the stalls of a CI machine running this test beside
	// the crash suite (three race-enabled servers and 1,000 creates on two
	// cores); at 2s a renewal stuck behind slow commits could stop a
	// healthy run, whose superstep then ran twice with no crash.
	spreadLease = "5s"
	// spreadIdleLimit is the longest a host may drive no run while at
	// least spreadMaxRuns runs wait in the queue: a host claims queued
	// runs at least every second and whenever a slot frees.
	spreadIdleLimit = 2 * time.Second
)

var spreadConfig = config{name: "fanout-4", model: "demo.fanout", meta: map[string]string{"workers": "4"}}

// spreadSample is one look at the cluster while runs are queued.
type spreadSample struct {
	at     time.Time
	queued int   // active runs no live host holds
	active int   // active runs
	driven []int // superstep_host_active_runs of each host
}

// TestMultihost_Spread creates 1,000 background runs of demo.fanout, all
// on one host, with three hosts capped at --max-runs 8: the first host
// queues what it cannot drive and the others claim the queue. Every run
// must complete exactly once (reference outcome, executor journal with no
// re-run), each host must take part (at least a quarter of a third of
// the commits; see checkSpread), and no host may stay idle while runs wait in the queue.
func TestMultihost_Spread(t *testing.T) {
	seed := seedOf(t)
	n := *flagSpread
	began := time.Now()
	cl := newCluster(t, seed, "--lease", spreadLease, "--max-runs", strconv.Itoa(spreadMaxRuns))
	st := openStore(t, cl.db)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second+time.Duration(n)*100*time.Millisecond)
	defer cancel()
	cl.startAll(ctx)

	ref := pinnedStream("reference", cl.host(1).url())
	refOut := referenceOutcome(t, spreadConfig.name, ref, ref.Create(ctx, spreadConfig.params(1)))
	before := make([]map[string]float64, hostCount)
	for i := range hostCount {
		var err error
		if before[i], err = scrape(ctx, cl.host(i)); err != nil {
			t.Fatal(err)
		}
	}

	start := time.Now()
	var created atomic.Int64
	streams := make([]*stream, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range spreadCreators {
		wg.Go(func() {
			for i := range next {
				errs[i] = createOnFirst(ctx, cl, i, &streams[i])
				created.Add(1)
			}
		})
	}
	samples := make(chan []spreadSample, 1)
	stopSampling := make(chan struct{})
	go func() { samples <- sampleSpread(ctx, cl, st, stopSampling) }() // owned: ends when stopSampling closes
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	createdIn := time.Since(start)
	waitAllDone(ctx, t, st, n+1)
	elapsed := time.Since(start)
	close(stopSampling)
	spans := <-samples
	for i, err := range errs {
		if err != nil {
			t.Errorf("run %d: %v", i, err)
		}
	}
	t.Logf("%d runs created on host 0 in %v, all finished after %v (%.0f runs/s)", n, createdIn.Round(time.Millisecond),
		elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())

	checkSpread(ctx, t, cl, before, spans)
	if err := cl.stopAll(30 * time.Second); err != nil {
		t.Error(err)
	}

	clients := resumeclient.ViewsByID(append(streams, ref)...)
	entries, err := verify.ReadJournal(cl.journal)
	if err != nil {
		t.Fatal(err)
	}
	in := &verify.Input{Journal: &verify.Journal{Entries: entries}}
	workloads := loadResponses(ctx, t, st, in, clients, map[string]verify.Outcome{spreadConfig.name: refOut})
	if len(in.Responses) != n+1 {
		t.Errorf("%d responses in the database, want %d", len(in.Responses), n+1)
	}
	in.Journal.PerAttempt = verifytest.PerAttempt(entries, workloads, map[string]bool{ref.ID: true}, nil)
	checkJournalComplete(t, entries, ref.ID, in.Responses)
	rep := verify.Check(in)
	t.Logf("%v", rep)
	if err := rep.Err(); err != nil {
		t.Error(err)
	}
	cl.checkCommand(ctx)
	t.Logf("took %v", time.Since(began).Round(time.Millisecond))
}

// createOnFirst creates run i on host 0 in the background; one in
// spreadStreamOne is created streaming and read to its end from a random
// host (the creating stream is closed after response.created).
func createOnFirst(ctx context.Context, cl *cluster, i int, out **stream) error {
	base := cl.host(0).url()
	if i%spreadStreamOne != 0 {
		c := newClient(base)
		_, err := c.Responses.New(ctx, spreadConfig.params(spreadDelayMS))
		if err != nil {
			return fmt.Errorf("create on host 0: %w", err)
		}
		return nil
	}
	s := newStream(cl, fmt.Sprintf("stream-%d", i))
	*out = s
	c := newClient(base)
	sse := c.Responses.NewStreaming(ctx, spreadConfig.params(spreadDelayMS))
	for s.ID == "" && sse.Next() {
		ev := sse.Current()
		s.View.Events = append(s.View.Events, verify.ReceivedEvent{Seq: ev.SequenceNumber, Type: ev.Type, Data: []byte(ev.RawJSON())})
		if ev.Type == "response.created" {
			s.ID = ev.Response.ID
		}
	}
	err := sse.Err()
	sse.Close()
	if s.ID == "" {
		return fmt.Errorf("create on host 0: no response.created (%v)", err)
	}
	return s.Follow(ctx) // from a random host, with starting_after
}

// sampleSpread looks at the queue and at each host's running runs every
// 100ms until stop is closed, and returns the samples taken while runs
// were queued.
func sampleSpread(ctx context.Context, cl *cluster, st store.Store, stop <-chan struct{}) []spreadSample {
	var out []spreadSample
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return out
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
		s := spreadSample{at: time.Now(), driven: make([]int, hostCount)}
		ok := true
		for i := range hostCount {
			m, err := scrape(ctx, cl.host(i))
			if err != nil {
				ok = false
				break
			}
			s.driven[i] = int(m["superstep_host_active_runs"])
		}
		err := eachRun(ctx, st, func(r *store.Run) {
			if r.Active {
				s.active++
				if r.Lease.Owner == "" || !r.Lease.ExpiresAt.After(s.at) {
					s.queued++
				}
			}
		})
		if ok && err == nil {
			out = append(out, s)
		}
	}
}

// eachRun calls fn for every run in s.
func eachRun(ctx context.Context, s store.Store, fn func(*store.Run)) error {
	after := ""
	for {
		runs, err := s.RunList(ctx, &store.RunListParams{After: after, Limit: 1000})
		if err != nil {
			return fmt.Errorf("multihost: list runs: %w", err)
		}
		if len(runs) == 0 {
			return nil
		}
		for _, r := range runs {
			fn(r)
		}
		after = runs[len(runs)-1].ID
	}
}

// waitAllDone waits until the store holds want runs and none is active.
func waitAllDone(ctx context.Context, t *testing.T, st store.Store, want int) {
	for {
		total, active := 0, 0
		err := eachRun(ctx, st, func(r *store.Run) {
			total++
			if r.Active {
				active++
			}
		})
		if err == nil && total == want && active == 0 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d runs, %d still active (%v): %v", total, want, active, err, ctx.Err())
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// checkSpread checks the work was spread: every host made at least a
// quarter of its third of the commits, and no host stayed idle longer than
// spreadIdleLimit while at least spreadMaxRuns runs were queued. The bound
// on commits is loose on purpose: host 0 also serves all 1,000 creates and
// the streams, so on a loaded 2-core machine it drives fewer runs (16-23 %
// of the commits were measured); what matters is that every host takes
// part and none sits idle while runs wait, which the idle check holds
// tightly.
func checkSpread(ctx context.Context, t *testing.T, cl *cluster, before []map[string]float64, samples []spreadSample) {
	commits := make([]float64, hostCount)
	claimed := make([]float64, hostCount)
	total := 0.0
	for i := range hostCount {
		m, err := scrape(ctx, cl.host(i))
		if err != nil {
			t.Fatal(err)
		}
		commits[i] = m["superstep_host_commits_total"] - before[i]["superstep_host_commits_total"]
		claimed[i] = m["superstep_host_runs_recovered_total"] - before[i]["superstep_host_runs_recovered_total"]
		total += commits[i]
	}
	t.Logf("commits by host: %v; queued runs claimed by host: %v", commits, claimed)
	for i, c := range commits {
		if c < total/hostCount/4 {
			t.Errorf("host %d made %v of %v commits, less than a quarter of its share", i, c, total)
		}
	}
	maxQueued, queuedSamples := 0, 0
	idleSince := make([]time.Time, hostCount)
	longest := make([]time.Duration, hostCount)
	idleSamples := 0
	for _, s := range samples {
		maxQueued = max(maxQueued, s.queued)
		queue := s.queued >= spreadMaxRuns
		if queue {
			queuedSamples++
		}
		for i, d := range s.driven {
			if !queue || d > 0 {
				idleSince[i] = time.Time{}
				continue
			}
			idleSamples++
			if idleSince[i].IsZero() {
				idleSince[i] = s.at
			}
			longest[i] = max(longest[i], s.at.Sub(idleSince[i]))
		}
	}
	t.Logf("%d samples, %d with at least %d runs queued (at most %d); host-samples idle while queued: %d; longest idle spans: %v",
		len(samples), queuedSamples, spreadMaxRuns, maxQueued, idleSamples, longest)
	if queuedSamples == 0 {
		t.Errorf("no queue formed (at most %d queued): the test did not exercise the spread", maxQueued)
	}
	for i, d := range longest {
		if d > spreadIdleLimit {
			t.Errorf("host %d drove no run for %v while runs were queued", i, d)
		}
	}
}

// checkJournalComplete requires every response's journal to hold as many
// invocations as the reference run's: each superstep ran, once (verify
// counts re-runs; this counts missing ones).
func checkJournalComplete(t *testing.T, entries []verify.JournalEntry, refID string, rs []verify.ResponseInput) {
	per := map[string]int{}
	for _, e := range entries {
		per[e.ResponseID]++
	}
	want := per[refID]
	if want == 0 {
		t.Fatalf("the reference run %s left no journal entries", refID)
	}
	bad := 0
	for _, r := range rs {
		if per[r.ID] != want {
			bad++
			if bad <= 5 {
				t.Errorf("response %s: %d executor invocations in the journal, want %d", r.ID, per[r.ID], want)
			}
		}
	}
	if bad > 5 {
		t.Errorf("... and %d more responses with a wrong journal count", bad-5)
	}
}
