package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

// keyed returns the parameters of a create recording key for owner with
// hash, per o.
func keyed(o *ResponseOpts, owner, key, hash string) *store.ResponseCreateParams {
	if o == nil {
		o = &ResponseOpts{}
	}
	o.Owner = owner
	p := ResponseParams(o)
	p.IdempotencyKey, p.RequestHash = key, hash
	return p
}

// requireIdempotencyConflict checks that err is an *store.IdempotencyError
// (matching store.ErrConflict) naming the response want and hash.
func requireIdempotencyConflict(t testing.TB, err error, want, hash, what string) {
	t.Helper()
	requireIs(t, err, store.ErrConflict, what)
	ie, ok := errors.AsType[*store.IdempotencyError](err)
	if !ok {
		t.Fatalf("%s: err = %v (%T), want a *store.IdempotencyError", what, err, err)
	}
	if ie.Record.ResponseID != want || ie.Record.RequestHash != hash {
		t.Fatalf("%s: record names response %s with hash %q, want %s with %q", what, ie.Record.ResponseID,
			ie.Record.RequestHash, want, hash)
	}
}

// requireNothingCreated checks that p's create left no response and, for
// a new run, no run.
func (b *bundle) requireNothingCreated(t testing.TB, p *store.ResponseCreateParams, what string) {
	t.Helper()
	_, err := b.s.ResponseGet(b.ctx, p.Response.ID)
	requireIs(t, err, store.ErrNotFound, what+": ResponseGet of the refused response")
	if p.Response.PreviousResponseID == "" {
		_, err = b.s.RunGet(b.ctx, p.RunID)
		requireIs(t, err, store.ErrNotFound, what+": RunGet of the refused run")
	}
}

func testIdempotency(t *testing.T, h Harness) {
	t.Parallel()
	reader := func(t *testing.T, b *bundle) store.IdempotencyKeyReader {
		t.Helper()
		r, ok := b.s.(store.IdempotencyKeyReader)
		if !ok {
			t.Skipf("%T does not implement store.IdempotencyKeyReader", b.s)
		}
		return r
	}

	// The same owner and key: the second create is refused with the first
	// response's id and hash, and writes nothing.
	t.Run("SameKeyConflicts", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		r := reader(t, b)
		first, err := b.s.ResponseCreate(b.ctx, keyed(nil, "alice", "key-1", "hash-a"))
		requireNoError(t, err, "first create")
		for _, hash := range []string{"hash-a", "hash-b"} {
			p := keyed(nil, "alice", "key-1", hash)
			_, err = b.s.ResponseCreate(b.ctx, p)
			requireIdempotencyConflict(t, err, first.Response.ID, "hash-a", "second create with hash "+hash)
			b.requireNothingCreated(t, p, "second create")
		}
		rec, err := r.IdempotencyKeyGet(b.ctx, &store.IdempotencyKeyGetParams{Owner: "alice", Key: "key-1"})
		requireNoError(t, err, "IdempotencyKeyGet")
		if rec.ResponseID != first.Response.ID || rec.RequestHash != "hash-a" || rec.Owner != "alice" || rec.Key != "key-1" {
			t.Fatalf("IdempotencyKeyGet = %+v, want response %s with hash-a", rec, first.Response.ID)
		}
		_, err = r.IdempotencyKeyGet(b.ctx, &store.IdempotencyKeyGetParams{Owner: "alice", Key: "key-2"})
		requireIs(t, err, store.ErrNotFound, "IdempotencyKeyGet of an unknown key")
	})

	// The key is checked before the continuation: a retried continuation
	// (its previous response is no longer the head) reports the key.
	t.Run("KeyBeforeContinuation", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, &ResponseOpts{Owner: "alice"})
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		cont, err := b.s.ResponseCreate(b.ctx, keyed(&ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID},
			"alice", "turn-2", "h"))
		requireNoError(t, err, "continuation")
		p := keyed(&ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID}, "alice", "turn-2", "h")
		_, err = b.s.ResponseCreate(b.ctx, p)
		requireIdempotencyConflict(t, err, cont.Response.ID, "h", "retried continuation")
		b.requireNothingCreated(t, p, "retried continuation")
	})

	t.Run("OwnersIndependent", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		r := reader(t, b)
		ids := map[string]string{}
		for _, owner := range []string{"alice", "bob", ""} {
			res, err := b.s.ResponseCreate(b.ctx, keyed(nil, owner, "shared", "hash-"+owner))
			requireNoError(t, err, "create of owner "+owner)
			ids[owner] = res.Response.ID
		}
		for owner, id := range ids {
			rec, err := r.IdempotencyKeyGet(b.ctx, &store.IdempotencyKeyGetParams{Owner: owner, Key: "shared"})
			requireNoError(t, err, "IdempotencyKeyGet of owner "+owner)
			if rec.ResponseID != id || rec.RequestHash != "hash-"+owner {
				t.Fatalf("owner %q: record %+v, want response %s", owner, rec, id)
			}
		}
	})

	// A record older than IdempotencyWindow counts no more: a create with
	// its key makes a new response and replaces it.
	t.Run("Expired", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		r := reader(t, b)
		t0 := testNow().Add(-store.IdempotencyWindow - time.Hour)
		old, err := b.s.ResponseCreate(b.ctx, keyed(&ResponseOpts{Now: t0, NoLease: true}, "alice", "k", "h1"))
		requireNoError(t, err, "create at t0")
		rec, err := r.IdempotencyKeyGet(b.ctx, &store.IdempotencyKeyGetParams{Owner: "alice", Key: "k",
			Now: t0.Add(store.IdempotencyWindow - time.Second)})
		requireNoError(t, err, "IdempotencyKeyGet just before the window ends")
		if rec.ResponseID != old.Response.ID {
			t.Fatalf("record names %s, want %s", rec.ResponseID, old.Response.ID)
		}
		_, err = r.IdempotencyKeyGet(b.ctx, &store.IdempotencyKeyGetParams{Owner: "alice", Key: "k"})
		requireIs(t, err, store.ErrNotFound, "IdempotencyKeyGet after the window")
		p := keyed(&ResponseOpts{Now: t0.Add(store.IdempotencyWindow + time.Second), NoLease: true}, "alice", "k", "h2")
		res, err := b.s.ResponseCreate(b.ctx, p)
		requireNoError(t, err, "create with the expired key")
		if res.Response.ID == old.Response.ID {
			t.Fatal("the create with an expired key returned the old response")
		}
		rec, err = r.IdempotencyKeyGet(b.ctx, &store.IdempotencyKeyGetParams{Owner: "alice", Key: "k"})
		requireNoError(t, err, "IdempotencyKeyGet of the new record")
		if rec.ResponseID != res.Response.ID || rec.RequestHash != "h2" {
			t.Fatalf("record %+v, want response %s with h2", rec, res.Response.ID)
		}
		_, err = b.s.ResponseGet(b.ctx, old.Response.ID)
		requireNoError(t, err, "the old response stays")
	})

	// A create that records a key deletes expired records of any key.
	t.Run("CreatePrunesExpired", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		r := reader(t, b)
		t0 := testNow().Add(-store.IdempotencyWindow - time.Hour)
		_, err := b.s.ResponseCreate(b.ctx, keyed(&ResponseOpts{Now: t0, NoLease: true}, "alice", "old", "h"))
		requireNoError(t, err, "create at t0")
		_, err = b.s.ResponseCreate(b.ctx, keyed(nil, "bob", "new", "h"))
		requireNoError(t, err, "create now")
		_, err = r.IdempotencyKeyGet(b.ctx, &store.IdempotencyKeyGetParams{Owner: "alice", Key: "old", Now: t0})
		requireIs(t, err, store.ErrNotFound, "IdempotencyKeyGet at t0 of the expired record, after a later create")
	})

	t.Run("DeleteRemovesKey", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		r := reader(t, b)
		first, err := b.s.ResponseCreate(b.ctx, keyed(&ResponseOpts{Status: store.StatusCompleted}, "alice", "k", "h"))
		requireNoError(t, err, "create")
		requireNoError(t, b.s.ResponseDelete(b.ctx, first.Response.ID), "ResponseDelete")
		_, err = r.IdempotencyKeyGet(b.ctx, &store.IdempotencyKeyGetParams{Owner: "alice", Key: "k"})
		requireIs(t, err, store.ErrNotFound, "IdempotencyKeyGet after ResponseDelete")
		second, err := b.s.ResponseCreate(b.ctx, keyed(nil, "alice", "k", "h"))
		requireNoError(t, err, "create with the key of a deleted response")
		rec, err := r.IdempotencyKeyGet(b.ctx, &store.IdempotencyKeyGetParams{Owner: "alice", Key: "k"})
		requireNoError(t, err, "IdempotencyKeyGet")
		if rec.ResponseID != second.Response.ID {
			t.Fatalf("record names %s, want %s", rec.ResponseID, second.Response.ID)
		}
	})

	t.Run("PruneRemovesKey", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		r := reader(t, b)
		pr, ok := b.s.(store.ResponsePruner)
		if !ok {
			t.Skip("store does not implement store.ResponsePruner")
		}
		old, err := b.s.ResponseCreate(b.ctx, keyed(&ResponseOpts{Status: store.StatusCompleted}, "alice", "k", "h"))
		requireNoError(t, err, "create")
		n, err := pr.ResponsePrune(b.ctx, &store.ResponsePruneParams{Before: testNow().Add(time.Hour)})
		requireNoError(t, err, "ResponsePrune")
		if n != 1 {
			t.Fatalf("ResponsePrune deleted %d, want 1", n)
		}
		_, err = r.IdempotencyKeyGet(b.ctx, &store.IdempotencyKeyGetParams{Owner: "alice", Key: "k"})
		requireIs(t, err, store.ErrNotFound, "IdempotencyKeyGet after the prune of "+old.Response.ID)
	})

	// Concurrent creates with one key: exactly one response is created,
	// and every other create is refused naming it.
	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		ids := make([]string, n)
		params := make([]*store.ResponseCreateParams, n)
		for i := range n {
			params[i] = keyed(nil, "alice", "race", "h")
			wg.Go(func() {
				res, err := b.s.ResponseCreate(b.ctx, params[i])
				errs[i] = err
				if err == nil {
					ids[i] = res.Response.ID
				}
			})
		}
		wg.Wait()
		var winner string
		for i, err := range errs {
			if err == nil {
				if winner != "" {
					t.Fatalf("two creates with one key succeeded: %s and %s", winner, ids[i])
				}
				winner = ids[i]
			}
		}
		if winner == "" {
			t.Fatalf("no create succeeded: %v", errs)
		}
		for i, err := range errs {
			if err != nil {
				requireIdempotencyConflict(t, err, winner, "h", fmt.Sprintf("create %d", i))
				b.requireNothingCreated(t, params[i], fmt.Sprintf("create %d", i))
			}
		}
	})

	t.Run("KeyTooLong", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		r := reader(t, b)
		key := strings.Repeat("k", store.IdempotencyKeyMax+1)
		p := keyed(nil, "alice", key, "h")
		_, err := b.s.ResponseCreate(b.ctx, p)
		if err == nil || errors.Is(err, store.ErrConflict) {
			t.Fatalf("create with a key of %d bytes: err = %v, want a validation error", len(key), err)
		}
		b.requireNothingCreated(t, p, "create with a long key")
		_, err = r.IdempotencyKeyGet(b.ctx, &store.IdempotencyKeyGetParams{Owner: "alice", Key: key})
		requireIs(t, err, store.ErrNotFound, "IdempotencyKeyGet of the long key")
		_, err = b.s.ResponseCreate(b.ctx, keyed(nil, "alice", key[1:], "h"))
		requireNoError(t, err, "create with a key of the limit's length")
	})
}
