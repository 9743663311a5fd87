package multihost

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

// takeoverRunsPerKill is how many runs in flight the killed host owns at
// each kill of BenchmarkTakeover.
const takeoverRunsPerKill = 2

// takeoverLong runs for about a minute (999 steps of 50ms): it is still in
// flight at any kill.
var takeoverLong = config{name: "silent-999", model: "demo.silent", meta: map[string]string{"steps": "999"}}

// BenchmarkTakeover measures the time from a SIGKILL of a host to the
// first commit of the new owner of each run that host had in flight, with
// three hosts on one PostgreSQL database, at a short lease and at the
// default one. One op is one kill; p50-ms, p99-ms and max-ms are over every
// run taken over. Run it with, for example,
//
//	go test ./e2e/multihost -run '^$' -bench Takeover -benchtime 30x -timeout 2h
func BenchmarkTakeover(b *testing.B) {
	for _, lease := range []string{"1500ms", "15s"} {
		b.Run("lease="+lease, func(b *testing.B) { benchTakeover(b, lease) })
	}
}

// benchTakeover runs b.N kills at the given --lease.
func benchTakeover(b *testing.B, lease string) {
	cl := newCluster(b, 1, "--lease", lease)
	st := openStore(b, cl.db)
	leaseDur, err := time.ParseDuration(lease)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(b.N+2)*(3*leaseDur+time.Minute))
	defer cancel()
	cl.startAll(ctx)
	rng := rand.New(rand.NewPCG(seedOf(b), 0x7a4e))
	var samples []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		slot, ids, all := startLongRuns(ctx, b, cl, st, i%hostCount)
		// Kill at a random moment of the lease: a crash does not wait
		// for the lease's last renewal.
		sleep(ctx, time.Duration(rng.Int64N(int64(leaseDur))))
		b.StartTimer()
		d, err := killAndMeasure(ctx, cl, st, slot, ids)
		b.StopTimer()
		if err != nil {
			b.Fatalf("kill %d: %v", i+1, err)
		}
		samples = append(samples, d...)
		cancelRuns(ctx, b, cl, all)
		if _, err := cl.start(ctx, slot); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(samples)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(percentile(samples, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(samples, 0.99)), "p99-ms")
	b.ReportMetric(ms(samples[len(samples)-1]), "max-ms")
	b.Logf("--lease %s: %d kills, %d runs taken over: p50 %v, p99 %v, min %v, max %v", lease, b.N, len(samples),
		percentile(samples, 0.50), percentile(samples, 0.99), samples[0], samples[len(samples)-1])
	if err := cl.stopAll(30 * time.Second); err != nil {
		b.Error(err)
	}
}

// percentile returns the p-th quantile (nearest rank) of sorted ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(ds)))) - 1
	return ds[max(i, 0)]
}

// startLongRuns creates takeoverRunsPerKill long runs on the host of slot
// and waits until each committed a step. It returns the slot of the host
// that drives the first (the one that created them, below --max-runs) and
// the response and run ids of the runs that host drives, then of all.
func startLongRuns(ctx context.Context, b *testing.B, cl *cluster, st store.Store, slot int) (int, [][2]string, [][2]string) {
	h := cl.host(slot)
	var ids [][2]string
	for range takeoverRunsPerKill {
		c := newClient(h.url())
		resp, err := c.Responses.New(ctx, takeoverLong.params(50))
		if err != nil {
			b.Fatalf("create on host %d: %v", slot, err)
		}
		rec, err := st.ResponseGet(ctx, resp.ID)
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, [2]string{resp.ID, rec.RunID})
	}
	owners := make([]string, len(ids))
	for i, id := range ids {
		for {
			run, err := st.RunGet(ctx, id[1])
			if err != nil {
				b.Fatal(err)
			}
			if run.Lease.Owner != "" && run.LastStep >= 1 {
				owners[i] = run.Lease.Owner
				break
			}
			if ctx.Err() != nil {
				b.Fatal(ctx.Err())
			}
			sleep(ctx, 5*time.Millisecond)
		}
	}
	victim := cl.byID(owners[0])
	if victim == nil {
		b.Fatalf("run %s is driven by %q, not one of the hosts", ids[0][1], owners[0])
	}
	var mine [][2]string
	for i, id := range ids {
		if owners[i] == victim.id {
			mine = append(mine, id)
		}
	}
	return victim.slot, mine, ids
}

// killAndMeasure SIGKILLs the host of slot and returns, for each run, the
// time from the kill to the first commit made under a new lease epoch.
func killAndMeasure(ctx context.Context, cl *cluster, st store.Store, slot int, ids [][2]string) ([]time.Duration, error) {
	if _, err := cl.kill(slot); err != nil {
		return nil, err
	}
	killed := time.Now()
	// Read after the kill: the dead host can commit nothing more, and no
	// other host can take over before its lease expires.
	type mark struct{ epoch, step int64 }
	marks := make([]mark, len(ids))
	for i, id := range ids {
		run, err := st.RunGet(ctx, id[1])
		if err != nil {
			return nil, err
		}
		marks[i] = mark{run.Lease.Epoch, run.LastStep}
	}
	out := make([]time.Duration, len(ids))
	left := len(ids)
	for left > 0 {
		for i, id := range ids {
			if out[i] != 0 {
				continue
			}
			run, err := st.RunGet(ctx, id[1])
			if err != nil {
				return nil, err
			}
			if run.Lease.Epoch > marks[i].epoch && run.LastStep > marks[i].step {
				out[i] = time.Since(killed)
				left--
			}
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("runs not taken over: %w", ctx.Err())
		}
		sleep(ctx, 5*time.Millisecond)
	}
	return out, nil
}

// cancelRuns cancels the long runs through a running host, so that they do
// not load the next measurements.
func cancelRuns(ctx context.Context, b *testing.B, cl *cluster, ids [][2]string) {
	for _, id := range ids {
		base, err := cl.pick(ctx, "")
		if err != nil {
			b.Fatal(err)
		}
		c := newClient(base)
		if _, err := c.Responses.Cancel(ctx, id[0]); err != nil {
			b.Fatalf("cancel %s: %v", id[0], err)
		}
	}
}
