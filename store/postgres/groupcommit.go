package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/internal/snapref"
)

// Group commit. Commits of different runs made at once through one Store
// go to the database together: one transaction, so one WAL flush, for the
// whole batch, each commit in a SAVEPOINT of its own so that one that is
// fenced, conflicting or invalid is undone alone and fails with the error
// it would get alone.
//
// There is no committer goroutine (as in store/sqlite): the caller that
// finds no batch in flight leads, committing what is queued in its own
// goroutine, so a lone commit pays no handoff and no wait, and takes the
// path of one round trip in autocommit. Up to
// Options.CommitBatchesInFlight batches are in flight at once (on as many
// connections); commits arriving while that many are queue. When a batch
// is done, its leader names the oldest queued commit the next leader,
// which takes what is queued (up to Options.CommitBatchMax commits and
// CommitBatchBytes bytes), so batches grow with the load and never wait
// to fill.
//
// A new run's create (ResponseCreate, createCall) queues as a commit
// does and rides the batches with the commits, as one more member, after
// the commits (commitBatch): with commits superstep_commit_batch can
// write, the batch is BEGIN, that statement, the creates' statements and
// COMMIT in one round trip (commitSetCreates); otherwise each create is a
// member in a savepoint, after the commits'.

// commitReq is one Commit call waiting in the queue.
type commitReq struct {
	// ctx is the caller's; only a batch of this request alone, run by its
	// own goroutine, is bounded by its cancellation (while waiting for a
	// connection, as before group commit).
	ctx    context.Context
	p      *store.CommitParams // nil for a create
	create *createCall         // a new run's create (ResponseCreate) riding the batch, else nil
	// fused is the create of this commit's run, written right before it
	// in its savepoint (CreateCommit), else nil; created reports that
	// its row was read (a failure after it is the commit's).
	fused      *createCall
	created    bool
	ev         *encodedEvents
	enc        *encodedParts
	snap       []byte // p.Snapshot as stored (snapref.Encode), made once for every send
	failAt     string // fault point to raise at (tests), see commitFault
	injected   error
	cancelling bool // the cancelled commit: reopenCancelled first
	reset      bool // the run's failed resumes are reset with the commit
	size       int  // bytes sent, for CommitBatchBytes

	res  store.CommitResult
	done chan error // the outcome, or errLead: lead the next batch
	// taken and lead are guarded by committer.mu.
	taken, lead bool
}

// errLead tells a waiting commit that it leads the next batch.
var errLead = errors.New("store/postgres: lead the next commit batch")

// committer is the queue of a Store's commits.
type committer struct {
	s       *Store
	mu      sync.Mutex
	queue   []*commitReq
	leaders int // batches in flight (at most Options.CommitBatchesInFlight)

	commits, batches atomic.Int64
	creates          atomic.Int64 // creates taken into a batch
	sizes            [len(batchSizeBounds) + 1]atomic.Int64
	sets             atomic.Int64 // batches whose commits superstep_commit_batch wrote
	declined         atomic.Int64 // batches superstep_commit_batch refused, written again in savepoints
	createSets       atomic.Int64 // batches of creates only written without savepoints
	createDeclined   atomic.Int64 // batches without savepoints a create refused, written again in savepoints
}

// batchSizeBounds are the upper bounds of CommitStats.Sizes' buckets.
var batchSizeBounds = [...]int{1, 2, 4, 8, 16, 32, 64, 128}

// CommitStats counts this Store's group commits (Options.GroupCommit; zero
// without it) and the transactions that carried them (one per batch), for
// benchmarks and tests. A batch's members are commits and new runs'
// creates (ResponseCreate of a new run, which rides the batches).
type CommitStats struct {
	Commits int64 // commits taken into a batch (of one or more members)
	// Creates counts the creates of new runs taken into a batch (of one
	// or more members): a create made while a batch is in flight goes in
	// the next, with the commits.
	Creates int64
	// Batches counts the batches written (transactions), batches of one
	// member (a lone commit or create) included.
	Batches int64
	// Sizes[i] counts batches of at most SizeBounds[i] members (commits
	// and creates; and more than the bound before); the last element
	// counts larger ones.
	Sizes      []int64
	SizeBounds []int
	// SetBatches counts the batches of several members whose commits one
	// superstep_commit_batch statement wrote, without savepoints (the
	// batch's creates, if any, each a statement in the same transaction).
	SetBatches int64
	// SetDeclined counts the batches that statement refused (a commit that
	// must fail alone by an exception), each then written again member by
	// member in savepoints: the set statement's work done twice. It stays
	// near zero; a count that follows SetBatches means the statement fails.
	SetDeclined int64
	// CreateBatches counts the batches of several creates and no commit,
	// written without savepoints (a statement per create).
	CreateBatches int64
	// CreateDeclined counts the batches without savepoints (with or
	// without a set statement) undone because one of their creates failed
	// (a run or response that exists), each then written again in
	// savepoints so that the create fails alone.
	CreateDeclined int64
}

// MeanBatch is the mean number of members (commits and creates) per
// batch (0 with none).
func (c CommitStats) MeanBatch() float64 {
	if c.Batches == 0 {
		return 0
	}
	return float64(c.Commits+c.Creates) / float64(c.Batches)
}

// CommitStats returns the commit counters since Open.
func (s *Store) CommitStats() CommitStats {
	c := s.commits
	st := CommitStats{Commits: c.commits.Load(), Creates: c.creates.Load(), Batches: c.batches.Load(), SizeBounds: batchSizeBounds[:],
		SetBatches: c.sets.Load(), SetDeclined: c.declined.Load(),
		CreateBatches: c.createSets.Load(), CreateDeclined: c.createDeclined.Load()}
	for i := range c.sizes {
		st.Sizes = append(st.Sizes, c.sizes[i].Load())
	}
	return st
}

func (c *committer) count(batch []*commitReq) {
	n := len(batch)
	commits, creates := 0, 0
	for _, r := range batch {
		if r.p != nil {
			commits++
		}
		if r.creates() {
			creates++
		}
	}
	c.commits.Add(int64(commits))
	c.creates.Add(int64(creates))
	c.batches.Add(1)
	i, _ := slices.BinarySearch(batchSizeBounds[:], n)
	c.sizes[i].Add(1)
}

// newCommitReq prepares one attempt of p.
func (s *Store) newCommitReq(ctx context.Context, p *store.CommitParams, ev *encodedEvents, enc *encodedParts) *commitReq {
	r := &commitReq{ctx: ctx, p: p, ev: ev, enc: enc, done: make(chan error, 1),
		cancelling: p.Status == store.StatusCancelled}
	r.snap = snapref.Encode(p.Snapshot, p.Events)
	r.failAt, r.injected = commitFault(ctx)
	_, r.reset = s.resumeFailed.Load(p.RunID)
	r.size = len(p.Snapshot) + len(p.Error) + len(p.Usage)
	r.size += len(ev.data)
	for _, b := range enc.blobData {
		r.size += len(b)
	}
	return r
}

// newCreateReq prepares a new run's create for the queue.
func (s *Store) newCreateReq(ctx context.Context, c *createCall) *commitReq {
	return &commitReq{ctx: ctx, create: c, done: make(chan error, 1), size: c.size()}
}

// what names r in errors.
func (r *commitReq) what() string {
	if r.create != nil {
		return "create response " + r.create.p.Response.ID
	}
	return fmt.Sprintf("commit run %s step %d", r.p.RunID, r.p.Step)
}

// runID is r's run.
func (r *commitReq) runID() string {
	if r.create != nil {
		return r.create.p.RunID
	}
	return r.p.RunID
}

// do queues r and returns its outcome once the transaction that carried
// it ended. If ctx ends while r is still queued, r leaves the queue
// unwritten and ctx's error is returned.
func (c *committer) do(ctx context.Context, r *commitReq) error {
	c.mu.Lock()
	if c.s.closed.Load() {
		c.mu.Unlock()
		return store.ErrClosed
	}
	c.queue = append(c.queue, r)
	lead := c.leaders < c.s.opts.CommitBatchesInFlight
	if lead {
		c.leaders++
		r.lead = true
	}
	c.mu.Unlock()
	if !lead {
		var err error
		if lead, err = c.await(ctx, r); !lead {
			return err
		}
	}
	c.lead(r)
	return <-r.done
}

// await waits for r's outcome or for r to be named leader.
func (c *committer) await(ctx context.Context, r *commitReq) (lead bool, err error) {
	select {
	case err := <-r.done:
		return err == errLead, err
	case <-ctx.Done():
	}
	c.mu.Lock()
	if !r.taken && !r.lead {
		c.queue = slices.DeleteFunc(c.queue, func(q *commitReq) bool { return q == r })
		c.mu.Unlock()
		return false, fmt.Errorf("store/postgres: %s: %w", r.what(), ctx.Err())
	}
	c.mu.Unlock()
	err = <-r.done
	return err == errLead, err
}

// lead writes one batch, the leader's own commit r first and then the
// queued commits not named leaders of their own, oldest first, up to the
// limits; then it names the oldest commit still queued (and not named)
// the next leader, or ends its leadership. After Close, r and what is
// queued fail with store.ErrClosed.
func (c *committer) lead(r *commitReq) {
	c.mu.Lock()
	if c.s.closed.Load() {
		r.taken = true
		c.closeQueue()
		c.mu.Unlock()
		r.done <- fmt.Errorf("store/postgres: %s: %w", r.what(), store.ErrClosed)
		return
	}
	batch, size := []*commitReq{r}, r.size
	r.taken = true
	for _, q := range c.queue {
		if len(batch) >= c.s.opts.CommitBatchMax || size+q.size > c.s.opts.CommitBatchBytes {
			break
		}
		if !q.lead && !q.taken {
			batch, size = append(batch, q), size+q.size
			q.taken = true
		}
	}
	c.queue = slices.DeleteFunc(c.queue, func(q *commitReq) bool { return q.taken })
	c.mu.Unlock()
	c.count(batch)
	if len(batch) == 1 {
		r.done <- c.s.commitAlone(r)
	} else {
		c.s.commitBatch(batch)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.s.closed.Load() {
		c.closeQueue()
		return
	}
	for _, q := range c.queue {
		if !q.lead {
			q.lead = true
			q.done <- errLead
			return
		}
	}
	c.leaders--
}

// closeQueue ends a leadership after Close: the queued commits not named
// leaders fail with store.ErrClosed (named ones fail themselves). c.mu is
// held.
func (c *committer) closeQueue() {
	for _, q := range c.queue {
		if !q.lead {
			q.taken = true
			q.done <- fmt.Errorf("store/postgres: %s: %w", q.what(), store.ErrClosed)
		}
	}
	c.queue = slices.DeleteFunc(c.queue, func(q *commitReq) bool { return q.taken })
	c.leaders--
}

// commitAlone writes a batch of one commit as before group commit: one
// round trip in autocommit, or a transaction when the commit also reopens
// a cancelled response, resets failed resumes or prunes checkpoints. A
// commit with its run's create (fused) is one transaction: one pipeline,
// or round trips when it has extras (createCommitTx).
func (s *Store) commitAlone(r *commitReq) error {
	if c := r.create; c != nil {
		return r.mapError(s.writeCreate(r.ctx, c))
	}
	if r.fused != nil {
		err := s.write(r.ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
			if hasExtras(r.p) {
				return s.createCommitTx(ctx, conn, r)
			}
			return s.createCommitPipelined(ctx, conn.Conn(), r)
		})
		if err != nil {
			return r.mapError(err) // the create's failure, or the commit's (r.created)
		}
		return r.committed(s)
	}
	var err error
	declined := true
	if r.complex() && r.setEligible() {
		// A commit that also prunes checkpoints (the one that finishes a
		// response, for one) is one statement as a batch of one, instead
		// of a transaction of five round trips.
		errs := map[*commitReq]error{}
		if declined, err = s.commitSet(r.ctx, []*commitReq{r}, errs); !declined && err == nil {
			err = errs[r]
		}
	}
	switch {
	case !declined:
	case r.complex():
		// One transaction, so one WAL flush: the commit, then the prune.
		err = s.writeTx(r.ctx, func(ctx context.Context, tx pgx.Tx) error {
			return s.commitSteps(ctx, tx, r, false)
		})
	default:
		err = s.write(r.ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
			return r.commitRow(ctx, conn, false, s.txChannel())
		})
	}
	if err != nil {
		return r.mapError(err)
	}
	return r.committed(s)
}

// complex reports whether the commit takes more than its one statement
// (r.sql: the commit function, and the journal prune folded in).
func (r *commitReq) complex() bool {
	return r.create == nil && r.fused == nil && (r.cancelling || r.reset || r.p.PruneKeep > 0 || hasExtras(r.p))
}

// creates reports whether r writes a new run: a create, or a commit with
// its run's create (fused). A batch writes them after its other commits.
func (r *commitReq) creates() bool { return r.create != nil || r.fused != nil }

// sql is r's commit statement, alone or as a member of a batch (inBatch).
func (r *commitReq) sql(inBatch bool) string {
	if inBatch {
		return batchCommitSQL
	}
	return commitSQL
}

// commitRow runs r's commit statement (r.sql), which also prunes the
// journal with CommitParams.JournalPrune: no transaction around it, no
// extra round trip, and a prune commit stays pipelined in a batch.
func (r *commitReq) commitRow(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, inBatch bool, channel string) error {
	return q.QueryRow(ctx, r.sql(inBatch), r.args(channel)...).Scan(&r.res.NextSeq, &r.res.BytesWritten)
}

// args are the commit function's parameters.
func (r *commitReq) args(channel string) []any {
	p, ev, enc := r.p, r.ev, r.enc
	return []any{p.RunID, p.Epoch, p.Step, p.ResponseID,
		ev.first, ev.count, ev.bytes, ev.data,
		enc.manifest, enc.partHashes, enc.blobHashes, enc.blobData, enc.refHashes, enc.size,
		string(p.Status), r.snap, p.Error, p.Usage, callTime(p.Now), p.Status.Terminal(), channel, r.failAt,
		p.Release && p.Status.Terminal(), p.JournalPrune}
}

// commitSteps runs a complex commit's statements in tx: reopen the
// cancelled response, commit (and prune the journal), reset failed
// resumes, prune checkpoints.
func (s *Store) commitSteps(ctx context.Context, tx pgx.Tx, r *commitReq, inBatch bool) error {
	p := r.p
	if r.cancelling {
		if err := reopenCancelled(ctx, tx, p.RunID, p.ResponseID); err != nil {
			return err
		}
	}
	if err := r.commitRow(ctx, tx, inBatch, s.txChannel()); err != nil {
		return err
	}
	if err := commitExtras(ctx, tx, p); err != nil {
		return err
	}
	if r.reset {
		// A commit shows the run can be resumed: its failed attempts
		// are forgotten.
		if _, err := tx.Exec(ctx, `UPDATE runs SET resume_failures = 0, resume_error = '',
			resume_not_before = 'epoch' WHERE id = $1`, p.RunID); err != nil {
			return err
		}
	}
	if p.PruneKeep <= 0 {
		return nil
	}
	// The commit above locked the run's row and made p.Step its last
	// step: no second read of it.
	n, err := pruneAtTx(ctx, tx, p.RunID, p.PruneKeep, p.Step)
	r.res.Pruned = int(n)
	return err
}

// queue queues r's statement, as a member of a batch, in b; done is
// called once its row was read.
func (r *commitReq) queue(b *pgx.Batch, channel string, done func()) {
	if c := r.create; c != nil {
		b.Queue(c.sql(true), c.args...).QueryRow(func(row pgx.Row) error {
			if err := row.Scan(c.dest()...); err != nil {
				return err
			}
			done()
			return nil
		})
		return
	}
	if c := r.fused; c != nil {
		r.queueFused(b, c, channel, done)
		return
	}
	b.Queue(r.sql(true), r.args(channel)...).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&r.res.NextSeq, &r.res.BytesWritten); err != nil {
			return err
		}
		done()
		return nil
	})
}

// queueFused queues the statements of a commit with its run's create
// (CreateCommit), as a member of a batch: the create, the commit, and the
// checkpoint prune it asks for (after the commit, which made p.Step the
// run's last step, as in commitSteps); done is called once the last row
// was read.
func (r *commitReq) queueFused(b *pgx.Batch, c *createCall, channel string, done func()) {
	r.created = false
	b.Queue(c.sql(true), c.args...).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(c.dest()...); err != nil {
			return err
		}
		r.created = true
		return nil
	})
	p := r.p
	b.Queue(r.sql(true), r.args(channel)...).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&r.res.NextSeq, &r.res.BytesWritten); err != nil {
			return err
		}
		if p.PruneKeep <= 0 {
			done()
		}
		return nil
	})
	if p.PruneKeep > 0 {
		b.Queue(pruneAtSQL, p.RunID, p.PruneKeep, p.Step).QueryRow(func(row pgx.Row) error {
			var n int64
			if err := row.Scan(&n); err != nil {
				return err
			}
			r.res.Pruned = int(n)
			done()
			return nil
		})
	}
}

// mapError is the error of r's failed commit (or create).
func (r *commitReq) mapError(err error) error {
	if r.create != nil {
		return mapError(r.what(), r.create.p.RunID, 0, err)
	}
	if r.fused != nil && !r.created {
		return mapError("create response "+r.fused.p.Response.ID, r.fused.p.RunID, 0, err)
	}
	p := r.p
	if r.injected != nil && isInjected(err) {
		return fmt.Errorf("store/postgres: commit run %s step %d: %w", p.RunID, p.Step, r.injected)
	}
	return mapError(fmt.Sprintf("commit run %s step %d", p.RunID, p.Step), p.RunID, p.Epoch, err)
}

// committed finishes r's commit, written: it forgets failed resumes it
// reset. A fault armed (tests) but not raised is an error.
func (r *commitReq) committed(s *Store) error {
	if r.reset {
		s.resumeFailed.Delete(r.p.RunID)
	}
	if r.injected != nil {
		return fmt.Errorf("store/postgres: commit run %s step %d: fault %s armed but not raised: %w", r.p.RunID, r.p.Step, r.failAt, r.injected)
	}
	return nil
}

// batchCommitSQL is commitSQL for a member of a batch: without a Now of
// its own, a member is judged (and its times recorded) at its own
// statement's time, as it would be alone, not at the batch's start.
var batchCommitSQL = strings.Replace(commitSQL, "now())", "statement_timestamp())", 1)

// commitBatch writes several commits in one transaction, each in a
// savepoint, and answers each once the transaction ended. A commit that
// fails is rolled back to its savepoint and fails alone; a failure of the
// transaction itself (the connection lost, the COMMIT failed) fails every
// commit of the batch with the mapped error (store.ErrUnavailable when
// transient), none of them written. A COMMIT that was sent and whose
// answer was lost is reported so too, as a lone commit's single
// statement is: the caller (the host) recognises an applied commit when
// it tries again.
func (s *Store) commitBatch(batch []*commitReq) {
	// The order of a batch: its commits in run order, then its creates
	// (in run order too). The commits lock existing run rows, in run
	// order, so two batches' commits never wait on each other in a cycle.
	// The creates only insert new keys, after every lock the commits
	// took: a commit never waits for them (a run that is not committed is
	// not found), and they wait only for the same key inserted by another
	// transaction, a conflict in which one of the two creates fails
	// anyway (two batches creating the same keys crosswise would end in
	// PostgreSQL's deadlock error, failing one batch). And a create runs
	// after the commits' waits: its times (its lease's expiry among them)
	// are its statement's, right before the COMMIT that makes its run
	// visible, not before a wait that may outlast its lease.
	order := slices.Clone(batch)
	slices.SortFunc(order, func(a, b *commitReq) int {
		return cmp.Or(cmp.Compare(btoi(a.creates()), btoi(b.creates())), strings.Compare(a.runID(), b.runID()))
	})
	k := slices.IndexFunc(order, (*commitReq).creates)
	if k < 0 {
		k = len(order)
	}
	commits, creates := order[:k:k], order[k:]
	errs := make(map[*commitReq]error, len(batch))
	// No caller's cancellation ends a batch of several: the connection is
	// awaited and the batch run under Options.WriteTimeout.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(batch[0].ctx), s.opts.WriteTimeout)
	defer cancel()
	declined, err := true, error(nil)
	if len(creates) > 0 && setBatch(commits) {
		// One statement for the commits, then the creates, in one
		// transaction; declined when one member must fail alone by an
		// exception.
		var byCreate bool
		switch declined, byCreate, err = s.commitSetCreates(ctx, creates, commits, errs); {
		case declined && byCreate:
			s.commits.createDeclined.Add(1)
		case declined:
			s.commits.declined.Add(1)
		case err != nil:
		case len(commits) > 0:
			s.commits.sets.Add(1)
		default:
			s.commits.createSets.Add(1)
		}
	} else if setBatch(order) {
		// One statement for all (commitset.go); declined when one member
		// needs the savepoint path to fail alone.
		switch declined, err = s.commitSet(ctx, order, errs); {
		case declined:
			s.commits.declined.Add(1)
		case err == nil:
			s.commits.sets.Add(1)
		}
	}
	switch {
	case !declined:
	case !slices.ContainsFunc(order, (*commitReq).complex):
		err = s.write(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
			return s.commitPlain(ctx, conn.Conn(), order, errs)
		})
	default:
		err = s.commitMixed(ctx, order, errs)
	}
	for _, r := range batch {
		switch {
		case err != nil && r.create != nil, err != nil && r.fused != nil && !r.created:
			r.done <- mapError(fmt.Sprintf("%s (in a batch of %d)", r.what(), len(batch)), r.runID(), 0, err)
		case err != nil:
			r.done <- mapError(fmt.Sprintf("%s (in a batch of %d)", r.what(), len(batch)), r.p.RunID, r.p.Epoch, err)
		case errs[r] != nil:
			r.done <- r.mapError(errs[r])
		default:
			r.done <- r.committed(s)
		}
	}
}

// btoi is 1 for true, 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// commitPlain writes a batch of plain commits (none complex) and
// creates, in the batch's order (commitBatch), in one transaction whose
// BEGIN and COMMIT are pipelined with the members: one round trip when
// none fails. A member that fails is rolled
// back to its savepoint, and the members after it are sent again (with
// the COMMIT) in the same transaction. It records each member's own
// failure in errs and returns a failure of the transaction.
func (s *Store) commitPlain(ctx context.Context, conn *pgx.Conn, order []*commitReq, errs map[*commitReq]error) (err error) {
	defer func() {
		if err != nil {
			// Ends the transaction if it is open (a no-op warning
			// otherwise); a broken connection is dropped by the pool.
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	for i := 0; i < len(order); {
		k, own, err := s.commitPipelined(ctx, conn, order[i:], i > 0, i == 0, true)
		if err != nil {
			return err
		}
		if own != nil {
			errs[order[i+k]] = own
		}
		i += k + 1
		if own != nil && i == len(order) {
			// The last member failed: its COMMIT was skipped.
			if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
				return err
			}
		}
	}
	return nil
}

// commitMixed writes a batch that holds complex commits in one
// transaction: runs of plain commits pipelined, each complex one with
// round trips of its own.
func (s *Store) commitMixed(ctx context.Context, order []*commitReq, errs map[*commitReq]error) error {
	return s.write(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx)) // after a failure; a no-op after the commit
		for i := 0; i < len(order); {
			if order[i].complex() {
				own, err := s.commitMember(ctx, tx, order[i], i > 0)
				if err != nil {
					return err
				}
				errs[order[i]] = own
				i++
				continue
			}
			n := 1
			for i+n < len(order) && !order[i+n].complex() {
				n++
			}
			k, own, err := s.commitPipelined(ctx, tx, order[i:i+n], i > 0, false, false)
			if err != nil {
				return err
			}
			if own != nil {
				errs[order[i+k]] = own
			}
			i += k + 1
		}
		return tx.Commit(ctx)
	})
}

// commitPipelined writes the plain commits rs in tx, each in the
// savepoint m (releasing the previous one first, when release), in one
// round trip, preceded by BEGIN when begin and followed by COMMIT when
// commit. The server skips what follows a failed statement up to the
// pipeline's end: it returns the index k of the failing commit and its
// own failure, rolled back to its savepoint (the commits before it are
// written, those after it are to be sent again), or len(rs)-1 and nil
// when all were written (and committed, with commit); err reports a
// failure of the transaction (of its BEGIN or COMMIT too).
func (s *Store) commitPipelined(ctx context.Context, tx interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, rs []*commitReq, release, begin, commit bool) (k int, own, err error) {
	saved := make([]bool, len(rs))
	done := make([]bool, len(rs))
	b := &pgx.Batch{}
	begun := !begin
	if begin {
		b.Queue("BEGIN").Exec(func(pgconn.CommandTag) error { begun = true; return nil })
	}
	for i, r := range rs {
		if release || i > 0 {
			b.Queue("RELEASE SAVEPOINT m")
		}
		b.Queue("SAVEPOINT m").Exec(func(pgconn.CommandTag) error { saved[i] = true; return nil })
		r.queue(b, s.txChannel(), func() { done[i] = true })
	}
	if commit {
		b.Queue("COMMIT")
	}
	own = tx.SendBatch(ctx, b).Close()
	k = slices.Index(done, false)
	if k < 0 {
		return len(rs) - 1, nil, own // own is nil unless the end of the pipeline (or its COMMIT) failed
	}
	if !begun || !saved[k] {
		if own == nil {
			own = errors.New("store/postgres: savepoint not acknowledged")
		}
		return 0, nil, own
	}
	if own == nil {
		own = errors.New("store/postgres: commit not acknowledged")
	}
	var pgErr *pgconn.PgError
	if !errors.As(own, &pgErr) {
		return 0, nil, own // not the server's answer: the connection is not to be trusted
	}
	if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT m"); err != nil {
		return 0, nil, fmt.Errorf("%w (after a member's failure: %v)", err, own)
	}
	rs[k].res = store.CommitResult{}
	return k, own, nil
}

// commitMember writes r in tx inside the savepoint m (releasing the
// previous member's first when release). It returns r's own failure
// (rolled back to the savepoint, the transaction usable) as own, or a
// failure of the transaction as err.
func (s *Store) commitMember(ctx context.Context, tx pgx.Tx, r *commitReq, release bool) (own, err error) {
	// The savepoint (and release) and a plain commit go in one round
	// trip.
	b := &pgx.Batch{}
	if release {
		b.Queue("RELEASE SAVEPOINT m")
	}
	saved := false
	b.Queue("SAVEPOINT m").Exec(func(pgconn.CommandTag) error { saved = true; return nil })
	if !r.complex() {
		r.queue(b, s.txChannel(), func() {})
	}
	own = tx.SendBatch(ctx, b).Close()
	if !saved {
		if own == nil {
			own = errors.New("store/postgres: savepoint not acknowledged")
		}
		return nil, own
	}
	if own == nil && r.complex() {
		own = s.commitSteps(ctx, tx, r, true)
	}
	if own == nil {
		return nil, nil
	}
	var pgErr *pgconn.PgError
	if !errors.As(own, &pgErr) {
		return nil, own // not the server's answer: the connection is not to be trusted
	}
	if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT m"); err != nil {
		return nil, fmt.Errorf("%w (after a member's failure: %v)", err, own)
	}
	r.res = store.CommitResult{}
	return own, nil
}
