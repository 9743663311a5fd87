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
// other than a commit (a journal entry) writes the create alone first
// (writeCreate).

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

// newRunLeaseEpoch is the epoch of the claim a new run's create makes.
const newRunLeaseEpoch = 1

// commitFirst writes the pending create of r with p, r's first commit, in
// one transaction. done reports that p is written (err nil) or that the
// commit failed for good (err); not done with a nil error means the create
// is now written on its own and p is to be committed as usual. A failure
// whose outcome is unknown is settled by reading the run back.
func (h *Host) commitFirst(ctx context.Context, r *run, p *store.CommitParams) (done bool, err error) {
	r.createMu.Lock()
	defer r.createMu.Unlock()
	cp := r.create
	if cp == nil {
		return false, nil // written alone meanwhile (writeCreate)
	}
	cc := h.store.(store.CreateCommitter) // deferCreate checked
	f := &Fault{Point: FaultCommitBefore, RunID: p.RunID, ResponseID: p.ResponseID, Step: p.Step}
	if err := h.fault(ctx, f); err != nil {
		return true, err
	}
	start := time.Now()
	cres, res, err := cc.CreateCommit(ctx, cp, p)
	h.metrics.commitSeconds.Observe(time.Since(start).Seconds())
	if err == nil {
		h.metrics.commits.Inc()
		h.metrics.checkpointsPruned.Add(float64(res.Pruned))
		h.created(r, cres.Run.Lease)
		f.Point = FaultCommitAfter
		return true, h.fault(ctx, f)
	}
	h.metrics.failed(opCommit)
	sr, gerr := h.store.RunGet(ctx, r.id)
	switch {
	case gerr == nil && sr.LastStep >= p.Step:
		// Written after all: the failure was in reporting it.
		h.log.Info("host: an earlier create-and-commit attempt had succeeded", "run_id", r.id, "step", p.Step)
		h.metrics.commits.Inc()
		h.created(r, sr.Lease)
		return true, nil
	case gerr == nil:
		return true, fmt.Errorf("host: create and commit run %s: the run is stored at step %d, not %d: %w", r.id, sr.LastStep, p.Step, err)
	case !errors.Is(gerr, store.ErrNotFound):
		return true, fmt.Errorf("host: create and commit run %s step %d: %w", r.id, p.Step, err)
	}
	// Nothing written: the create alone, then the commit as any other
	// (retried as commit retries).
	h.log.Warn("host: create and commit failed; writing the create alone", "run_id", r.id, "err", err)
	return false, h.writeCreateLocked(ctx, r)
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
	return h.writeCreateLocked(ctx, r)
}

// writeCreateLocked is writeCreate with r.createMu held.
func (h *Host) writeCreateLocked(ctx context.Context, r *run) error {
	cp := r.create
	if cp == nil {
		return nil
	}
	res, err := h.store.ResponseCreate(ctx, cp)
	if err != nil {
		h.metrics.failed(opCreate)
		return fmt.Errorf("host: create response %s: %w", cp.Response.ID, err)
	}
	h.created(r, res.Run.Lease)
	return nil
}

// created records that r's create is written, under lease: from now on
// the lease loops renew and guard it. Called with r.createMu held.
func (h *Host) created(r *run, lease store.Lease) {
	if lease.Epoch != r.epoch {
		// A new run's claim is epoch newRunLeaseEpoch in every store:
		// the commits made under r.epoch would be fenced.
		h.log.Error("host: created run claimed at an unexpected epoch", "run_id", r.id, "epoch", lease.Epoch, "want", r.epoch)
	}
	r.leaseExpires = lease.ExpiresAt
	r.create = nil
	r.pending.Store(false) // after leaseExpires: the guard reads it once it sees the run
}
