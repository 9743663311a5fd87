package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

// BenchHarness tells Bench how to make stores of one backend and how to
// measure that backend's floor.
type BenchHarness struct {
	// New returns a fresh, empty store and registers its cleanup.
	New func(b *testing.B) store.Store
	// BareTx returns a function that runs one bare transaction inserting
	// one row into the same database as s, with the same durability
	// settings: the backend's floor a commit is compared with.
	BareTx func(b *testing.B, s store.Store) func(ctx context.Context) error
	// Dir returns a directory on the same disk as the database, for the
	// raw write+fsync baseline.
	Dir func(b *testing.B) string
	// Transactions, optional, returns how many transactions s committed so
	// far; Bench then reports commits/tx, the mean group-commit batch.
	Transactions func(s store.Store) int64
}

// Baseline is the disk's and backend's floor measured in the same run.
type Baseline struct {
	Fsync  time.Duration // one 4 KB write + fsync of a file
	BareTx time.Duration // one bare one-row insert transaction
}

// MeasureBaseline times n raw write+fsync and n bare transactions.
func MeasureBaseline(b *testing.B, h BenchHarness, n int) Baseline {
	b.Helper()
	f, err := os.Create(filepath.Join(h.Dir(b), "fsync-baseline"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	t0 := time.Now()
	for i := range n {
		if _, err := f.WriteAt(buf, int64(i%16)*4096); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	var bl Baseline
	bl.Fsync = time.Since(t0) / time.Duration(n)
	bare := h.BareTx(b, h.New(b))
	t0 = time.Now()
	for range n {
		if err := bare(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	bl.BareTx = time.Since(t0) / time.Duration(n)
	return bl
}

// Bench runs the commit benchmarks Commit/conc=1, 8 and 64: each goroutine
// drives its own run. Right before each, it measures the Baseline (100 raw
// write+fsync and 100 bare transactions) so the ratios compare figures
// taken under the same conditions. It reports per commit latency-µs,
// commits/s, the process CPU time per commit (cpu-µs/commit: what the store
// itself costs, which on a loaded machine bounds group commit), the
// baselines (fsync-µs, bare-tx-µs), the ratios x-bare-tx and x-fsync
// (latency over the baselines; at concurrency 1, x-bare-tx compares
// commits with bare transactions interleaved one by one) and, for
// concurrency > 1, x-conc1 (throughput over concurrency 1's).
func Bench(b *testing.B, h BenchHarness) {
	var conc1 float64
	for _, conc := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("Commit/conc=%d", conc), func(b *testing.B) {
			tput := benchCommit(b, h, conc)
			if conc == 1 {
				conc1 = tput
			} else if conc1 > 0 {
				b.ReportMetric(tput/conc1, "x-conc1")
			}
		})
	}
}

// benchCommit commits b.N supersteps spread over conc runs and returns the
// throughput in commits/s.
func benchCommit(b *testing.B, h BenchHarness, conc int) float64 {
	ctx := context.Background()
	bl := MeasureBaseline(b, h, 100)
	b.ReportMetric(float64(bl.Fsync.Microseconds()), "fsync-µs")
	b.ReportMetric(float64(bl.BareTx.Microseconds()), "bare-tx-µs")
	s := h.New(b)
	runs := make([]*store.ResponseCreateResult, conc)
	for i := range runs {
		res, err := s.ResponseCreate(ctx, ResponseParams(&ResponseOpts{Checkpoint: Parts(4, 1024, 0)}))
		if err != nil {
			b.Fatal(err)
		}
		runs[i] = res
	}
	var tx0 int64
	if h.Transactions != nil {
		tx0 = h.Transactions(s)
	}
	if conc == 1 {
		return benchInterleaved(b, h, s, runs[0], bl)
	}
	b.ReportAllocs()
	b.ResetTimer()
	t0, cpu0 := time.Now(), processCPU()
	var wg sync.WaitGroup
	for i, c := range runs {
		n := b.N / conc
		if i < b.N%conc {
			n++
		}
		wg.Go(func() { commitSteps(b, s, c, n, 1) })
	}
	wg.Wait()
	elapsed, cpu := time.Since(t0), processCPU()-cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/commit")
	if h.Transactions != nil {
		b.ReportMetric(float64(b.N)/float64(h.Transactions(s)-tx0), "commits/tx")
	}
	tput := float64(b.N) / elapsed.Seconds()
	lat := elapsed.Seconds() * float64(conc) / float64(b.N) * 1e6 // µs per commit seen by one writer
	b.ReportMetric(tput, "commits/s")
	b.ReportMetric(lat, "latency-µs")
	b.ReportMetric(lat/float64(bl.BareTx.Microseconds()), "x-bare-tx")
	b.ReportMetric(lat/float64(bl.Fsync.Microseconds()), "x-fsync")
	return tput
}

// benchInterleaved is concurrency 1: it alternates one commit and one bare
// transaction (the latter with the timer stopped), so x-bare-tx compares
// the two under the same disk conditions, op by op. It returns commits/s.
func benchInterleaved(b *testing.B, h BenchHarness, s store.Store, c *store.ResponseCreateResult, bl Baseline) float64 {
	ctx := context.Background()
	bare := h.BareTx(b, s)
	var commitDur, bareDur, cpu, bareCPU time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := range int64(b.N) {
		t0, cpu0 := time.Now(), processCPU()
		commitSteps(b, s, c, 1, i+1)
		commitDur, cpu = commitDur+time.Since(t0), cpu+processCPU()-cpu0
		b.StopTimer()
		t0, cpu0 = time.Now(), processCPU()
		if err := bare(ctx); err != nil {
			b.Fatal(err)
		}
		bareDur, bareCPU = bareDur+time.Since(t0), bareCPU+processCPU()-cpu0
		b.StartTimer()
	}
	b.StopTimer()
	lat := commitDur.Seconds() / float64(b.N) * 1e6
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/commit")
	b.ReportMetric(float64(bareCPU.Microseconds())/float64(b.N), "bare-cpu-µs")
	b.ReportMetric(1e6/lat, "commits/s")
	b.ReportMetric(lat, "latency-µs")
	b.ReportMetric(commitDur.Seconds()/bareDur.Seconds(), "x-bare-tx")
	b.ReportMetric(lat/float64(bl.Fsync.Microseconds()), "x-fsync")
	return 1e6 / lat
}

// commitSteps commits n supersteps of a typical size: two events, a 1 KB
// snapshot, a 4-part checkpoint of which one part changes.
func commitSteps(b *testing.B, s store.Store, c *store.ResponseCreateResult, n int, first int64) {
	ctx := context.Background()
	parts := Parts(4, 1024, 0)
	snap := make([]byte, 1024)
	for i := range int64(n) {
		step := first + i
		parts[0].Data = fmt.Appendf(nil, "counter %d", step)
		p := &store.CommitParams{RunID: c.Run.ID, Epoch: c.Run.Lease.Epoch, Step: step, ResponseID: c.Response.ID,
			Status: store.StatusInProgress, Snapshot: snap, Checkpoint: parts, Events: []store.EventInput{
				{Seq: 2*step - 1, Type: "response.output_text.delta", Payload: payload("delta", 2*step-1)},
				{Seq: 2 * step, Type: "response.output_text.delta", Payload: payload("delta", 2*step)}}}
		if _, err := s.Commit(ctx, p); err != nil {
			b.Error(err)
			return
		}
	}
}

// BenchResponseRead reads a finished response whose request holds 1 MiB
// of input, by ResponseGet and, when the store implements it, by
// ResponseView (which leaves the request unread): what a client polling a
// background response costs the store per poll.
func BenchResponseRead(b *testing.B, h BenchHarness) {
	ctx := context.Background()
	s := h.New(b)
	input, _ := json.Marshal(strings.Repeat("a long \"input\" <x> & more\n", 1<<20/26))
	p := ResponseParams(nil)
	p.Response.Request = []byte(`{"model":"test-model","input":` + string(input) + `}`)
	res, err := s.ResponseCreate(ctx, p)
	if err != nil {
		b.Fatal(err)
	}
	c := NextCommit(ctx, b, s, res.Run.ID, &CommitOpts{Status: store.StatusCompleted})
	if _, err := s.Commit(ctx, c); err != nil {
		b.Fatal(err)
	}
	id := res.Response.ID
	b.Run("ResponseGet", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r, err := s.ResponseGet(ctx, id); err != nil || len(r.Request) < 1<<20 {
				b.Fatalf("ResponseGet: %d request bytes, %v", len(r.Request), err)
			}
		}
	})
	vr, ok := s.(store.ResponseViewReader)
	if !ok {
		return
	}
	b.Run("ResponseView", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r, err := vr.ResponseView(ctx, id); err != nil || r.Request != nil || r.Status != store.StatusCompleted {
				b.Fatalf("ResponseView: %v", err)
			}
		}
	})
}

// BenchLongConversation measures the finishing commit of a turn (the one
// that prunes the run's checkpoints, keeping 2, as the host's does) in a
// run that has already had `turns` turns: each turn a continued response
// of three steps whose checkpoint holds a 4 KiB part that changes per turn
// (a blob) and a small one. The run keeps the checkpoint every finished
// response resumes from, so a prune sees more of them as the conversation
// grows; ns/op is one finishing commit, which should not grow with turns.
func BenchLongConversation(b *testing.B, h BenchHarness) {
	for _, turns := range []int{100, 1000} {
		b.Run(fmt.Sprintf("turns=%d", turns), func(b *testing.B) {
			ctx := context.Background()
			s := h.New(b)
			c := CreateResponse(ctx, b, s, nil)
			prev := c.Response.ID
			turn := 0
			next := func(timed bool) {
				if turn > 0 {
					prev = CreateResponse(ctx, b, s, &ResponseOpts{RunID: c.Run.ID, PreviousResponseID: prev}).Response.ID
				}
				hist := bytes.Repeat([]byte{byte(turn)}, 4096)
				copy(hist, fmt.Appendf(nil, "turn %d", turn))
				for st := 1; st <= 3; st++ {
					p := NextCommit(ctx, b, s, c.Run.ID, &CommitOpts{NoEvents: true,
						Checkpoint: []store.Part{{Name: "history", Data: hist}, {Name: "state", Data: fmt.Appendf(nil, "t%d s%d", turn, st)}}})
					if st == 3 {
						p.Status, p.PruneKeep = store.StatusCompleted, 2
						if timed {
							b.StartTimer()
						}
					}
					if _, err := s.Commit(ctx, p); err != nil {
						b.Fatal(err)
					}
					if st == 3 && timed {
						b.StopTimer()
					}
				}
				turn++
			}
			for range turns {
				next(false)
			}
			b.ResetTimer()
			b.StopTimer()
			for range b.N {
				next(true)
			}
		})
	}
}
