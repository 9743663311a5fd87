package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

// noticeWait bounds the wait for one notice: they normally arrive in
// milliseconds, but the machine running the suite may be loaded.
const noticeWait = 30 * time.Second

// hostRegistry returns b's store as a HostRegistry, skipping the test for
// a backend that has none (the interface is optional).
func hostRegistry(t *testing.T, b *bundle) store.HostRegistry {
	t.Helper()
	hr, ok := b.s.(store.HostRegistry)
	if !ok {
		t.Skipf("%T does not implement store.HostRegistry", b.s)
	}
	return hr
}

func testHostRegistry(t *testing.T, h Harness) {
	t.Parallel()

	t.Run("HeartbeatListsLiveHosts", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		hr := hostRegistry(t, b)
		t0 := testNow()
		a := heartbeat(b.ctx, t, hr, store.HostInfo{ID: "host-b", Addr: "10.0.0.2:8080", MaxRuns: 4, Runs: 1}, time.Minute, t0)
		if a.ID != "host-b" || a.Addr != "10.0.0.2:8080" || a.MaxRuns != 4 || a.Runs != 1 ||
			!a.StartedAt.Equal(t0) || !a.HeartbeatAt.Equal(t0) || !a.ExpiresAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("first heartbeat returned %+v", a)
		}
		heartbeat(b.ctx, t, hr, store.HostInfo{ID: "host-a"}, time.Minute, t0)
		// A later heartbeat refreshes everything but StartedAt.
		t1 := t0.Add(20 * time.Second)
		a = heartbeat(b.ctx, t, hr, store.HostInfo{ID: "host-b", Addr: "10.0.0.3:8080", Runs: 3}, time.Minute, t1)
		if !a.StartedAt.Equal(t0) || !a.HeartbeatAt.Equal(t1) || !a.ExpiresAt.Equal(t1.Add(time.Minute)) ||
			a.Addr != "10.0.0.3:8080" || a.Runs != 3 || a.MaxRuns != 0 {
			t.Fatalf("second heartbeat returned %+v", a)
		}
		got := hostIDs(b.ctx, t, hr, t1)
		if len(got) != 2 || got[0].ID != "host-a" || got[1].ID != "host-b" || *got[1] != *a {
			t.Fatalf("HostList = %v, want host-a then %+v", got, a)
		}
		// host-a expires at t0+1m, host-b at t1+1m.
		if got := hostIDs(b.ctx, t, hr, t0.Add(time.Minute)); len(got) != 1 || got[0].ID != "host-b" {
			t.Fatalf("HostList after host-a expired = %v, want host-b only", got)
		}
		if got := hostIDs(b.ctx, t, hr, t1.Add(time.Minute)); len(got) != 0 {
			t.Fatalf("HostList after both expired = %v, want none", got)
		}
	})

	t.Run("HeartbeatDeletesExpiredHosts", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		hr := hostRegistry(t, b)
		t0 := testNow()
		heartbeat(b.ctx, t, hr, store.HostInfo{ID: "dead"}, time.Second, t0)
		heartbeat(b.ctx, t, hr, store.HostInfo{ID: "alive"}, time.Hour, t0)
		heartbeat(b.ctx, t, hr, store.HostInfo{ID: "alive"}, time.Hour, t0.Add(time.Minute))
		// Listed at t0 the dead host would be live: it must be gone.
		if got := hostIDs(b.ctx, t, hr, t0); len(got) != 1 || got[0].ID != "alive" {
			t.Fatalf("HostList = %v, want alive only (dead deleted by the heartbeat)", got)
		}
	})

	t.Run("RemoveDeletes", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		hr := hostRegistry(t, b)
		t0 := testNow()
		heartbeat(b.ctx, t, hr, store.HostInfo{ID: "host-a"}, time.Hour, t0)
		heartbeat(b.ctx, t, hr, store.HostInfo{ID: "host-b"}, time.Hour, t0)
		requireNoError(t, hr.HostRemove(b.ctx, "host-a"), "HostRemove")
		requireNoError(t, hr.HostRemove(b.ctx, "host-a"), "HostRemove again")
		requireNoError(t, hr.HostRemove(b.ctx, "never-registered"), "HostRemove of an absent host")
		if got := hostIDs(b.ctx, t, hr, t0); len(got) != 1 || got[0].ID != "host-b" {
			t.Fatalf("HostList = %v, want host-b only", got)
		}
	})

	t.Run("HeartbeatNeedsIDAndTTL", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		hr := hostRegistry(t, b)
		if _, err := hr.HostHeartbeat(b.ctx, &store.HostHeartbeatParams{Host: store.HostInfo{ID: ""}, TTL: time.Minute}); err == nil {
			t.Fatal("heartbeat without an ID succeeded")
		}
		if _, err := hr.HostHeartbeat(b.ctx, &store.HostHeartbeatParams{Host: store.HostInfo{ID: "x"}}); err == nil {
			t.Fatal("heartbeat without a TTL succeeded")
		}
		if got := hostIDs(b.ctx, t, hr, time.Time{}); len(got) != 0 {
			t.Fatalf("HostList after refused heartbeats = %v", got)
		}
	})
}

// heartbeat calls HostHeartbeat and fails the test on error.
func heartbeat(ctx context.Context, t *testing.T, hr store.HostRegistry, hi store.HostInfo, ttl time.Duration, now time.Time) *store.HostInfo {
	t.Helper()
	got, err := hr.HostHeartbeat(ctx, &store.HostHeartbeatParams{Host: hi, TTL: ttl, Now: now})
	requireNoError(t, err, "HostHeartbeat "+hi.ID)
	return got
}

// hostIDs calls HostList and fails the test on error.
func hostIDs(ctx context.Context, t *testing.T, hr store.HostRegistry, now time.Time) []*store.HostInfo {
	t.Helper()
	got, err := hr.HostList(ctx, now)
	requireNoError(t, err, "HostList")
	return got
}

// notices subscribes to b's store notices for the rest of the test,
// skipping the test for a backend that has no Notifier.
func notices(t *testing.T, b *bundle) <-chan store.Notice {
	t.Helper()
	n, ok := b.s.(store.Notifier)
	if !ok {
		t.Skipf("%T does not implement store.Notifier", b.s)
	}
	return n.Notices(b.ctx, 64)
}

// nextNotice returns the next notice that is not a NoticeResync.
func nextNotice(t *testing.T, ch <-chan store.Notice) store.Notice {
	t.Helper()
	timeout := time.After(noticeWait)
	for {
		select {
		case n, ok := <-ch:
			if !ok {
				t.Fatal("notice channel closed")
			}
			if n.Kind != store.NoticeResync {
				return n
			}
		case <-timeout:
			t.Fatalf("no notice within %v", noticeWait)
		}
	}
}

// noticesUntil collects notices until one equal to want, which it returns
// last.
func noticesUntil(t *testing.T, ch <-chan store.Notice, want store.Notice) []store.Notice {
	t.Helper()
	var got []store.Notice
	for {
		n := nextNotice(t, ch)
		got = append(got, n)
		if n == want {
			return got
		}
	}
}

func testNotices(t *testing.T, h Harness) {
	t.Parallel()

	t.Run("CancelIsAnnounced", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		ch := notices(t, b)
		res := CreateResponse(b.ctx, t, b.s, nil)
		_, err := b.s.ResponseCancel(b.ctx, res.Response.ID)
		requireNoError(t, err, "ResponseCancel")
		want := store.Notice{Kind: store.NoticeCancel, RunID: res.Run.ID, ResponseID: res.Response.ID}
		if got := nextNotice(t, ch); got != want {
			t.Fatalf("notice %+v, want %+v", got, want)
		}
	})

	t.Run("QueuedAndReleasedRunsAreAnnounced", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		ch := notices(t, b)
		owned := CreateResponse(b.ctx, t, b.s, nil)
		queued := CreateResponse(b.ctx, t, b.s, &ResponseOpts{NoLease: true})
		got := noticesUntil(t, ch, store.Notice{Kind: store.NoticeRunReady, RunID: queued.Run.ID})
		// A finished run's release announces nothing (no host is needed).
		done := CreateResponse(b.ctx, t, b.s, nil)
		Commit(b.ctx, t, b.s, done.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		requireNoError(t, b.s.LeaseRelease(b.ctx, &store.LeaseParams{RunID: done.Run.ID, Owner: LeaseOwnerDefault,
			Epoch: done.Run.Lease.Epoch}), "LeaseRelease of the finished run")
		// An unfinished run's release (drain) does.
		requireNoError(t, b.s.LeaseRelease(b.ctx, &store.LeaseParams{RunID: owned.Run.ID, Owner: LeaseOwnerDefault,
			Epoch: owned.Run.Lease.Epoch}), "LeaseRelease")
		got = append(got, noticesUntil(t, ch, store.Notice{Kind: store.NoticeRunReady, RunID: owned.Run.ID})...)
		for _, n := range got[:len(got)-1] {
			if n.RunID == owned.Run.ID || n.RunID == done.Run.ID {
				t.Fatalf("unexpected notice %+v (all: %+v)", n, got)
			}
		}
	})

	t.Run("ChannelClosesWithContext", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		n, ok := b.s.(store.Notifier)
		if !ok {
			t.Skipf("%T does not implement store.Notifier", b.s)
		}
		ctx, cancel := context.WithCancel(b.ctx)
		ch := n.Notices(ctx, 1)
		cancel()
		timeout := time.After(noticeWait)
		for {
			select {
			case _, ok := <-ch:
				if !ok {
					return
				}
			case <-timeout:
				t.Fatal("notice channel not closed after its context ended")
			}
		}
	})
}
