package postgres

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkServerCPU measures the PostgreSQL backend CPU time (its run time,
// from /proc; PostgreSQL must run on this machine) one commit costs next
// to one bare one-row insert, on one connection at concurrency 1. On a
// CPU-starved machine this, not the WAL flush, sets the commit/bare ratio.
func BenchmarkServerCPU(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, testURL(), &Options{Schema: newSchemaName(b), MaxConns: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE bench_bare (id bigserial PRIMARY KEY, v bytea)"); err != nil {
		b.Fatal(err)
	}
	conn.Release() // the pool's only connection: every call below runs on backend pid
	if os.Getenv("SUPERSTEP_BENCH_NOTIFY") != "keep" {
		// Announcements would run on the same backend: measure the commit alone.
		s.opts.NotifyInCommit = true
		s.opts.Channel = ""
	}
	w := newBenchRun(ctx, b, s)
	bare := func() error {
		_, err := s.pool.Exec(ctx, "INSERT INTO bench_bare (v) VALUES ($1)", []byte("x"))
		return err
	}
	for range 20 { // warm up: plans, caches
		if err := bare(); err != nil {
			b.Fatal(err)
		}
		if err := w.commit(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	var bareCPU, commitCPU time.Duration
	for range 4 {
		c0 := procCPU(b, pid)
		for range b.N / 4 {
			if err := bare(); err != nil {
				b.Fatal(err)
			}
		}
		c1 := procCPU(b, pid)
		for range b.N / 4 {
			if err := w.commit(ctx, s); err != nil {
				b.Fatal(err)
			}
		}
		c2 := procCPU(b, pid)
		bareCPU, commitCPU = bareCPU+c1-c0, commitCPU+c2-c1
	}
	n := float64(b.N / 4 * 4)
	b.ReportMetric(float64(bareCPU.Microseconds())/n, "bare-server-cpu-µs")
	b.ReportMetric(float64(commitCPU.Microseconds())/n, "commit-server-cpu-µs")
}

// procCPU returns the CPU time of process pid: its run time in
// nanoseconds from /proc/<pid>/schedstat (the 10 ms ticks of
// /proc/<pid>/stat are too coarse for a few thousand commits).
func procCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		b.Skipf("PostgreSQL backend not visible in /proc: %v", err)
	}
	f := strings.Fields(string(data))
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		b.Fatalf("/proc/%d/schedstat: %v", pid, err)
	}
	return time.Duration(ns)
}
