package postgres

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/superstep/superstep/store"
)

// appender group-commits EventAppend calls: a few worker goroutines each
// take the waiting calls (up to appendBatchMax) and write them in one
// transaction, so concurrent live appends share one round trip and one WAL
// flush. Each call still succeeds or fails alone.
type appender struct {
	s       *Store
	queue   chan *appendReq
	stopped chan struct{} // closed by stop
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	batches, calls atomic.Int64 // written so far, for benchmarks
}

const (
	appendWorkers  = 4
	appendBatchMax = 128
)

// appendReq is one queued EventAppend call. state moves from queued to
// taken (by a worker) or abandoned (by its caller, whose ctx ended first),
// so that an abandoned call is never written.
type appendReq struct {
	ctx   context.Context
	p     *store.EventAppendParams
	at    *time.Time // callTime(p.Now)
	state atomic.Int32
	done  chan error
}

const (
	reqQueued int32 = iota
	reqTaken
	reqAbandoned
)

func startAppender(s *Store) *appender {
	ctx, cancel := context.WithCancel(context.Background())
	a := &appender{s: s, queue: make(chan *appendReq, appendBatchMax), stopped: make(chan struct{}), cancel: cancel}
	for range appendWorkers {
		a.wg.Add(1)
		go a.run(ctx)
	}
	return a
}

// stop ends the workers; calls still queued fail with ErrClosed.
func (a *appender) stop() {
	a.cancel()
	a.wg.Wait()
	close(a.stopped)
	for {
		select {
		case r := <-a.queue:
			if r.state.CompareAndSwap(reqQueued, reqTaken) {
				r.done <- store.ErrClosed
			}
		default:
			return
		}
	}
}

// do queues one call and waits for its result.
func (a *appender) do(ctx context.Context, p *store.EventAppendParams) error {
	r := &appendReq{ctx: ctx, p: p, at: callTime(p.Now), done: make(chan error, 1)}
	select {
	case a.queue <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-a.stopped:
		return store.ErrClosed
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqQueued, reqAbandoned) {
			return ctx.Err()
		}
	case <-a.stopped:
		if r.state.CompareAndSwap(reqQueued, reqAbandoned) {
			return store.ErrClosed
		}
	}
	return <-r.done // already being written: its outcome is the answer
}

// run takes one call, then every other call waiting, and writes them.
func (a *appender) run(ctx context.Context) {
	defer a.wg.Done()
	for {
		var batch []*appendReq
		select {
		case r := <-a.queue:
			batch = a.take(batch, r)
		case <-ctx.Done():
			return
		}
	drain:
		for len(batch) < appendBatchMax {
			select {
			case r := <-a.queue:
				batch = a.take(batch, r)
			default:
				break drain
			}
		}
		if len(batch) > 0 {
			// Runs' rows are locked in run order, as commit batches and
			// lease renewals lock them, so that none waits in a cycle.
			slices.SortStableFunc(batch, func(x, y *appendReq) int { return strings.Compare(x.p.RunID, y.p.RunID) })
			a.batches.Add(1)
			a.calls.Add(int64(len(batch)))
			a.write(batch)
		}
	}
}

func (a *appender) take(batch []*appendReq, r *appendReq) []*appendReq {
	if r.state.CompareAndSwap(reqQueued, reqTaken) {
		batch = append(batch, r)
	}
	return batch
}

// appendBatchSQL calls superstep_append_batch. Each call's time, which the
// lease fence compares with the expiry, is its Now or else the database's
// clock (callTime: NULL elements of $8).
const appendBatchSQL = `SELECT o_code, o_detail FROM superstep_append_batch($1, $2, $3, $4, $5, $6, $7,
	ARRAY(SELECT coalesce(u.t, now()) FROM unnest($8::timestamptz[]) WITH ORDINALITY AS u(t, i) ORDER BY u.i), $9)`

// write appends a batch in one transaction and answers each call.
func (a *appender) write(batch []*appendReq) {
	for _, r := range batch {
		if len(r.p.Journal) > 0 {
			a.writeWithJournal(batch)
			return
		}
	}
	var codes, details []string
	// The batch is not cancelled by any one caller's ctx (see Store.write);
	// the first call's ctx carries test-only values such as fault injectors.
	err := a.s.write(batch[0].ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		var err error
		codes, details, err = a.appendBatch(ctx, conn, batch)
		return err
	})
	for i, r := range batch {
		r.done <- a.result(r, i, codes, details, err)
	}
}

// appendBatch runs appendBatchSQL for batch on q and returns each call's
// code and detail, in batch order.
func (a *appender) appendBatch(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, batch []*appendReq) (codes, details []string, err error) {
	n := len(batch)
	runs, resps := make([]string, 0, n), make([]string, 0, n)
	epochs, firsts, sizes := make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
	counts := make([]int32, 0, n)
	datas := make([][]byte, 0, n)
	nows := make([]*time.Time, 0, n)
	for _, r := range batch {
		// Each call's events are one record.
		ev := encodeEvents(r.p.Events)
		runs, epochs, resps = append(runs, r.p.RunID), append(epochs, r.p.Epoch), append(resps, r.p.ResponseID)
		firsts, counts = append(firsts, ev.first), append(counts, int32(ev.count))
		sizes, datas = append(sizes, ev.bytes), append(datas, ev.data)
		nows = append(nows, r.at)
	}
	rows, err := q.Query(ctx, appendBatchSQL, runs, epochs, resps, firsts, counts, sizes, datas, nows, a.s.txChannel())
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	codes, details = make([]string, 0, n), make([]string, 0, n)
	for rows.Next() {
		var code, detail string
		if err := rows.Scan(&code, &detail); err != nil {
			return nil, nil, err
		}
		codes, details = append(codes, code), append(details, detail)
	}
	return codes, details, rows.Err()
}

// result is call i's answer.
func (a *appender) result(r *appendReq, i int, codes, details []string, err error) error {
	op := "append events to " + r.p.ResponseID
	switch {
	case err != nil:
		return mapError(op, r.p.RunID, r.p.Epoch, err)
	case i >= len(codes):
		return fmt.Errorf("store/postgres: %s: batch returned %d results for %d calls", op, len(codes), i+1)
	}
	switch codes[i] {
	case "":
		a.s.announce(r.p.ResponseID)
		return nil
	case codeFenced:
		current, _ := strconv.ParseInt(details[i], 10, 64)
		return fmt.Errorf("store/postgres: %s: %w", op, &store.FencedError{RunID: r.p.RunID, Epoch: r.p.Epoch, CurrentEpoch: current})
	case codeNotFound:
		return fmt.Errorf("store/postgres: %s: %s: %w", op, details[i], store.ErrNotFound)
	default:
		conflict := fmt.Errorf("store/postgres: %s: %s: %w", op, details[i], store.ErrConflict)
		return a.s.explainRefusal(r.ctx, r.p.ResponseID, false, conflict)
	}
}
