package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

// webhookOutbox returns b's store as a WebhookOutbox, skipping the test
// for a backend that has none (the interface is optional).
func webhookOutbox(t *testing.T, b *bundle) store.WebhookOutbox {
	t.Helper()
	o, ok := b.s.(store.WebhookOutbox)
	if !ok {
		t.Skipf("%T does not implement store.WebhookOutbox", b.s)
	}
	return o
}

// webhooks returns n deliveries of one event to n endpoints.
func webhooks(typ string, n int) []store.WebhookInput {
	ev := NewID("evt")
	out := make([]store.WebhookInput, n)
	for i := range out {
		out[i] = store.WebhookInput{EventID: ev, Type: typ, Endpoint: fmt.Sprintf("http://hooks.test/%d", i)}
	}
	return out
}

// finishWithWebhooks creates a response and commits its terminal step
// with n webhook deliveries at now; it returns the commit.
func finishWithWebhooks(t *testing.T, b *bundle, n int, now time.Time) *store.CommitParams {
	t.Helper()
	c := CreateResponse(b.ctx, t, b.s, &ResponseOpts{Now: now})
	p := NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted, Now: now})
	p.Webhooks = webhooks("response.completed", n)
	_, err := b.s.Commit(b.ctx, p)
	requireNoError(t, err, "terminal Commit with webhooks")
	return p
}

func listWebhooks(t *testing.T, b *bundle, o store.WebhookOutbox, p *store.WebhookListParams) []*store.WebhookDelivery {
	t.Helper()
	if p == nil {
		p = &store.WebhookListParams{}
	}
	ds, err := o.WebhookList(b.ctx, p)
	requireNoError(t, err, "WebhookList")
	return ds
}

func claimWebhooks(t *testing.T, b *bundle, o store.WebhookOutbox, owner string, lease time.Duration, now time.Time) []*store.WebhookDelivery {
	t.Helper()
	ds, err := o.WebhookClaim(b.ctx, &store.WebhookClaimParams{Owner: owner, Lease: lease, Now: now})
	requireNoError(t, err, "WebhookClaim")
	return ds
}

func testWebhook(t *testing.T, h Harness) {
	t.Parallel()

	t.Run("CommitWritesDeliveries", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		o := webhookOutbox(t, b)
		t0 := testNow()
		p := finishWithWebhooks(t, b, 2, t0)
		ds := listWebhooks(t, b, o, nil)
		if len(ds) != 2 {
			t.Fatalf("WebhookList = %d deliveries, want 2", len(ds))
		}
		for i, d := range ds {
			w := p.Webhooks[i]
			if d.EventID != w.EventID || d.Type != w.Type || d.Endpoint != w.Endpoint || d.ResponseID != p.ResponseID ||
				d.Status != store.WebhookPending || d.Attempts != 0 || !d.CreatedAt.Equal(t0) || !d.NextAttemptAt.Equal(t0) ||
				d.DoneAt != nil || d.LastError != "" || d.ClaimOwner != "" {
				t.Fatalf("delivery %d = %+v, want pending %+v of %s created at %v", i, d, w, p.ResponseID, t0)
			}
		}
		if ds[0].ID >= ds[1].ID {
			t.Fatalf("delivery IDs %d, %d not increasing", ds[0].ID, ds[1].ID)
		}
		c, err := o.WebhookCount(b.ctx)
		requireNoError(t, err, "WebhookCount")
		if *c != (store.WebhookCounts{Pending: 2}) {
			t.Fatalf("WebhookCount = %+v, want 2 pending", c)
		}
	})

	t.Run("NonTerminalCommitRefused", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		o := webhookOutbox(t, b)
		c := CreateResponse(b.ctx, t, b.s, nil)
		before := ReadRunState(b.ctx, t, b.s, c.Run.ID)
		p := NextCommit(b.ctx, t, b.s, c.Run.ID, nil)
		p.Webhooks = webhooks("response.completed", 1)
		if _, err := b.s.Commit(b.ctx, p); err == nil {
			t.Fatal("a commit that is not terminal with webhooks succeeded")
		}
		requireSameState(t, ReadRunState(b.ctx, t, b.s, c.Run.ID), before, "run state after the refused commit")
		if ds := listWebhooks(t, b, o, nil); len(ds) != 0 {
			t.Fatalf("deliveries after the refused commit: %+v", ds)
		}
	})

	t.Run("FailedCommitWritesNone", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		o := webhookOutbox(t, b)
		c := CreateResponse(b.ctx, t, b.s, nil)
		p := NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted, Epoch: c.Run.Lease.Epoch + 1})
		p.Webhooks = webhooks("response.completed", 2)
		_, err := b.s.Commit(b.ctx, p)
		requireIs(t, err, store.ErrFenced, "terminal Commit at a stale epoch")
		// A conflicting step too.
		p = NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusFailed, Step: 5})
		p.Webhooks = webhooks("response.failed", 1)
		_, err = b.s.Commit(b.ctx, p)
		requireIs(t, err, store.ErrConflict, "terminal Commit of a step out of order")
		if ds := listWebhooks(t, b, o, nil); len(ds) != 0 {
			t.Fatalf("deliveries after failed commits: %+v", ds)
		}
		resp, err := b.s.ResponseGet(b.ctx, c.Response.ID)
		requireNoError(t, err, "ResponseGet")
		if resp.Finished() {
			t.Fatalf("response finished by failed commits: %+v", resp)
		}
	})

	t.Run("DeliveryFailureUndoesCommit", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		o := webhookOutbox(t, b)
		first := finishWithWebhooks(t, b, 1, testNow())
		c := CreateResponse(b.ctx, t, b.s, nil)
		before := ReadRunState(b.ctx, t, b.s, c.Run.ID)
		p := NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		// The same event to the same endpoint again: its row cannot be
		// written, so neither can the commit.
		p.Webhooks = []store.WebhookInput{{EventID: NewID("evt"), Type: "response.completed", Endpoint: "http://hooks.test/x"}, first.Webhooks[0]}
		_, err := b.s.Commit(b.ctx, p)
		requireIs(t, err, store.ErrConflict, "terminal Commit with an enqueued event")
		requireSameState(t, ReadRunState(b.ctx, t, b.s, c.Run.ID), before, "run state after the failed commit")
		if ds := listWebhooks(t, b, o, &store.WebhookListParams{ResponseID: c.Response.ID}); len(ds) != 0 {
			t.Fatalf("deliveries of the failed commit: %+v", ds)
		}
	})

	t.Run("CancelledCommitWritesDeliveries", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		o := webhookOutbox(t, b)
		c := CreateResponse(b.ctx, t, b.s, nil)
		_, err := b.s.ResponseCancel(b.ctx, c.Response.ID)
		requireNoError(t, err, "ResponseCancel")
		if ds := listWebhooks(t, b, o, nil); len(ds) != 0 {
			t.Fatalf("deliveries after a recorded cancel (not committed): %+v", ds)
		}
		p := NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCancelled})
		p.Webhooks, p.Release = webhooks("response.cancelled", 1), true
		_, err = b.s.Commit(b.ctx, p)
		requireNoError(t, err, "cancelled Commit with webhooks")
		ds := listWebhooks(t, b, o, &store.WebhookListParams{ResponseID: c.Response.ID})
		if len(ds) != 1 || ds[0].Type != "response.cancelled" || ds[0].Status != store.WebhookPending {
			t.Fatalf("deliveries after the cancelled commit = %+v, want one pending response.cancelled", ds)
		}
	})

	t.Run("ClaimLeaseAndReport", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		o := webhookOutbox(t, b)
		t0 := testNow()
		finishWithWebhooks(t, b, 1, t0)
		// Not due before its creation.
		if ds := claimWebhooks(t, b, o, "host-a", time.Minute, t0.Add(-time.Second)); len(ds) != 0 {
			t.Fatalf("claimed before due: %+v", ds)
		}
		ds := claimWebhooks(t, b, o, "host-a", time.Minute, t0)
		if len(ds) != 1 || ds[0].Attempts != 1 || ds[0].ClaimOwner != "host-a" || !ds[0].NextAttemptAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("first claim = %+v, want attempt 1 of host-a until t0+1m", ds)
		}
		id := ds[0].ID
		if again := claimWebhooks(t, b, o, "host-b", time.Minute, t0.Add(59*time.Second)); len(again) != 0 {
			t.Fatalf("claimed again within the lease: %+v", again)
		}
		// host-a died: its claim expires and host-b claims.
		ds = claimWebhooks(t, b, o, "host-b", time.Minute, t0.Add(time.Minute))
		if len(ds) != 1 || ds[0].ID != id || ds[0].Attempts != 2 || ds[0].ClaimOwner != "host-b" {
			t.Fatalf("claim after expiry = %+v, want attempt 2 of host-b", ds)
		}
		err := o.WebhookReport(b.ctx, &store.WebhookReportParams{ID: id, Owner: "host-a", Attempt: 1, Status: store.WebhookDelivered, Now: t0.Add(time.Minute)})
		requireIs(t, err, store.ErrFenced, "report of an expired claim")
		err = o.WebhookReport(b.ctx, &store.WebhookReportParams{ID: id + 1000, Owner: "host-b", Attempt: 2, Status: store.WebhookDelivered})
		requireIs(t, err, store.ErrNotFound, "report of an unknown delivery")
		// A failed attempt: retry in 10s.
		t1 := t0.Add(time.Minute + time.Second)
		err = o.WebhookReport(b.ctx, &store.WebhookReportParams{ID: id, Owner: "host-b", Attempt: 2, Status: store.WebhookPending,
			RetryAfter: 10 * time.Second, Error: "HTTP 500", Now: t1})
		requireNoError(t, err, "WebhookReport retry")
		d := listWebhooks(t, b, o, nil)[0]
		if d.Status != store.WebhookPending || d.LastError != "HTTP 500" || !d.NextAttemptAt.Equal(t1.Add(10*time.Second)) || d.ClaimOwner != "" {
			t.Fatalf("after a retry report: %+v", d)
		}
		if ds := claimWebhooks(t, b, o, "host-a", time.Minute, t1.Add(9*time.Second)); len(ds) != 0 {
			t.Fatalf("claimed before the retry is due: %+v", ds)
		}
		ds = claimWebhooks(t, b, o, "host-a", time.Minute, t1.Add(10*time.Second))
		if len(ds) != 1 || ds[0].Attempts != 3 {
			t.Fatalf("claim of the retry = %+v, want attempt 3", ds)
		}
		t2 := t1.Add(11 * time.Second)
		err = o.WebhookReport(b.ctx, &store.WebhookReportParams{ID: id, Owner: "host-a", Attempt: 3, Status: store.WebhookDelivered, Now: t2})
		requireNoError(t, err, "WebhookReport delivered")
		d = listWebhooks(t, b, o, nil)[0]
		if d.Status != store.WebhookDelivered || d.DoneAt == nil || !d.DoneAt.Equal(t2) || d.Attempts != 3 {
			t.Fatalf("after delivery: %+v", d)
		}
		if ds := claimWebhooks(t, b, o, "host-b", time.Minute, t2.Add(time.Hour)); len(ds) != 0 {
			t.Fatalf("a delivered delivery claimed: %+v", ds)
		}
		err = o.WebhookReport(b.ctx, &store.WebhookReportParams{ID: id, Owner: "host-a", Attempt: 3, Status: store.WebhookFailed, Now: t2})
		requireIs(t, err, store.ErrFenced, "second report of a done delivery")
	})

	t.Run("FailedIsFinal", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		o := webhookOutbox(t, b)
		t0 := testNow()
		finishWithWebhooks(t, b, 2, t0)
		ds := claimWebhooks(t, b, o, "host-a", time.Minute, t0)
		if len(ds) != 2 {
			t.Fatalf("claimed %d, want 2", len(ds))
		}
		err := o.WebhookReport(b.ctx, &store.WebhookReportParams{ID: ds[0].ID, Owner: "host-a", Attempt: 1, Status: store.WebhookFailed,
			Error: "gave up", Now: t0})
		requireNoError(t, err, "WebhookReport failed")
		err = o.WebhookReport(b.ctx, &store.WebhookReportParams{ID: ds[1].ID, Owner: "host-a", Attempt: 1, Status: store.WebhookDelivered, Now: t0})
		requireNoError(t, err, "WebhookReport delivered")
		failed := listWebhooks(t, b, o, &store.WebhookListParams{Status: store.WebhookFailed})
		if len(failed) != 1 || failed[0].ID != ds[0].ID || failed[0].LastError != "gave up" || failed[0].DoneAt == nil {
			t.Fatalf("failed deliveries = %+v", failed)
		}
		c, err := o.WebhookCount(b.ctx)
		requireNoError(t, err, "WebhookCount")
		if *c != (store.WebhookCounts{Delivered: 1, Failed: 1}) {
			t.Fatalf("WebhookCount = %+v, want 1 delivered, 1 failed", c)
		}
		if got := claimWebhooks(t, b, o, "host-b", time.Minute, t0.Add(24*time.Hour)); len(got) != 0 {
			t.Fatalf("done deliveries claimed: %+v", got)
		}
		err = o.WebhookReport(b.ctx, &store.WebhookReportParams{ID: ds[0].ID, Owner: "host-a", Attempt: 1, Status: store.WebhookPending})
		requireIs(t, err, store.ErrFenced, "retry report of a failed delivery")
	})

	t.Run("ListAndPrune", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		o := webhookOutbox(t, b)
		t0 := testNow()
		p1 := finishWithWebhooks(t, b, 2, t0)
		p2 := finishWithWebhooks(t, b, 1, t0)
		if ds := listWebhooks(t, b, o, &store.WebhookListParams{ResponseID: p2.ResponseID}); len(ds) != 1 || ds[0].ResponseID != p2.ResponseID {
			t.Fatalf("list by response = %+v", ds)
		}
		all := listWebhooks(t, b, o, nil)
		if page := listWebhooks(t, b, o, &store.WebhookListParams{After: all[0].ID, Limit: 1}); len(page) != 1 || page[0].ID != all[1].ID {
			t.Fatalf("page after %d = %+v, want %d", all[0].ID, page, all[1].ID)
		}
		ds := claimWebhooks(t, b, o, "host-a", time.Minute, t0)
		for _, d := range ds {
			if d.ResponseID == p1.ResponseID {
				err := o.WebhookReport(b.ctx, &store.WebhookReportParams{ID: d.ID, Owner: "host-a", Attempt: 1, Status: store.WebhookDelivered, Now: t0})
				requireNoError(t, err, "WebhookReport")
			}
		}
		n, err := o.WebhookPrune(b.ctx, &store.WebhookPruneParams{Before: t0})
		requireNoError(t, err, "WebhookPrune before their end")
		if n != 0 {
			t.Fatalf("pruned %d done at the cutoff, want 0", n)
		}
		n, err = o.WebhookPrune(b.ctx, &store.WebhookPruneParams{Before: t0.Add(time.Second)})
		requireNoError(t, err, "WebhookPrune")
		if n != 2 {
			t.Fatalf("pruned %d, want the 2 delivered", n)
		}
		if ds := listWebhooks(t, b, o, nil); len(ds) != 1 || ds[0].ResponseID != p2.ResponseID || ds[0].Status != store.WebhookPending {
			t.Fatalf("after prune = %+v, want p2's pending delivery", ds)
		}
	})

	t.Run("DeleteKeepsDeliveries", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		o := webhookOutbox(t, b)
		p := finishWithWebhooks(t, b, 1, testNow())
		requireNoError(t, b.s.ResponseDelete(b.ctx, p.ResponseID), "ResponseDelete")
		if ds := listWebhooks(t, b, o, nil); len(ds) != 1 || ds[0].ResponseID != p.ResponseID || ds[0].Status != store.WebhookPending {
			t.Fatalf("deliveries after the response's delete = %+v, want its pending one", ds)
		}
	})

	t.Run("ConcurrentClaimsAreExclusive", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		o := webhookOutbox(t, b)
		t0 := testNow()
		const responses, per = 6, 5
		for range responses {
			finishWithWebhooks(t, b, per, t0)
		}
		var mu sync.Mutex
		seen := map[int64]string{}
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				owner := fmt.Sprintf("host-%d", w)
				for {
					ds, err := o.WebhookClaim(b.ctx, &store.WebhookClaimParams{Owner: owner, Lease: time.Hour, Limit: 3, Now: t0})
					if err != nil {
						t.Errorf("WebhookClaim: %v", err)
						return
					}
					if len(ds) == 0 {
						return
					}
					mu.Lock()
					for _, d := range ds {
						if prev, dup := seen[d.ID]; dup {
							t.Errorf("delivery %d claimed by %s and %s", d.ID, prev, owner)
						}
						seen[d.ID] = owner
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != responses*per {
			t.Fatalf("claimed %d deliveries, want %d", len(seen), responses*per)
		}
	})
}

// withWebhooks returns the fault loop's read of the run of c and the
// outbox (what a terminal commit with webhooks may change), without the
// run's lease, which a reopen may release.
func withWebhooks(t *testing.T, c *store.ResponseCreateResult) func(b *bundle) any {
	return func(b *bundle) any {
		var ds []*store.WebhookDelivery
		if o, ok := b.s.(store.WebhookOutbox); ok {
			ds = listWebhooks(t, b, o, nil)
		}
		return struct {
			Run        any
			Deliveries []*store.WebhookDelivery
		}{withoutLeases(ReadRunState(b.ctx, t, b.s, c.Run.ID)), ds}
	}
}
