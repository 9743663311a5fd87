package postgres

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// BenchmarkStepWAL measures the WAL a W1 middle superstep writes: a run
// whose checkpoint is one part of ~350 bytes that changes every step, a
// commit without events and with the snapshot unchanged (a silent step),
// next to the bare autocommit insert of the same 350 bytes into a table
// of (bigserial key, bytea) in the same schema, at concurrency 1 and 8
// (group commit batches the eight runs' commits). The WAL counted is this
// schema's own: with SUPERSTEP_BENCH_WALINSPECT naming a database where
// the pg_walinspect extension is installed, the records between the
// round's start and end that touch the schema's relations, and the
// records (commits) of the transactions that wrote them. Metrics per
// operation: step-wal-B and bare-wal-B (full-page images included),
// step-nofpi-B and bare-nofpi-B (without them), ratio = step-nofpi-B /
// bare-nofpi-B; -v logs the step's bytes by relation.
func BenchmarkStepWAL(b *testing.B) {
	for _, conc := range []int{1, 8} {
		b.Run(fmt.Sprintf("c=%d", conc), func(b *testing.B) { benchStepWAL(b, conc) })
	}
}

func benchStepWAL(b *testing.B, conc int) {
	ctx := context.Background()
	wi := os.Getenv("SUPERSTEP_BENCH_WALINSPECT")
	if wi == "" {
		b.Fatal("set SUPERSTEP_BENCH_WALINSPECT to a database URL with the pg_walinspect extension")
	}
	winspect, err := pgx.Connect(ctx, wi)
	if err != nil {
		b.Fatal(err)
	}
	defer closeConn(winspect)
	s := openStore(b, newSchemaName(b), &Options{MaxConns: int32(conc) + 2})
	if _, err := s.pool.Exec(ctx, "CREATE TABLE bench_bare (id bigserial PRIMARY KEY, v bytea)"); err != nil {
		b.Fatal(err)
	}
	payloadBytes := 100
	if v, err := strconv.Atoi(os.Getenv("SUPERSTEP_BENCH_PAYLOAD_BYTES")); err == nil {
		payloadBytes = v
	}
	header := func(step int64) []byte {
		// A workflow checkpoint header as W1 writes it: JSON holding the
		// queue with the 100-byte payload the next executor gets
		// (SUPERSTEP_BENCH_PAYLOAD_BYTES sets another size).
		return fmt.Appendf(nil, `{"version":1,"workflow":"bench.w1","fingerprint":"0123456789abcdef0123456789abcdef","step":%d,`+
			`"status":"running","queues":[{"target":"s%d","messages":[{"source":"s%d","value":{"type":"string","json":"\"%s\""}}]}],`+
			`"fan_ins":[],"pending":[],"state":[],"executors":[]}`, step, step%10, (step+9)%10, strings.Repeat("p", payloadBytes))
	}
	type run struct {
		id, resp    string
		epoch, step int64
	}
	runs := make([]*run, conc)
	for i := range runs {
		c := storetest.CreateResponse(ctx, b, s, &storetest.ResponseOpts{Checkpoint: []store.Part{{Name: "header", Data: header(0)}}})
		runs[i] = &run{id: c.Run.ID, resp: c.Response.ID, epoch: c.Run.Lease.Epoch}
	}
	value := header(123456)
	b.Logf("part of %d bytes", len(value))
	step := func(r *run) error {
		r.step++
		_, err := s.Commit(ctx, &store.CommitParams{RunID: r.id, Epoch: r.epoch, Step: r.step, ResponseID: r.resp,
			Checkpoint: []store.Part{{Name: "header", Data: header(r.step)}}, Status: store.StatusInProgress})
		return err
	}
	bare := func(*run) error {
		_, err := s.pool.Exec(ctx, "INSERT INTO bench_bare (v) VALUES ($1)", value)
		return err
	}
	all := func(n int, op func(*run) error) {
		var wg sync.WaitGroup
		for _, r := range runs {
			wg.Go(func() {
				for range n {
					if err := op(r); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	all(2, step)
	all(2, bare)
	n := max(b.N/conc, 1)
	var stepW, bareW walCount
	b.ResetTimer()
	for round := range 2 * 5 {
		lsn0 := flushLSN(ctx, b, s)
		if round%2 == 0 {
			all(n/5+1, step)
		} else {
			all(n/5+1, bare)
		}
		w := ownWAL(ctx, b, s, winspect, lsn0, flushLSN(ctx, b, s))
		if round%2 == 0 {
			stepW.add(w)
		} else {
			bareW.add(w)
		}
	}
	b.StopTimer()
	ops := float64(5 * (n/5 + 1) * conc)
	b.ReportMetric(float64(stepW.total)/ops, "step-wal-B")
	b.ReportMetric(float64(stepW.total-stepW.fpi)/ops, "step-nofpi-B")
	b.ReportMetric(float64(bareW.total)/ops, "bare-wal-B")
	b.ReportMetric(float64(bareW.total-bareW.fpi)/ops, "bare-nofpi-B")
	b.ReportMetric(float64(stepW.total-stepW.fpi)/float64(max(bareW.total-bareW.fpi, 1)), "ratio")
	if st := s.CommitStats(); st.Batches > 0 {
		b.ReportMetric(st.MeanBatch(), "commits/tx")
	}
	b.Logf("step WAL by relation (B/op without FPI): %s", stepW.breakdown(ops))
	b.Logf("bare WAL by relation (B/op without FPI): %s", bareW.breakdown(ops))
}

// walCount sums WAL records: all bytes, full-page image bytes, and bytes
// (without images) by relation or resource manager.
type walCount struct {
	total, fpi int64
	by         map[string]int64
}

func (w *walCount) add(o walCount) {
	w.total += o.total
	w.fpi += o.fpi
	if w.by == nil {
		w.by = map[string]int64{}
	}
	for k, v := range o.by {
		w.by[k] += v
	}
}

func (w *walCount) breakdown(ops float64) string {
	keys := make([]string, 0, len(w.by))
	for k := range w.by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "%s %.0f; ", k, float64(w.by[k])/ops)
	}
	return sb.String()
}

func flushLSN(ctx context.Context, b *testing.B, s *Store) string {
	var lsn string
	if err := s.pool.QueryRow(ctx, "SELECT pg_current_wal_flush_lsn()::text").Scan(&lsn); err != nil {
		b.Fatal(err)
	}
	return lsn
}

var blockRel = regexp.MustCompile(`rel \d+/(\d+)/(\d+)`)

// ownWAL counts the WAL records between lsn0 and lsn1 that touch s's
// schema (its tables, indexes and their TOAST) and the other records of
// the transactions that wrote them (their commits).
func ownWAL(ctx context.Context, b *testing.B, s *Store, wi *pgx.Conn, lsn0, lsn1 string) walCount {
	var db string
	if err := s.pool.QueryRow(ctx, "SELECT oid::text FROM pg_database WHERE datname = current_database()").Scan(&db); err != nil {
		b.Fatal(err)
	}
	rows, err := s.pool.Query(ctx, `SELECT c.relfilenode::text, c.relname FROM pg_class c
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relfilenode <> 0
		UNION ALL SELECT t.relfilenode::text, c.relname || '.toast' FROM pg_class c JOIN pg_class t ON t.oid = c.reltoastrelid
		WHERE c.relnamespace = current_schema()::regnamespace
		UNION ALL SELECT i.relfilenode::text, c.relname || '.toast_idx' FROM pg_class c JOIN pg_index x ON x.indrelid = c.reltoastrelid
		JOIN pg_class i ON i.oid = x.indexrelid WHERE c.relnamespace = current_schema()::regnamespace`)
	if err != nil {
		b.Fatal(err)
	}
	rels := map[string]string{}
	for rows.Next() {
		var node, name string
		if err := rows.Scan(&node, &name); err != nil {
			b.Fatal(err)
		}
		rels[node] = name
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	recs, err := wi.Query(ctx, `SELECT xid::text, resource_manager, record_type, record_length, fpi_length, coalesce(block_ref, '')
		FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)`, lsn0, lsn1)
	if err != nil {
		b.Fatal(err)
	}
	type rec struct {
		xid, kind     string
		length, fpi   int64
		rel           string
		touches, mine bool
	}
	var all []rec
	xids := map[string]bool{}
	for recs.Next() {
		var r rec
		var rm, typ, blocks string
		var length, fpi int32
		if err := recs.Scan(&r.xid, &rm, &typ, &length, &fpi, &blocks); err != nil {
			b.Fatal(err)
		}
		r.length, r.fpi, r.kind = int64(length), int64(fpi), rm+"/"+typ
		for _, m := range blockRel.FindAllStringSubmatch(blocks, -1) {
			if name, ok := rels[m[2]]; ok && m[1] == db {
				r.touches = true
				if r.rel == "" {
					r.rel = name
				}
			}
		}
		if r.touches && r.xid != "0" {
			xids[r.xid] = true
		}
		all = append(all, r)
	}
	if err := recs.Err(); err != nil {
		b.Fatal(err)
	}
	w := walCount{by: map[string]int64{}}
	for _, r := range all {
		if !r.touches && (r.xid == "0" || !xids[r.xid]) {
			continue
		}
		w.total += r.length
		w.fpi += r.fpi
		key := r.kind
		if r.rel != "" {
			key = r.rel + ":" + r.kind
		}
		w.by[key] += r.length - r.fpi
	}
	return w
}

// BenchmarkWorkflowWAL measures the WAL of whole W1-shaped workflows, one
// at a time, counted as BenchmarkStepWAL counts (SUPERSTEP_BENCH_WALINSPECT):
// a create (the response, its run and a step-0 checkpoint of one ~365-byte
// part), step 1 with the response.in_progress event and a snapshot, steps
// 2 to 9 silent, step 10 finishing the response (three events, its
// snapshot, the lease released, checkpoints pruned to the host's default
// two). Metrics: wf-wal-B and step-wal-B (per workflow and per step,
// full-page images excluded); -v logs the bytes by relation.
func BenchmarkWorkflowWAL(b *testing.B) {
	ctx := context.Background()
	wi := os.Getenv("SUPERSTEP_BENCH_WALINSPECT")
	if wi == "" {
		b.Fatal("set SUPERSTEP_BENCH_WALINSPECT to a database URL with the pg_walinspect extension")
	}
	winspect, err := pgx.Connect(ctx, wi)
	if err != nil {
		b.Fatal(err)
	}
	defer closeConn(winspect)
	s := openStore(b, newSchemaName(b), nil)
	header := func(step int64) []byte {
		return fmt.Appendf(nil, `{"version":1,"workflow":"bench.w1","fingerprint":"0123456789abcdef0123456789abcdef","step":%d,`+
			`"status":"running","queues":[{"target":"s%d","messages":[{"source":"s%d","value":{"type":"string","json":"\"%s\""}}]}],`+
			`"fan_ins":[],"pending":[],"state":[],"executors":[]}`, step, step%10, (step+9)%10, strings.Repeat("p", 100))
	}
	snapshot := func(status string) []byte {
		return fmt.Appendf(nil, `{"id":"resp","object":"response","status":%q,"model":"bench.w1","output":[],%s}`, status,
			strings.Repeat(`"pad":"x",`, 100)+`"end":1`)
	}
	workflow := func() {
		c := storetest.CreateResponse(ctx, b, s, &storetest.ResponseOpts{Checkpoint: []store.Part{{Name: "header", Data: header(0)}}})
		seq := c.Response.NextSeq
		for step := int64(1); step <= 10; step++ {
			p := &store.CommitParams{RunID: c.Run.ID, Epoch: c.Run.Lease.Epoch, Step: step, ResponseID: c.Response.ID,
				Checkpoint: []store.Part{{Name: "header", Data: header(step)}}, Status: store.StatusInProgress}
			n := 0
			switch step {
			case 1:
				n, p.Snapshot = 1, snapshot("in_progress")
			case 10:
				n, p.Snapshot, p.Status, p.Release, p.PruneKeep = 3, snapshot("completed"), store.StatusCompleted, true, 2
			}
			for i := range n {
				p.Events = append(p.Events, store.EventInput{Seq: seq + int64(i), Type: "response.output_item.added",
					Payload: fmt.Appendf(nil, `{"type":"response.output_item.added","sequence_number":%d,"item":{"type":"message","text":"%s"}}`,
						seq+int64(i), strings.Repeat("o", 100))})
			}
			seq += int64(n)
			if _, err := s.Commit(ctx, p); err != nil {
				b.Fatal(err)
			}
		}
	}
	workflow()
	lsn0 := flushLSN(ctx, b, s)
	b.ResetTimer()
	for range b.N {
		workflow()
	}
	b.StopTimer()
	w := ownWAL(ctx, b, s, winspect, lsn0, flushLSN(ctx, b, s))
	n := float64(b.N)
	b.ReportMetric(float64(w.total-w.fpi)/n, "wf-wal-B")
	b.ReportMetric(float64(w.total-w.fpi)/n/10, "step-wal-B")
	b.ReportMetric(float64(w.fpi)/n, "wf-fpi-B")
	b.Logf("workflow WAL by relation (B/workflow without FPI): %s", w.breakdown(n))
}
