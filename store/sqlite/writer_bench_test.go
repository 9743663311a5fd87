//go:build unix

package sqlite_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/store/storetest"
)

// BenchmarkWriterCPU runs bench W1's workflow (BenchmarkW1's: a create,
// ten commits of a ~350-byte header, the last terminal with PruneKeep 2
// and Release) on a store with Synchronous NORMAL, so that no fsync hides
// the writer's CPU: ns/write and cpu-µs/write are what the single writer
// spends per write (statements, cgo, Go work in its critical section).
// conc=1 writes alone; conc=8 and conc=64 group-commit (a batch is
// applied without a SAVEPOINT per write, at any concurrency), and batch is
// the mean number of writes per transaction.
func BenchmarkWriterCPU(b *testing.B) {
	for _, conc := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) { benchWriterCPU(b, conc) })
	}
}

func benchWriterCPU(b *testing.B, conc int) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "w.db"), &sqlite.Options{Synchronous: sqlite.SynchronousNormal})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const steps = 10
	header := func(step int64) []store.Part {
		return []store.Part{{Name: "header", Data: fmt.Appendf(nil, `{"version":1,"workflow":"bench.w1","step":%d,%0320d}`, step, 0)}}
	}
	snap := bytes.Repeat([]byte("s"), 1024)
	workflow := func() error {
		p := storetest.ResponseParams(&storetest.ResponseOpts{Checkpoint: header(0)})
		c, err := s.ResponseCreate(ctx, p)
		if err != nil {
			return err
		}
		for step := int64(1); step <= steps; step++ {
			cp := &store.CommitParams{RunID: c.Run.ID, Epoch: c.Run.Lease.Epoch, Step: step, ResponseID: c.Response.ID,
				Status: store.StatusInProgress, Checkpoint: header(step),
				Events: []store.EventInput{{Seq: step, Type: "response.in_progress", Payload: fmt.Appendf(nil, `{"sequence_number":%d,%0150d}`, step, 0)}}}
			if step == steps {
				cp.Status, cp.Snapshot, cp.PruneKeep, cp.Release = store.StatusCompleted, snap, 2, true
			}
			if _, err := s.Commit(ctx, cp); err != nil {
				return err
			}
		}
		return nil
	}
	measureWrites(b, s, "write", func() {
		var wg sync.WaitGroup
		work := make(chan struct{})
		go func() {
			for range b.N {
				work <- struct{}{}
			}
			close(work)
		}()
		for range conc {
			wg.Go(func() {
				for range work {
					if err := workflow(); err != nil {
						b.Error(err)
					}
				}
			})
		}
		wg.Wait()
	})
}

// measureWrites times run, the benchmark's timed part, and reports the
// wall and process CPU time per write of s (ns/<unit>, cpu-µs/<unit>)
// and the writes per transaction (batch).
func measureWrites(b *testing.B, s *sqlite.Store, unit string, run func()) {
	st0 := s.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	t0, cpu0 := time.Now(), processCPU(b)
	run()
	wall, cpu := time.Since(t0), processCPU(b)-cpu0
	b.StopTimer()
	st := s.Stats()
	writes := float64(st.Writes - st0.Writes)
	b.ReportMetric(float64(wall.Nanoseconds())/writes, "ns/"+unit)
	b.ReportMetric(float64(cpu.Microseconds())/writes, "cpu-µs/"+unit)
	b.ReportMetric(writes/float64(st.Transactions-st0.Transactions), "batch")
}

// BenchmarkEventAppendCPU measures live appends (one token's delta event
// per call, each worker appending to its own response, as the host's
// per-run appenders do) on a store with Synchronous NORMAL, so that no
// fsync hides the writer's CPU: ns/append and cpu-µs/append are the
// writer's cost per append, batch the appends per transaction.
func BenchmarkEventAppendCPU(b *testing.B) {
	for _, conc := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) { benchEventAppendCPU(b, conc) })
	}
}

func benchEventAppendCPU(b *testing.B, conc int) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "a.db"), &sqlite.Options{Synchronous: sqlite.SynchronousNormal})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	type worker struct {
		c   *store.ResponseCreateResult
		seq int64
	}
	workers := make([]*worker, conc)
	for i := range workers {
		c := storetest.CreateResponse(ctx, b, s, nil)
		workers[i] = &worker{c: c, seq: c.Response.NextSeq}
	}
	appendOne := func(w *worker) error {
		err := s.EventAppend(ctx, &store.EventAppendParams{RunID: w.c.Run.ID, Epoch: w.c.Run.Lease.Epoch, ResponseID: w.c.Response.ID,
			Events: []store.EventInput{{Seq: w.seq, Type: "response.output_text.delta",
				Payload: fmt.Appendf(nil, `{"type":"response.output_text.delta","sequence_number":%d,"item_id":"msg_1","output_index":0,"content_index":0,"delta":" token"}`, w.seq)}}})
		w.seq++
		return err
	}
	measureWrites(b, s, "append", func() {
		var wg sync.WaitGroup
		per := max(b.N/conc, 1)
		for _, w := range workers {
			wg.Go(func() {
				for range per {
					if err := appendOne(w); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	})
}
