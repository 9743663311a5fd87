package postgres

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// BenchmarkBatchServerCPU measures the PostgreSQL backend CPU (its run time,
// from /proc) per commit of a group-commit batch of k W1 supersteps (no
// events, no snapshot, one 350-byte checkpoint part that changes every
// step), written by superstep_commit_batch (path=set) or by the savepoint
// path (path=savepoint: BEGIN, a SAVEPOINT and a superstep_commit per
// member, COMMIT, pipelined), on one connection, the two paths alternating
// in rounds; wall-µs/commit is the client's time per commit (round trips
// included, WAL flushes too). wal-B/commit is the WAL position's advance per commit
// (cluster-wide: other sessions' writes count too; run it on a quiet
// server or read it as an upper bound).
func BenchmarkBatchServerCPU(b *testing.B) {
	for _, k := range []int{1, 2, 8, 32} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) { benchBatchServerCPU(b, k) })
	}
}

func benchBatchServerCPU(b *testing.B, k int) {
	ctx := context.Background()
	s, err := Open(ctx, testURL(), &Options{Schema: newSchemaName(b), MaxConns: 1, NoGroupCommit: true,
		NotifyInCommit: true, Channel: ""})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	s.opts.Channel = "" // NotifyInCommit with no channel: no announcements on this backend
	var pid int
	if err := s.pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		b.Fatal(err)
	}
	type w1run struct {
		id, resp string
		epoch    int64
		step     int64
	}
	paths := []string{"set", "savepoint"}
	runs := map[string][]*w1run{}
	for _, path := range paths {
		for range k {
			c := storetest.CreateResponse(ctx, b, s, &storetest.ResponseOpts{
				Checkpoint: []store.Part{{Name: "header", Data: bytes.Repeat([]byte{'h'}, 350)}}})
			runs[path] = append(runs[path], &w1run{id: c.Run.ID, resp: c.Response.ID, epoch: c.Run.Lease.Epoch})
		}
		slices.SortFunc(runs[path], func(x, y *w1run) int { return strings.Compare(x.id, y.id) })
	}
	batch := func(path string) {
		order := make([]*commitReq, 0, k)
		for _, r := range runs[path] {
			r.step++
			data := bytes.Repeat([]byte{'h'}, 350)
			copy(data, fmt.Appendf(nil, "step %08d", r.step))
			p := &store.CommitParams{RunID: r.id, Epoch: r.epoch, Step: r.step, ResponseID: r.resp,
				Status: store.StatusInProgress, Checkpoint: []store.Part{{Name: "header", Data: data}}}
			order = append(order, s.newCommitReq(ctx, p, encodeEvents(nil), encodeParts(p.Checkpoint, nil, false)))
		}
		errs := map[*commitReq]error{}
		var err error
		if path == "set" {
			var declined bool
			if declined, err = s.commitSet(ctx, order, errs); declined {
				err = fmt.Errorf("set batch declined")
			}
		} else {
			err = s.write(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
				return s.commitPlain(ctx, conn.Conn(), order, errs)
			})
		}
		if err == nil {
			for _, e := range errs {
				err = e
			}
		}
		if err != nil {
			b.Fatalf("%s batch: %v", path, err)
		}
	}
	for range 10 { // warm up: plans, caches
		for _, path := range paths {
			batch(path)
		}
	}
	b.ResetTimer()
	cpu, wall := map[string]time.Duration{}, map[string]time.Duration{}
	wal := map[string]int64{}
	const rounds = 10
	n := max(b.N/k/rounds, 1)
	for range rounds {
		for _, path := range paths {
			c0, w0 := procCPU(b, pid), walPos(ctx, b, s)
			t0 := time.Now()
			for range n {
				batch(path)
			}
			wall[path] += time.Since(t0)
			cpu[path] += procCPU(b, pid) - c0
			wal[path] += walPos(ctx, b, s) - w0
		}
	}
	commits := float64(n * rounds * k)
	for _, path := range paths {
		b.ReportMetric(float64(cpu[path].Microseconds())/commits, path+"-cpu-µs/commit")
		b.ReportMetric(float64(wal[path])/commits, path+"-wal-B/commit")
		b.ReportMetric(float64(wall[path].Microseconds())/commits, path+"-wall-µs/commit")
	}
	if os.Getenv("SUPERSTEP_BENCH_VERBOSE") != "" {
		b.Logf("k=%d: %d batches per path", k, n*rounds)
	}
}

// walPos is the server's current WAL position in bytes.
func walPos(ctx context.Context, b *testing.B, s *Store) int64 {
	var lsn int64
	if err := s.pool.QueryRow(ctx, "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").Scan(&lsn); err != nil {
		b.Fatal(err)
	}
	return lsn
}
