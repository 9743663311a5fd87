package host_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/verify"
)

// idemHost is a started host over db's store with one plain agent,
// "count", that counts its turns.
type idemHost struct {
	h     *host.Host
	s     store.Store
	turns atomic.Int32
}

func newIdemHost(t *testing.T, db testDB) *idemHost {
	t.Helper()
	ih := &idemHost{s: db.open(t)}
	ih.h = newHost(t, ih.s, nil, func(t *testing.T, h *host.Host) {
		err := h.RegisterAgent("count", agent.AgentFunc(func(context.Context, *agent.Session, []agent.Message) iter.Seq2[agent.Update, error] {
			return func(yield func(agent.Update, error) bool) {
				ih.turns.Add(1)
				yield(agent.Update{Kind: agent.UpdateText, Text: "done"}, nil)
			}
		}))
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() {
		shutdown(t, ih.h)
		if err := store.Check(context.Background(), ih.s); err != nil {
			t.Errorf("store.Check: %v", err)
		}
		ih.s.Close()
	})
	return ih
}

// params is a create of "count" with text, key and owner.
func idemParams(text, key, owner, prev string) *host.CreateParams {
	return &host.CreateParams{Model: "count", Owner: owner, Store: true, Background: true, IdempotencyKey: key,
		PreviousResponseID: prev, Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: text}}}
}

// runs returns how many runs and responses the store holds.
func (ih *idemHost) counts(t *testing.T) (runs, responses int) {
	t.Helper()
	rs, err := ih.s.RunList(testCtx(t), &store.RunListParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		resps, err := ih.s.ResponseListByRun(testCtx(t), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		responses += len(resps)
	}
	return len(rs), responses
}

// TestHost_IdempotencyKey: a create with a key seen before returns the
// first response and starts nothing; another request under the key is an
// *IdempotencyError that stores nothing; other owners have keys of their
// own; a retried continuation is answered, not refused as a conflict.
func TestHost_IdempotencyKey(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, db testDB) {
		ih := newIdemHost(t, db)
		ctx := testCtx(t)
		first, err := ih.h.Create(ctx, idemParams("hi", "key-1", "alice", ""))
		if err != nil {
			t.Fatal(err)
		}
		done, err := ih.h.Wait(ctx, first.ID, "alice")
		if err != nil || done.Status != store.StatusCompleted {
			t.Fatalf("Wait: %v, %+v", err, done)
		}
		again, err := ih.h.Create(ctx, idemParams("hi", "key-1", "alice", ""))
		if err != nil {
			t.Fatalf("Create with the same key: %v", err)
		}
		if again.ID != first.ID || again.Status != store.StatusCompleted || string(again.Snapshot) != string(done.Snapshot) {
			t.Fatalf("replay returned %s (%s), want %s as stored now (completed)", again.ID, again.Status, first.ID)
		}
		if n := ih.turns.Load(); n != 1 {
			t.Fatalf("the agent ran %d turns, want 1", n)
		}
		if runs, resps := ih.counts(t); runs != 1 || resps != 1 {
			t.Fatalf("%d runs and %d responses stored, want 1 and 1", runs, resps)
		}

		// The same key with another request: refused, nothing stored.
		_, err = ih.h.Create(ctx, idemParams("something else", "key-1", "alice", ""))
		ie, ok := errors.AsType[*host.IdempotencyError](err)
		if !ok || ie.ResponseID != first.ID || ie.Key != "key-1" {
			t.Fatalf("Create with another body: err = %v, want an *host.IdempotencyError naming %s", err, first.ID)
		}
		if runs, resps := ih.counts(t); runs != 1 || resps != 1 {
			t.Fatalf("after the refused create: %d runs and %d responses, want 1 and 1", runs, resps)
		}

		// Another owner's key of the same name is independent.
		bobs, err := ih.h.Create(ctx, idemParams("hi", "key-1", "bob", ""))
		if err != nil || bobs.ID == first.ID {
			t.Fatalf("another owner's create: %v (id %v), want a new response", err, bobs)
		}
		if _, err := ih.h.Wait(ctx, bobs.ID, "bob"); err != nil {
			t.Fatal(err)
		}

		// A continuation retried: its previous response is no longer the
		// head, yet the retry gets the continuation, not a conflict.
		cont, err := ih.h.Create(ctx, idemParams("more", "turn-2", "alice", first.ID))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ih.h.Wait(ctx, cont.ID, "alice"); err != nil {
			t.Fatal(err)
		}
		retried, err := ih.h.Create(ctx, idemParams("more", "turn-2", "alice", first.ID))
		if err != nil || retried.ID != cont.ID {
			t.Fatalf("retried continuation: %v (%v), want %s", err, retried, cont.ID)
		}
		// Without a key the same request is a new turn: first is no
		// longer the head, so it branches (a second answer to it).
		branch, err := ih.h.Create(ctx, idemParams("more", "", "alice", first.ID))
		if err != nil || branch.ID == cont.ID || branch.RunID == cont.RunID {
			t.Fatalf("the same continuation without a key: %v (%v), want a branch", err, branch)
		}
		if _, err := ih.h.Wait(ctx, branch.ID, "alice"); err != nil {
			t.Fatal(err)
		}
		if n := ih.turns.Load(); n != 4 {
			t.Fatalf("the agent ran %d turns, want 4", n)
		}
	})
}

// TestHost_IdempotencyKeyConcurrent: creates racing with one key all get
// the one response, and one run is made.
func TestHost_IdempotencyKeyConcurrent(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, db testDB) {
		ih := newIdemHost(t, db)
		ctx := testCtx(t)
		const n = 8
		ids := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				r, err := ih.h.Create(ctx, idemParams("hi", "race", "", ""))
				errs[i] = err
				if err == nil {
					ids[i] = r.ID
				}
			})
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil || ids[i] != ids[0] {
				t.Fatalf("create %d: %v, id %q; want %q", i, errs[i], ids[i], ids[0])
			}
		}
		if _, err := ih.h.Wait(ctx, ids[0], ""); err != nil {
			t.Fatal(err)
		}
		if got := ih.turns.Load(); got != 1 {
			t.Fatalf("the agent ran %d turns, want 1", got)
		}
		if runs, resps := ih.counts(t); runs != 1 || resps != 1 {
			t.Fatalf("%d runs and %d responses stored, want 1 and 1", runs, resps)
		}
	})
}

// TestHost_IdempotencyKeyInvalid: a key over the limit is an *InputError
// and stores nothing.
func TestHost_IdempotencyKeyInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, key := range []string{strings.Repeat("k", store.IdempotencyKeyMax+1), "a\x00b", "\xff"} {
		_, err := b.host.Create(testCtx(t), &host.CreateParams{Model: examples.Echo, IdempotencyKey: key,
			Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "hi"}}})
		ie, ok := errors.AsType[*host.InputError](err)
		if !ok || ie.Code != "invalid_idempotency_key" {
			t.Fatalf("key of %d bytes: err = %v, want an *host.InputError", len(key), err)
		}
	}
	rs, err := b.store.RunList(testCtx(t), &store.RunListParams{})
	if err != nil || len(rs) != 0 {
		t.Fatalf("RunList: %d runs (%v), want none", len(rs), err)
	}
	r, err := b.host.Create(testCtx(t), &host.CreateParams{Model: examples.Echo, IdempotencyKey: strings.Repeat("k", store.IdempotencyKeyMax),
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "hi"}}})
	if err != nil {
		t.Fatalf("a key of the limit's length: %v", err)
	}
	wait(t, b.host, r.ID)
}

// IdempotencyKeyGet passes the capability of the store crashStore wraps
// through.
func (s *crashStore) IdempotencyKeyGet(ctx context.Context, p *store.IdempotencyKeyGetParams) (*store.IdempotencyRecord, error) {
	return s.Store.(store.IdempotencyKeyReader).IdempotencyKeyGet(ctx, p)
}

// TestHost_IdempotencyKeyAcrossCrash: the host dies right after the
// create's commit, before replying; the client's retry with the same key,
// served by the restarted host, gets that response, and one run exists.
func TestHost_IdempotencyKeyAcrossCrash(t *testing.T) {
	t.Parallel()
	sc := newScenario(t, host.Config{})
	sc.arm(&faultRule{point: host.FaultCreateAfterRecord, mode: modeCrash})
	params := func() *host.CreateParams {
		return &host.CreateParams{Model: examples.Echo, Store: true, Background: true, IdempotencyKey: "crash-1",
			Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "x"}}}
	}
	if _, err := sc.host().Create(testCtx(t), params()); !errors.Is(err, errInjected) {
		t.Fatalf("Create through the crash: %v, want the injected crash", err)
	}
	sc.crashAtFault()
	r, err := sc.host().Create(testCtx(t), params())
	if err != nil {
		t.Fatalf("retry after the restart: %v", err)
	}
	runs, err := sc.store().RunList(testCtx(t), &store.RunListParams{})
	if err != nil || len(runs) != 1 || runs[0].HeadResponseID != r.ID {
		t.Fatalf("runs %+v (%v), want one, headed by %s", runs, err, r.ID)
	}
	sc.waitDone(r.ID)
	sc.check(map[string]verify.Outcome{r.ID: {Status: "completed", Output: []string{"x"}}})
}
