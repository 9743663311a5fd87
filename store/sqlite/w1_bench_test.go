//go:build unix

package sqlite_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/store/storetest"
)

// BenchmarkW1 runs bench W1's workflow on the store alone, one at a time:
// a response created with its step-0 checkpoint, ten supersteps each
// changing the one ~350-byte checkpoint part (the workflow header, as
// package workflow writes it for W1), the last terminal with PruneKeep 2
// and Release, as the host sends them. After each commit a bare one-row
// insert transaction runs with the timer stopped (as in BenchmarkStore's
// Commit/conc=1): x-bare-tx is a superstep's commit over it. Per
// workflow: process CPU and bytes passed to write(2) by the store's calls.
// PruneLast is what the host sends (PruneKeep on the terminal commit);
// NoPrune, without it, shows what the terminal prune costs; PruneEvery,
// with PruneKeep on every commit, what pruning at each step instead would:
// 15% more bytes than PruneLast as the store prunes (after the insert); a
// trial deleting by key range before the insert wrote 15% fewer, but both
// cost ~20% more CPU and wall time than PruneLast (a statement more per
// commit), so the host prunes at the end.
func BenchmarkW1(b *testing.B) {
	b.Run("PruneEvery", func(b *testing.B) { benchW1(b, 2, true) })
	b.Run("PruneLast", func(b *testing.B) { benchW1(b, 2, false) })
	b.Run("NoPrune", func(b *testing.B) { benchW1(b, 0, false) })
}

func benchW1(b *testing.B, pruneKeep int, every bool) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "w1.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	bare := bareTx(b, s)
	const steps = 10
	header := func(step int64) []store.Part {
		return []store.Part{{Name: "header", Data: fmt.Appendf(nil, `{"version":1,"workflow":"bench.w1","step":%d,%0320d}`, step, 0)}}
	}
	snap := bytes.Repeat([]byte("s"), 1024)
	var commitDur, bareDur, cpu time.Duration
	var written int64
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		w0, t0, cpu0 := procWriteBytes(b), time.Now(), processCPU(b)
		p := storetest.ResponseParams(&storetest.ResponseOpts{Checkpoint: header(0)})
		c, err := s.ResponseCreate(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		cpu += processCPU(b) - cpu0
		written += procWriteBytes(b) - w0
		for step := int64(1); step <= steps; step++ {
			w0, t0, cpu0 = procWriteBytes(b), time.Now(), processCPU(b)
			cp := &store.CommitParams{RunID: c.Run.ID, Epoch: c.Run.Lease.Epoch, Step: step, ResponseID: c.Response.ID,
				Status: store.StatusInProgress, Checkpoint: header(step),
				Events: []store.EventInput{{Seq: step, Type: "response.in_progress", Payload: fmt.Appendf(nil, `{"sequence_number":%d,%0150d}`, step, 0)}}}
			if every && step >= int64(pruneKeep) {
				cp.PruneKeep = pruneKeep
			}
			if step == steps {
				cp.Status, cp.Snapshot, cp.PruneKeep, cp.Release = store.StatusCompleted, snap, pruneKeep, true
			}
			if _, err := s.Commit(ctx, cp); err != nil {
				b.Fatal(err)
			}
			commitDur += time.Since(t0)
			cpu += processCPU(b) - cpu0
			written += procWriteBytes(b) - w0
			b.StopTimer()
			t0 = time.Now()
			if err := bare(ctx); err != nil {
				b.Fatal(err)
			}
			bareDur += time.Since(t0)
			b.StartTimer()
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/wf")
	b.ReportMetric(float64(written)/float64(b.N), "written-B/wf")
	b.ReportMetric(commitDur.Seconds()/bareDur.Seconds(), "x-bare-tx")
}

// processCPU returns the user and system CPU time of the process.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
