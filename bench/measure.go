package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// runStat is one measured run of one cell (system, workload, concurrency).
type runStat struct {
	wfs        int           // workflows completed in the timed window
	elapsed    time.Duration // the timed window
	p50, p99   time.Duration // workflow latency
	wfps       float64       // workflows per second
	commitsWF  float64       // PostgreSQL xact_commit per workflow, reads included (NaN: SQLite)
	writesWF   float64       // PostgreSQL write transactions (xids) per workflow (NaN: SQLite)
	bytesStep  float64       // bytes written per step
	allocsStep float64       // heap allocations per step (this process)
	totalWFs   int           // workflows since open (warm-up included)
	store      *storeCounts  // superstep: store calls per workflow (nil: other systems)
}

// cellSpec says how long and how wide one run is.
type cellSpec struct {
	conc       int
	warm, dur  time.Duration
	minWarmWFs int
}

// measure opens sys, warms it up, runs workload w at spec.conc for
// spec.dur, closes it and reads the counters.
func measure(ctx context.Context, pg *pgAdmin, sys system, w workload, spec cellSpec) (runStat, error) {
	var st runStat
	before, err := readCounters(ctx, pg, sys)
	if err != nil {
		return st, err
	}
	if err := sys.open(ctx); err != nil {
		return st, err
	}
	var seq atomic.Int64
	warm, _, err := drive(ctx, sys, w, spec.conc, spec.warm, spec.minWarmWFs, &seq)
	if err == nil {
		st, err = timed(ctx, sys, w, spec, &seq)
		st.totalWFs = warm + st.wfs
	}
	if cerr := sys.close(ctx); err == nil && cerr != nil {
		err = fmt.Errorf("bench: close %s: %w", sys.name(), cerr)
	}
	if err != nil {
		return st, err
	}
	if sys.pgDatabase() != "" {
		time.Sleep(300 * time.Millisecond) // exited backends flush their statistics
	}
	after, err := readCounters(ctx, pg, sys)
	if err != nil {
		return st, err
	}
	if sc, ok := sys.(interface{ storeCounts() storeCounts }); ok {
		c := sc.storeCounts()
		st.store = &c
		if storeStats {
			wfs := float64(st.totalWFs)
			fmt.Fprintf(os.Stderr, "bench: %s %s %s c=%d: store time per workflow: commits %.3f ms (%.3f ms each), create %.3f ms\n",
				sys.name(), sys.storage(), w, spec.conc, float64(c.commitTime.Microseconds())/1e3/wfs,
				float64(c.commitTime.Microseconds())/1e3/float64(max(c.commits, 1)), float64(c.createTime.Microseconds())/1e3/wfs)
		}
	}
	steps := float64(st.totalWFs * w.steps())
	st.commitsWF, st.writesWF = math.NaN(), math.NaN()
	if sys.pgDatabase() != "" {
		st.commitsWF = float64(after.xactCommit-before.xactCommit) / float64(st.totalWFs)
		st.writesWF = float64(after.nextXID-before.nextXID) / float64(st.totalWFs)
	}
	st.bytesStep = float64(after.bytes-before.bytes) / steps
	return st, nil
}

// timed runs the measured window and fills latency, rate and allocations.
func timed(ctx context.Context, sys system, w workload, spec cellSpec, seq *atomic.Int64) (runStat, error) {
	var st runStat
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	n, lats, err := drive(ctx, sys, w, spec.conc, spec.dur, 1, seq)
	st.elapsed = time.Since(start)
	runtime.ReadMemStats(&m1)
	if err != nil {
		return st, err
	}
	st.wfs = n
	st.wfps = float64(n) / st.elapsed.Seconds()
	st.p50, st.p99 = percentile(lats, 0.50), percentile(lats, 0.99)
	st.allocsStep = float64(m1.Mallocs-m0.Mallocs) / float64(n*w.steps())
	return st, nil
}

// drive runs conc workers, each starting workflow after workflow until d
// passed and at least minWFs completed in total; it returns the count and
// the latencies.
func drive(ctx context.Context, sys system, w workload, conc int, d time.Duration, minWFs int, seq *atomic.Int64) (int, []time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	deadline := time.Now().Add(d)
	var done atomic.Int64
	var mu sync.Mutex
	var lats []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			var mine []time.Duration
			for ctx.Err() == nil && (time.Now().Before(deadline) || done.Load() < int64(minWFs)) {
				id := fmt.Sprintf("wf-%d-%d", time.Now().UnixNano(), seq.Add(1))
				t0 := time.Now()
				if err := sys.do(ctx, w, id); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("bench: %s %s: %w", sys.name(), w, err)
					}
					mu.Unlock()
					cancel()
					break
				}
				mine = append(mine, time.Since(t0))
				done.Add(1)
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return len(lats), lats, firstErr
}

func percentile(lats []time.Duration, p float64) time.Duration {
	if len(lats) == 0 {
		return 0
	}
	s := slices.Clone(lats)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// counters is what readCounters samples around a run.
type counters struct {
	xactCommit int64
	nextXID    int64
	bytes      int64 // WAL bytes (PostgreSQL) or this process's write_bytes (SQLite, files)
}

func readCounters(ctx context.Context, pg *pgAdmin, sys system) (counters, error) {
	if db := sys.pgDatabase(); db != "" {
		c, err := pg.counters(ctx, db)
		return counters{xactCommit: c.xactCommit, nextXID: c.nextXID, bytes: c.walLSN}, err
	}
	b, err := processWriteBytes()
	return counters{bytes: b}, err
}

// processWriteBytes is write_bytes of /proc/self/io: bytes this process
// caused to be sent to the block layer.
func processWriteBytes() (int64, error) {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return 0, nil //nolint:nilerr // not on Linux: no byte counts
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "write_bytes: "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, sc.Err()
}
