package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/superstep/superstep/store"
)

// request is one write waiting in the write queue.
type request struct {
	op string
	// ctx carries the caller's values (fault injectors); its cancellation
	// is ignored once a leader took the request, so a write is either
	// wholly applied and reported or not taken at all.
	ctx context.Context
	// apply runs inside the batch's transaction, on the writer's
	// connection; it may run twice (see runBatch), so it sets what it
	// returns rather than adding to it. It must return every driver error
	// it gets (wrapped or not), never swallow one: SQLite may have rolled
	// the whole transaction back on it, and the writer decides from the
	// error what else of the batch may commit. (An apply that returns nil
	// after its transaction ended fails, and with it the batch.)
	apply func(ctx context.Context, tx *sql.Conn) error
	// wake lists the responses whose waiters to wake after the commit.
	wake []string
	// done receives the outcome, or errLead when the request's goroutine
	// is to lead the next batch.
	done chan error
	// taken and lead are guarded by Store.mu: a leader took the request
	// into a batch; the request was named the next leader.
	taken, lead bool
}

// errLead tells a waiting writer that it leads the next batch.
var errLead = errors.New("sqlite: lead the next batch")

// write queues apply and waits for the outcome of the transaction that
// carried it. If ctx ends before a batch took the request, nothing is
// written and ctx's error is returned.
func (s *Store) write(ctx context.Context, op string, apply func(ctx context.Context, tx *sql.Conn) error) error {
	return s.writeWake(ctx, op, nil, apply)
}

// writeWake is write that also wakes the EventWait callers of the given
// responses after the commit (the write succeeded).
//
// There is no writer goroutine: the caller that finds no batch in flight
// leads, i.e. commits the queue (itself first) in its own goroutine, so a
// lone writer pays no goroutine handoff. Writes that arrive meanwhile
// queue; when the leader's batch is committed, it names the oldest of them
// the next leader, which commits all those queued (up to MaxBatch) in one
// transaction and one fsync: group commit, with each leader committing
// one batch only.
func (s *Store) writeWake(ctx context.Context, op string, wake []string, apply func(ctx context.Context, tx *sql.Conn) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if err := s.errIfReadOnly(op); err != nil {
		return err
	}
	r := &request{op: op, ctx: context.WithoutCancel(ctx), apply: apply, wake: wake, done: make(chan error, 1)}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return fmt.Errorf("sqlite: %s: %w", op, store.ErrClosed)
	}
	s.queue = append(s.queue, r)
	lead := !s.leading
	s.leading = true
	s.mu.Unlock()
	if !lead {
		var err error
		if lead, err = s.await(ctx, r); !lead {
			return err
		}
	}
	s.lead()
	return <-r.done
}

// await waits for r's outcome or for r to be named leader (lead true). If
// ctx ends while r is still queued and not named leader, r leaves the
// queue and ctx's error is returned.
func (s *Store) await(ctx context.Context, r *request) (lead bool, err error) {
	select {
	case err := <-r.done:
		return err == errLead, err
	case <-ctx.Done():
	}
	s.mu.Lock()
	if !r.taken && !r.lead {
		s.queue = slices.DeleteFunc(s.queue, func(q *request) bool { return q == r })
		s.mu.Unlock()
		return false, fmt.Errorf("sqlite: %s: %w", r.op, ctx.Err())
	}
	s.mu.Unlock()
	err = <-r.done
	return err == errLead, err
}

// lead commits one batch from the head of the queue (which holds the
// leader's own request), then names the next leader, or, when the queue is
// empty or the store closed, ends the leadership. After Close every queued
// request fails with store.ErrClosed.
func (s *Store) lead() {
	if s.opts.BatchDelay > 0 {
		time.Sleep(s.opts.BatchDelay)
	}
	s.mu.Lock()
	if s.closed.Load() {
		s.endLead()
		s.mu.Unlock()
		return
	}
	n := min(len(s.queue), s.opts.MaxBatch)
	batch := slices.Clone(s.queue[:n])
	s.queue = slices.Delete(s.queue, 0, n)
	for _, r := range batch {
		r.taken = true
	}
	s.mu.Unlock()
	s.runBatch(batch)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 || s.closed.Load() {
		s.endLead()
		return
	}
	next := s.queue[0]
	next.lead = true
	next.done <- errLead
}

// endLead ends the leadership, failing what is still queued (only after
// Close can anything be), and wakes Close. s.mu is held.
func (s *Store) endLead() {
	for _, r := range s.queue {
		r.done <- fmt.Errorf("sqlite: %s: %w", r.op, store.ErrClosed)
	}
	s.queue = nil
	s.leading = false
	s.idle.Broadcast()
}

// runBatch applies the requests of the batch in one transaction, then
// commits it (one fsync) and reports to every request. A failing request
// fails alone: the others commit without it.
//
// The requests are first applied one after the other with no SAVEPOINT
// (two statements fewer per request, which the single writer's time is
// spent on). When one fails, the transaction rolls back and the batch is
// applied again without it, now each request in a SAVEPOINT (applyOne), so
// a request that fails then is undone alone; the requests before it
// (applied again) see the same state as the first time, so the failed
// request's error is the one it would have got in a SAVEPOINT. Apply
// functions may so run twice: they set, not accumulate, what they return.
// Under -tags faults a redone write also reaches its fault points twice,
// and an Injector (internal/fault) counts both arrivals.
//
// The first pass's failed write is left out of the redo whatever its
// error: even one that may have rolled the whole transaction back (a
// SQLITE_FULL of a big checkpoint, say) fails alone, the redo beginning
// a new transaction. In the redo, an error that may have ended the
// transaction (applyOne: anything but a constraint violation) fails the
// whole batch: nothing of it is committed.
func (s *Store) runBatch(batch []*request) {
	errs := make([]error, len(batch))
	s.stats.transactions.Add(1)
	s.stats.writes.Add(int64(len(batch)))
	if err := s.begin(); err != nil {
		s.finish(batch, errs, mapError("begin", err))
		return
	}
	failed := -1
	for i, r := range batch {
		err := r.apply(r.ctx, s.wconn)
		if err == nil && !s.inTx() {
			// The write swallowed an error that ended the transaction:
			// the next writes would run as autocommits, durable each.
			err = errTxEnded
		}
		if err != nil {
			errs[i], failed = mapError(r.op, err), i
			break
		}
	}
	if failed < 0 {
		s.finish(batch, errs, mapError("commit", s.commit()))
		return
	}
	s.rollback()
	if len(batch) == 1 {
		s.finish(batch, errs, nil)
		return
	}
	if err := s.begin(); err != nil {
		s.finish(batch, errs, mapError("begin", err))
		return
	}
	s.stats.redone.Add(1)
	for i, r := range batch {
		if i == failed {
			continue
		}
		var poisoned bool
		errs[i], poisoned = applyOne(s.wconn, r)
		if poisoned {
			s.rollback()
			s.finish(batch, errs, fmt.Errorf("batch aborted: %w", errs[i]))
			return
		}
	}
	s.finish(batch, errs, mapError("commit", s.commit()))
}

// begin starts the writer's transaction (BEGIN IMMEDIATE: the write lock
// at once, so no statement of it waits for the lock half-way).
//
// When BEGIN fails and the connection is still inside a transaction (a
// COMMIT failed and left it open, and the ROLLBACK that followed failed
// too), that transaction is rolled back and BEGIN tried once more: else
// every later BEGIN would fail ("cannot start a transaction within a
// transaction") and the store would refuse every write until reopened.
func (s *Store) begin() error {
	bg := context.Background()
	_, err := s.wconn.ExecContext(bg, "BEGIN IMMEDIATE")
	if err == nil || !s.inTx() {
		return err
	}
	if _, rerr := s.wconn.ExecContext(bg, "ROLLBACK"); rerr != nil {
		return fmt.Errorf("%w (and rollback of the transaction left open: %w)", err, rerr)
	}
	_, err = s.wconn.ExecContext(bg, "BEGIN IMMEDIATE")
	return err
}

// inTx reports whether the writer's connection is inside a transaction
// (SQLite's autocommit flag is off). It is one cgo call: Raw starts no
// goroutine. When the connection cannot be reached it reports false.
func (s *Store) inTx() bool {
	in := false
	s.wconn.Raw(func(c any) error {
		if sc, ok := c.(*sqlite3.SQLiteConn); ok {
			in = !sc.AutoCommit()
		}
		return nil
	})
	return in
}

// commit commits the writer's transaction. When COMMIT fails SQLite may
// leave the transaction open, so it is rolled back (harmless when it is
// not); if that ROLLBACK fails too, the next begin rolls the transaction
// back before it begins: the next batch begins on a clean connection.
func (s *Store) commit() error {
	_, err := s.wconn.ExecContext(context.Background(), "COMMIT")
	if err != nil {
		s.rollback()
	}
	return err
}

// rollback rolls the writer's transaction back. Its error is ignored: a
// failed statement may have ended the transaction already, and a
// transaction it failed to end is rolled back by the next begin.
func (s *Store) rollback() {
	s.wconn.ExecContext(context.Background(), "ROLLBACK")
}

// applyOne runs r inside a savepoint, rolling back to it on error. It
// reports whether the error may have ended the transaction. An apply that
// returns nil after the transaction ended needs no check of its own: the
// RELEASE of the savepoint then fails, which poisons.
func applyOne(tx *sql.Conn, r *request) (error, bool) {
	bg := context.Background()
	if _, err := tx.ExecContext(bg, "SAVEPOINT w"); err != nil {
		return mapError(r.op, err), true
	}
	err := r.apply(r.ctx, tx)
	if err != nil {
		if _, rerr := tx.ExecContext(bg, "ROLLBACK TO w"); rerr != nil {
			return mapError(r.op, fmt.Errorf("%w (and rollback to savepoint: %v)", err, rerr)), true
		}
	}
	if _, rerr := tx.ExecContext(bg, "RELEASE w"); rerr != nil {
		return mapError(r.op, errors.Join(err, rerr)), true
	}
	return mapError(r.op, err), err != nil && poisons(err)
}

// errTxEnded is the error of a write whose apply returned nil although
// the batch's transaction had ended (it swallowed the error that ended
// it).
var errTxEnded = errors.New("the write ended the batch's transaction without returning an error")

// poisons reports whether a failed request's error came from SQLite in a
// way that may have rolled back the transaction (anything but a
// constraint violation).
func poisons(err error) bool {
	var serr sqlite3.Error
	return errors.As(err, &serr) && serr.Code != sqlite3.ErrConstraint
}

// finish reports each request's outcome; a failed commit fails them all.
func (s *Store) finish(batch []*request, errs []error, commitErr error) {
	for i, r := range batch {
		err := errs[i]
		if commitErr != nil && (err == nil || errors.Is(commitErr, err)) {
			err = fmt.Errorf("sqlite: %s: %w", r.op, commitErr)
		}
		if err == nil {
			for _, id := range r.wake {
				s.notify.wake(id)
			}
		}
		r.done <- err
	}
}
