package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/superstep/superstep/store"
)

var _ store.CreateCommitter = (*Store)(nil)

// CreateCommit writes c as ResponseCreate would and then p as Commit
// would, in one transaction (see store.CreateCommitter): BEGIN, the
// create's statement (superstep_create), the commit's (superstep_commit)
// and COMMIT are sent in one pipeline, so one round trip and one WAL
// flush where ResponseCreate and Commit are two of each. A commit with
// extras (webhooks, pending calls, a conversation append) takes a
// transaction of a round trip per statement instead (createCommitTx).
//
// Under group commit it rides a batch as one member (commitReq.fused):
// its statements (queueFused) after the batch's other commits, as creates
// go (commitSetCreates: after the set statement, with no savepoint; a
// refusal sends the batch again in savepoints, where it fails alone);
// alone, or with extras, it is a transaction of its own on the pool,
// under Options.WriteTimeout as the other writes.
// At W1 concurrency 64 the transaction of its own was measured slower than
// a separate create and commit riding batches (803/752 wf/s against
// 998/787, two pairs): each took a connection and a WAL flush of its
// own.
func (s *Store) CreateCommit(ctx context.Context, c *store.ResponseCreateParams, p *store.CommitParams) (*store.ResponseCreateResult, *store.CommitResult, error) {
	if err := store.CheckCreateCommit(c, p); err != nil {
		return nil, nil, fmt.Errorf("store/postgres: %w", err)
	}
	if _, err := s.begin(c.Now); err != nil {
		return nil, nil, err
	}
	if err := validateCreate(c); err != nil {
		return nil, nil, err
	}
	if err := validateWrite("commit", p.Status, p.Events, true); err != nil {
		return nil, nil, err
	}
	if err := p.CheckFinishing(); err != nil {
		return nil, nil, fmt.Errorf("store/postgres: commit: %w", err)
	}
	cc := newCreateCall(c, callTime(c.Now))
	q := *p
	q.Epoch = store.NewRunEpoch // superstep_create's claim (migration 019); another would fence the commit and undo all
	// The commit's parent is the create's checkpoint, written in the same
	// transaction: its blobs are referenced without a probe (trusted), as
	// Commit does after a ResponseCreate through this Store.
	var known map[hash]bool
	if cc.enc != nil {
		known = cc.enc.all
	}
	enc := encodeParts(q.Checkpoint, known, true)
	enc.referRequest(c.Response.Request, c.Response.ID)
	r := s.newCommitReq(ctx, &q, encodeEvents(q.Events), enc)
	// Nothing to reopen nor reset on a run this transaction creates: its
	// response cannot have been cancelled, nor its resumes have failed.
	r.cancelling, r.reset = false, false
	r.fused = cc
	// A batch member's statements (queueFused) have no room for extras,
	// which take round trips of their own.
	var err error
	if s.opts.GroupCommit && !hasExtras(&q) {
		err = s.commits.do(ctx, r)
	} else {
		err = s.commitAlone(r)
	}
	if err != nil {
		// Mapped (commitReq.mapError). No explainRefusal: nobody can have
		// cancelled or deleted a response before the transaction that
		// creates it commits.
		return nil, nil, err
	}
	res := cc.result() // as ResponseCreate returns it: before the commit
	s.parts.set(p.RunID, enc.all, res.Run.Lease.Epoch, p.Step)
	cres := r.res
	cres.BytesWritten += enc.inline // as Commit counts them
	if len(p.Events) > 0 || p.Status.Terminal() {
		s.announce(p.ResponseID)
	}
	return res, &cres, nil
}

// createCommitPipelined writes r, a commit with its run's create (fused),
// in one transaction on conn, in one pipeline: BEGIN, the create, the
// commit, the checkpoint prune (r.p.PruneKeep; queueFused, as in a
// batch) and COMMIT. A statement that fails makes the server
// skip the rest of the pipeline, its COMMIT included, and leaves the
// transaction aborted: it is rolled back here, nothing of it written, and
// the connection goes back to the pool idle. (pgx ends a batch with one
// Sync, so the statements would be one implicit transaction without
// BEGIN and COMMIT too; the explicit ones keep it one whatever the
// driver does, as in commitSetCreates.) r.created reports that the
// create's row was read (a failure is then the commit's).
func (s *Store) createCommitPipelined(ctx context.Context, conn *pgx.Conn, r *commitReq) (err error) {
	defer func() {
		if err != nil {
			// Ends the transaction if it is open (a no-op warning
			// otherwise); a broken connection is dropped by the pool.
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	r.queueFused(b, r.fused, s.txChannel(), func() {})
	b.Queue("COMMIT")
	return conn.SendBatch(ctx, b).Close()
}

// createCommitTx writes r, a commit with extras (commitExtras takes a
// transaction of its own round trips) with its run's create (fused), in
// one transaction: the create, then the commit's statements as a lone
// commit's (commitSteps).
func (s *Store) createCommitTx(ctx context.Context, conn *pgxpool.Conn, r *commitReq) error {
	r.created = false
	c := r.fused
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, c.sql(false), c.args...).Scan(c.dest()...); err != nil {
			return err
		}
		r.created = true
		return s.commitSteps(ctx, tx, r, false)
	})
}
