package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/superstep/superstep/store"
)

// A blocking request's create rides with its first commit (CreateAndWait): until
// then only this host knows the response, so nothing is lost by not
// having written it (a crash loses the request, which its waiting caller
// sees fail), and the create and the first superstep cost one store write,
// one transaction and one sync instead of two. The run is marked pending
// (run.pending) meanwhile: the lease loops skip it, and a write of the run
// other than a commit writes the create first: with it, for a journal
// entry on a store that can (createWithJournal), else alone (writeCreate).

// Blocking is a blocking request's response, started by CreateBlocking.
// It does not tell the response's id: Wait returns the response once
// finished, and only then may anyone read it (see CreateAndWait).
type Blocking struct {
	h    *Host
	resp *store.Response
}

// CreateBlocking starts a blocking request as CreateAndWait does, without
// waiting for it: ctx bounds the create (its store writes, when the create
// is not deferred to the first commit), and Wait the wait. Errors: those
// of Create.
func (h *Host) CreateBlocking(ctx context.Context, p *CreateParams) (*Blocking, error) {
	q := *p
	q.blocking = true
	resp, err := h.create(ctx, &q)
	if err != nil {
		return nil, err
	}
	return &Blocking{h: h, resp: resp}, nil
}

// Wait waits until the response is finished and returns it, as WaitStarted
// does. Errors: those of Wait; ErrHostClosed when the host shut down
// before the run's first commit, which left nothing stored.
func (b *Blocking) Wait(ctx context.Context) (*store.Response, error) {
	final, err := b.h.waitStarted(ctx, b.resp)
	if err != nil && errors.Is(err, store.ErrNotFound) {
		if b.h.isDraining() {
			// Stopped by the shutdown before its first commit: nothing
			// is stored; the client is to try again, elsewhere.
			return nil, fmt.Errorf("host: response %s stopped before it was stored: %w", b.resp.ID, ErrHostClosed)
		}
		return nil, fmt.Errorf("host: response %s: %w", b.resp.ID, err)
	}
	return final, err
}

// createAndWait is CreateAndWait.
func (h *Host) createAndWait(ctx context.Context, p *CreateParams) (*store.Response, error) {
	b, err := h.CreateBlocking(ctx, p)
	if err != nil {
		return nil, err
	}
	return b.Wait(ctx)
}

// deferCreate reports whether the create of sp for p can ride with the
// run's first commit: a blocking request (CreateAndWait) starting a new run here,
// claimed by this host, with nothing else to record at create (no
// idempotency key, conversation turn, branch or fork), published at
// commits (a live append would need the response first), on a store that
// can write the two together.
func (h *Host) deferCreate(p *CreateParams, sp *startSpec, owner string) bool {
	if _, ok := h.store.(store.CreateCommitter); !ok {
		return false
	}
	return p.blocking && !p.Background && owner != "" && p.PreviousResponseID == "" && p.IdempotencyKey == "" &&
		p.turn == nil && !sp.branch && sp.fork == nil && sp.checkpoint != nil && p.publication != PublicationLive
}

// pendingResponse is the response as the store returns it from the create
// of cp at now (store.ResponseCreateResult.Response), before the create is
// written.
func pendingResponse(cp *store.ResponseCreateParams, now time.Time) *store.Response {
	resp := *cp.Response
	resp.RunID, resp.NextSeq, resp.UpdatedAt = cp.RunID, int64(len(cp.Events)), now
	if resp.CreatedAt.IsZero() {
		resp.CreatedAt = now
	}
	return &resp
}

// storeCommit writes p, r's commit: with r's pending create, in one
// transaction, while there is one (store.CreateCommitter; deferCreate
// checked the store has it), else alone. An attempt that fails is made
// again by commit as any other: nothing of a failed CreateCommit is
// written, and commitState recognises one that was after all.
func (h *Host) storeCommit(ctx context.Context, r *run, p *store.CommitParams) (*store.CommitResult, error) {
	if !r.pending.Load() {
		return h.store.Commit(ctx, p)
	}
	r.createMu.Lock()
	defer r.createMu.Unlock()
	if r.create == nil {
		return h.store.Commit(ctx, p) // written alone meanwhile (writeCreate)
	}
	cres, res, err := h.store.(store.CreateCommitter).CreateCommit(ctx, r.create, p)
	if err != nil {
		return nil, err
	}
	if err := h.created(r, cres.Run.Lease); err != nil {
		return nil, err
	}
	return res, nil
}

// writeCreate writes r's pending create on its own, before a write of r
// that is not its first commit (a journal entry); nothing when it is
// written already.
func (h *Host) writeCreate(ctx context.Context, r *run) error {
	if !r.pending.Load() {
		return nil
	}
	r.createMu.Lock()
	defer r.createMu.Unlock()
	cp := r.create
	if cp == nil {
		return nil
	}
	res, err := h.store.ResponseCreate(ctx, cp)
	if err != nil {
		h.metrics.failed(opCreate)
		return fmt.Errorf("host: create response %s: %w", cp.Response.ID, err)
	}
	return h.created(r, res.Run.Lease)
}

// createWithJournal writes r's pending create with p, the first journal
// entries of its first superstep, in one transaction (store.CreateJournaler),
// and reports whether it did (done) or failed trying: a blocking chat
// turn's create and its model call's entry cost one store write, as the
// create and the first commit do. Not done: nothing is pending, or the
// store cannot (the caller writes the create alone first). A transient
// failure (store.ErrUnavailable) is retried as a journal append's is: a
// failed CreateJournalAppend wrote nothing. (One that was written after
// all but reported failed makes the retry conflict with it: the run
// stops, and is recovered from its create once its lease expires.)
func (h *Host) createWithJournal(ctx context.Context, r *run, p *store.JournalAppendParams) (done bool, err error) {
	cj, ok := h.store.(store.CreateJournaler)
	if !ok || !r.pending.Load() {
		return false, nil
	}
	r.createMu.Lock()
	defer r.createMu.Unlock()
	cp := r.create
	if cp == nil {
		return false, nil // written meanwhile
	}
	var res *store.ResponseCreateResult
	err = retryJournalWrite(ctx, func() (err error) {
		res, err = cj.CreateJournalAppend(ctx, cp, p)
		return err
	})
	if err != nil {
		h.metrics.failed(opCreate)
		return true, fmt.Errorf("host: create response %s with its journal: %w", cp.Response.ID, err)
	}
	return true, h.created(r, res.Run.Lease)
}

// created records that r's create is written, under lease: from now on
// the lease loops renew and guard it. Called with r.createMu held. A
// claim at another epoch than r's (store.NewRunEpoch: a new run's claim in
// every store) is an error: the commits made under r.epoch would be
// fenced, so the run fails at once rather than at its next commit.
func (h *Host) created(r *run, lease store.Lease) error {
	if lease.Epoch != r.epoch {
		return fmt.Errorf("host: run %s created with its lease at epoch %d, not %d", r.id, lease.Epoch, r.epoch)
	}
	r.leaseExpires = lease.ExpiresAt
	r.create = nil
	r.pending.Store(false) // after leaseExpires: the guard reads it once it sees the run
	return nil
}
