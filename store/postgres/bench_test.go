package postgres

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// benchStore is a BenchHarness.New: a store in a schema of its own.
func benchStore(b *testing.B) store.Store {
	s, err := Open(context.Background(), testURL(), &Options{Schema: newSchemaName(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkLongConversation: a turn's finishing, pruning commit after 100
// and 1,000 turns in one run (storetest.BenchLongConversation).
func BenchmarkLongConversation(b *testing.B) {
	storetest.BenchLongConversation(b, storetest.BenchHarness{New: benchStore})
}

// BenchmarkResponseRead: a response with a 1 MiB request, read whole and
// without the request (storetest.BenchResponseRead).
func BenchmarkResponseRead(b *testing.B) {
	storetest.BenchResponseRead(b, storetest.BenchHarness{New: benchStore})
}

// BenchmarkStore runs storetest's shared commit benchmarks (the same as
// SQLite's): baselines measured right before each concurrency, then
// commits. Its bare transaction is an autocommit one-row INSERT on the
// same server (one round trip, one WAL flush).
func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, storetest.BenchHarness{
		New: func(b *testing.B) store.Store {
			s, err := Open(context.Background(), testURL(), &Options{Schema: newSchemaName(b), MaxConns: 66})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		},
		BareTx: func(b *testing.B, s store.Store) func(ctx context.Context) error {
			ps := s.(*Store)
			if _, err := ps.pool.Exec(context.Background(), "CREATE TABLE bench_bare (id bigserial PRIMARY KEY, v bytea)"); err != nil {
				b.Fatal(err)
			}
			return func(ctx context.Context) error {
				_, err := ps.pool.Exec(ctx, "INSERT INTO bench_bare (v) VALUES ($1)", []byte("x"))
				return err
			}
		},
		// PostgreSQL's data directory is on the same file system as /tmp.
		Dir: func(b *testing.B) string { return b.TempDir() },
	})
}

// BenchmarkCommit measures superstep commits against a bare one-row insert
// transaction on the same PostgreSQL, in the same run, at concurrency 1, 8
// and 64. Each worker drives its own run (a run's commits are sequential).
// A commit carries two events, a 1 KB unchanged and a 100 B changed
// checkpoint part and a 300 B snapshot. Metrics: commit-µs and bare-µs are
// mean latencies, commits/s and bare/s throughputs, ratio = commit-µs /
// bare-µs, ratio-p50 = the same for median latencies, commits/tx = the
// mean group-commit batch size. SUPERSTEP_BENCH_COMMIT_INFLIGHT sets
// Options.CommitBatchesInFlight; SUPERSTEP_BENCH_NO_GROUP_COMMIT turns
// group commit off.
func BenchmarkCommit(b *testing.B) {
	for _, conc := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("c=%d", conc), func(b *testing.B) { benchCommit(b, conc) })
	}
}

func benchCommit(b *testing.B, conc int) {
	b.ReportAllocs()
	ctx := context.Background()
	url := testURL()
	if os.Getenv("SUPERSTEP_BENCH_SYNC_OFF") != "" {
		// CPU cost only: neither side waits for its WAL flush.
		url = withParam(url, "synchronous_commit=off")
	}
	opts := &Options{Schema: newSchemaName(b), MaxConns: int32(conc) + 2}
	opts.NoGroupCommit = os.Getenv("SUPERSTEP_BENCH_NO_GROUP_COMMIT") != ""
	if v, err := strconv.Atoi(os.Getenv("SUPERSTEP_BENCH_COMMIT_INFLIGHT")); err == nil {
		opts.CommitBatchesInFlight = v
	}
	switch os.Getenv("SUPERSTEP_BENCH_NOTIFY") {
	case "in-commit":
		opts.NotifyInCommit = true
	case "none":
		opts.Channel = "superstep_bench_unused"
	}
	s, err := Open(ctx, url, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if opts.Channel == "superstep_bench_unused" {
		s.notify.stop() // no announcements at all: the floor
		done := make(chan struct{})
		close(done)
		s.notify = &notifier{s: s, ids: map[string]struct{}{}, kick: make(chan struct{}, 1), cancel: func() {}, done: done}
	}
	if _, err := s.pool.Exec(ctx, "CREATE TABLE bench_bare (id bigserial PRIMARY KEY, v bytea)"); err != nil {
		b.Fatal(err)
	}
	workers := make([]*benchRun, conc)
	for i := range workers {
		workers[i] = newBenchRun(ctx, b, s)
	}
	payload := bytes.Repeat([]byte{'p'}, 100)
	bare := func(w *benchRun) error {
		_, err := s.pool.Exec(ctx, "INSERT INTO bench_bare (v) VALUES ($1)", payload)
		return err
	}
	commit := func(w *benchRun) error { return w.commit(ctx, s) }
	// Warm up both paths (prepared statements, connections).
	runWorkers(b, workers, 2*conc, bare)
	runWorkers(b, workers, 2*conc, commit)
	b.ResetTimer()
	// Alternate rounds so drift in the machine hits both sides alike.
	const rounds = 20
	var bareDur, commitDur time.Duration
	var bareLat, commitLat []time.Duration
	n := max(b.N/rounds, 1)
	stats0 := s.CommitStats()
	for range rounds {
		d, lat := runWorkers(b, workers, n, bare)
		bareDur, bareLat = bareDur+d, append(bareLat, lat...)
		d, lat = runWorkers(b, workers, n, commit)
		commitDur, commitLat = commitDur+d, append(commitLat, lat...)
	}
	b.StopTimer()
	stats := s.CommitStats()
	b.ReportMetric(float64(stats.Commits-stats0.Commits)/float64(max(stats.Batches-stats0.Batches, 1)), "commits/tx")
	total := float64(n * rounds)
	cm, bm := mean(commitLat), mean(bareLat)
	b.ReportMetric(float64(cm.Microseconds()), "commit-µs")
	b.ReportMetric(float64(bm.Microseconds()), "bare-µs")
	b.ReportMetric(float64(pct(commitLat, 99).Microseconds()), "commit-p99-µs")
	b.ReportMetric(total/commitDur.Seconds(), "commits/s")
	b.ReportMetric(total/bareDur.Seconds(), "bare/s")
	b.ReportMetric(float64(cm)/float64(bm), "ratio")
	// Medians resist the load spikes of a shared machine.
	b.ReportMetric(float64(pct(commitLat, 50))/float64(pct(bareLat, 50)), "ratio-p50")
}

// benchRun is one worker's run and the state of its next commit.
type benchRun struct {
	runID, respID string
	epoch, step   int64
	seq           int64
	fixed         store.Part
}

func newBenchRun(ctx context.Context, b *testing.B, s *Store) *benchRun {
	res := storetest.CreateResponse(ctx, b, s, nil)
	return &benchRun{runID: res.Run.ID, respID: res.Response.ID, epoch: res.Run.Lease.Epoch,
		seq: res.Response.NextSeq, fixed: store.Part{Name: "fixed", Data: bytes.Repeat([]byte{'f'}, 1024)}}
}

func (w *benchRun) commit(ctx context.Context, s *Store) error {
	w.step++
	_, err := s.Commit(ctx, &store.CommitParams{
		RunID: w.runID, Epoch: w.epoch, Step: w.step, ResponseID: w.respID,
		Checkpoint: []store.Part{w.fixed, {Name: "state", Data: bytes.Repeat(fmt.Appendf(nil, "%08d", w.step), 12)}},
		Events: []store.EventInput{
			{Seq: w.seq, Type: "response.output_text.delta", Payload: fmt.Appendf(nil, `{"type":"response.output_text.delta","sequence_number":%d,"delta":"hello world"}`, w.seq)},
			{Seq: w.seq + 1, Type: "response.output_text.delta", Payload: fmt.Appendf(nil, `{"type":"response.output_text.delta","sequence_number":%d,"delta":"hello again"}`, w.seq+1)},
		},
		Status:   store.StatusInProgress,
		Snapshot: bytes.Repeat([]byte{'s'}, 300),
	})
	w.seq += 2
	return err
}

// runWorkers runs n operations spread over the workers (one goroutine each)
// and returns the wall time and each operation's latency.
func runWorkers(b *testing.B, workers []*benchRun, n int, op func(*benchRun) error) (time.Duration, []time.Duration) {
	var next atomic.Int64
	lats := make([][]time.Duration, len(workers))
	var wg sync.WaitGroup
	start := time.Now()
	for i, w := range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				t0 := time.Now()
				if err := op(w); err != nil {
					b.Error(err)
					return
				}
				lats[i] = append(lats[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	return time.Since(start), slices.Concat(lats...)
}

func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(max(len(ds), 1))
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)*p/100, len(s)-1)]
}

// BenchmarkCommitBytes commits a run holding 10 MB of unchanged parts plus
// 1 KB that changes every step, and reports per commit the checkpoint bytes
// stored (BytesWritten), the growth of the schema's relations and the WAL
// bytes generated (cluster-wide: run it on a quiet server).
func BenchmarkCommitBytes(b *testing.B) {
	b.ReportAllocs()
	s := openStore(b, newSchemaName(b), nil)
	ctx := context.Background()
	big := storetest.Parts(10, 1<<20, 'x')
	res := storetest.CreateResponse(ctx, b, s, &storetest.ResponseOpts{Checkpoint: big})
	w := &benchRun{runID: res.Run.ID, respID: res.Response.ID, epoch: res.Run.Lease.Epoch, seq: res.Response.NextSeq}
	parts := append(slices.Clone(big), store.Part{Name: "small"})
	var stored int64
	commit := func() {
		w.step++
		parts[len(parts)-1].Data = bytes.Repeat(fmt.Appendf(nil, "%08d", w.step), 128)
		cr, err := s.Commit(ctx, &store.CommitParams{RunID: w.runID, Epoch: w.epoch, Step: w.step, ResponseID: w.respID,
			Checkpoint: parts, Status: store.StatusInProgress, Snapshot: bytes.Repeat([]byte{'s'}, 300),
			Events: []store.EventInput{{Seq: w.seq, Type: "response.output_text.delta", Payload: []byte(`{"delta":"x"}`)}}})
		if err != nil {
			b.Fatal(err)
		}
		w.seq++
		stored += cr.BytesWritten
	}
	commit() // the first commit after create may warm caches
	stored = 0
	wal0, size0 := walAndSize(ctx, b, s)
	b.ResetTimer()
	for b.Loop() {
		commit()
	}
	b.StopTimer()
	wal1, size1 := walAndSize(ctx, b, s)
	n := float64(b.N)
	b.ReportMetric(float64(stored)/n, "part-B/commit")
	b.ReportMetric(float64(size1-size0)/n, "table-B/commit")
	b.ReportMetric(float64(wal1-wal0)/n, "wal-B/commit")
}

// walAndSize returns the current WAL position and the total size of the
// store's relations (with indexes and TOAST).
func walAndSize(ctx context.Context, b *testing.B, s *Store) (wal, size int64) {
	err := s.pool.QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'::pg_lsn,
		(SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
		 WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r')`).Scan(&wal, &size)
	if err != nil {
		b.Fatal(err)
	}
	return wal, size
}

// BenchmarkEventAppend measures live appends (one event per call, each
// worker on its own response) at concurrency 1, 8 and 64: appends/s and
// mean latency.
func BenchmarkEventAppend(b *testing.B) {
	for _, conc := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("c=%d", conc), func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			s, err := Open(ctx, testURL(), &Options{Schema: newSchemaName(b), MaxConns: int32(conc) + 2})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			workers := make([]*benchRun, conc)
			for i := range workers {
				workers[i] = newBenchRun(ctx, b, s)
			}
			appendOne := func(w *benchRun) error {
				err := s.EventAppend(ctx, &store.EventAppendParams{RunID: w.runID, Epoch: w.epoch, ResponseID: w.respID,
					Events: []store.EventInput{{Seq: w.seq, Type: "response.output_text.delta", Payload: []byte(`{"delta":"tok"}`)}}})
				w.seq++
				return err
			}
			runWorkers(b, workers, conc, appendOne)
			batches0, calls0 := s.appends.batches.Load(), s.appends.calls.Load()
			b.ResetTimer()
			d, lat := runWorkers(b, workers, b.N, appendOne)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/d.Seconds(), "appends/s")
			b.ReportMetric(float64(mean(lat).Microseconds()), "append-µs")
			b.ReportMetric(float64(s.appends.calls.Load()-calls0)/float64(s.appends.batches.Load()-batches0), "appends/tx")
		})
	}
}

// BenchmarkCreate measures the create of a response in a new run (the
// host's common create: one event, a small step-0 checkpoint, a lease
// claim) as one statement (superstep_create) and as the transaction of
// a statement per row (Options.createInTx), in alternating rounds on one
// store, and a commit for scale, at concurrency 1, 8 and 64. Metrics:
// one-µs, tx-µs and commit-µs are mean latencies, one-p50-µs and
// tx-p50-µs medians, ratio = tx-µs / one-µs.
func BenchmarkCreate(b *testing.B) {
	for _, conc := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("c=%d", conc), func(b *testing.B) { benchCreate(b, conc) })
	}
}

func benchCreate(b *testing.B, conc int) {
	b.ReportAllocs()
	ctx := context.Background()
	s, err := Open(ctx, testURL(), &Options{Schema: newSchemaName(b), MaxConns: int32(conc) + 2})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	workers := make([]*benchRun, conc)
	for i := range workers {
		workers[i] = newBenchRun(ctx, b, s)
	}
	request := bytes.Repeat([]byte{'r'}, 300)
	create := func(*benchRun) error {
		p := storetest.ResponseParams(nil)
		p.Response.Request = request
		p.Checkpoint = []store.Part{{Name: "header", Data: bytes.Repeat([]byte{'h'}, 350)}}
		_, err := s.ResponseCreate(ctx, p)
		return err
	}
	commit := func(w *benchRun) error { return w.commit(ctx, s) }
	for _, inTx := range []bool{false, true} { // warm up both paths
		s.opts.createInTx = inTx
		runWorkers(b, workers, 2*conc, create)
	}
	runWorkers(b, workers, 2*conc, commit)
	b.ResetTimer()
	const rounds = 20
	var oneLat, txLat, commitLat []time.Duration
	n := max(b.N/rounds, 1)
	for range rounds {
		s.opts.createInTx = false // no create in flight: runWorkers returned
		_, lat := runWorkers(b, workers, n, create)
		oneLat = append(oneLat, lat...)
		s.opts.createInTx = true
		_, lat = runWorkers(b, workers, n, create)
		txLat = append(txLat, lat...)
		_, lat = runWorkers(b, workers, n, commit)
		commitLat = append(commitLat, lat...)
	}
	b.StopTimer()
	om, tm := mean(oneLat), mean(txLat)
	b.ReportMetric(float64(om.Microseconds()), "one-µs")
	b.ReportMetric(float64(tm.Microseconds()), "tx-µs")
	b.ReportMetric(float64(mean(commitLat).Microseconds()), "commit-µs")
	b.ReportMetric(float64(pct(oneLat, 50).Microseconds()), "one-p50-µs")
	b.ReportMetric(float64(pct(txLat, 50).Microseconds()), "tx-p50-µs")
	b.ReportMetric(float64(tm)/float64(om), "ratio")
}

// BenchmarkCreateCommit measures a W3-like workflow, the create of a
// response in a new run and its one, terminal commit, with the creates
// riding the group-commit batches (ride) and each create alone
// (Options.createAlone), in alternating rounds on one store, at
// concurrency 1, 8 and 64. Metrics: ride-µs and alone-µs are mean
// workflow latencies, ride-wf/s and alone-wf/s throughputs, ride-tx/wf
// and alone-tx/wf the transactions per workflow (batches, and the
// creates made alone), ratio = alone-µs / ride-µs.
func BenchmarkCreateCommit(b *testing.B) {
	for _, conc := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("c=%d", conc), func(b *testing.B) { benchCreateCommit(b, conc) })
	}
}

func benchCreateCommit(b *testing.B, conc int) {
	b.ReportAllocs()
	ctx := context.Background()
	s, err := Open(ctx, testURL(), &Options{Schema: newSchemaName(b), MaxConns: int32(conc) + 2})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	workers := make([]*benchRun, conc)
	request := bytes.Repeat([]byte{'r'}, 300)
	flow := func(*benchRun) error {
		p := storetest.ResponseParams(nil)
		p.Response.Request = request
		p.Checkpoint = []store.Part{{Name: "header", Data: bytes.Repeat([]byte{'h'}, 350)}}
		res, err := s.ResponseCreate(ctx, p)
		if err != nil {
			return err
		}
		_, err = s.Commit(ctx, &store.CommitParams{RunID: p.RunID, Epoch: res.Run.Lease.Epoch, Step: 1,
			ResponseID: p.Response.ID, Status: store.StatusCompleted, Snapshot: bytes.Repeat([]byte{'s'}, 300),
			Checkpoint: []store.Part{p.Checkpoint[0], {Name: "out", Data: bytes.Repeat([]byte{'o'}, 2000)}},
			Events:     []store.EventInput{{Seq: 1, Type: "response.completed", Payload: bytes.Repeat([]byte{'e'}, 3000)}},
			Release:    true})
		return err
	}
	for _, alone := range []bool{false, true} { // warm up both modes
		s.opts.createAlone = alone
		runWorkers(b, workers, 2*conc, flow)
	}
	b.ResetTimer()
	const rounds = 20
	var lat [2][]time.Duration
	var dur [2]time.Duration
	var tx [2]int64
	n := max(b.N/rounds, 1)
	for i := range rounds {
		for _, mode := range []int{i % 2, 1 - i%2} { // each mode first in every other round
			alone := mode == 1
			s.opts.createAlone = alone // no create in flight: runWorkers returned
			st0 := s.CommitStats()
			d, l := runWorkers(b, workers, n, flow)
			st := s.CommitStats()
			lat[mode], dur[mode] = append(lat[mode], l...), dur[mode]+d
			tx[mode] += st.Batches - st0.Batches
			if alone {
				tx[mode] += int64(n) // each create its own transaction
			}
		}
	}
	b.StopTimer()
	total := float64(n * rounds)
	for mode, name := range []string{"ride", "alone"} {
		b.ReportMetric(float64(mean(lat[mode]).Microseconds()), name+"-µs")
		b.ReportMetric(total/dur[mode].Seconds(), name+"-wf/s")
		b.ReportMetric(float64(tx[mode])/total, name+"-tx/wf")
	}
	b.ReportMetric(float64(mean(lat[1]))/float64(mean(lat[0])), "ratio")
}
