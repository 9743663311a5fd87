package host_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/store"
)

// opsStore counts the host's store calls: writes by kind, and reads made
// on contexts marked with readerKey (a reader's), whatever else the host
// reads meanwhile.
type opsStore struct {
	store.Store
	commits, creates, releases, appends atomic.Int64
	reads                               atomic.Int64
}

type readerKey struct{}

func (s *opsStore) Commit(ctx context.Context, p *store.CommitParams) (*store.CommitResult, error) {
	s.commits.Add(1)
	return s.Store.Commit(ctx, p)
}

func (s *opsStore) ResponseCreate(ctx context.Context, p *store.ResponseCreateParams) (*store.ResponseCreateResult, error) {
	s.creates.Add(1)
	return s.Store.ResponseCreate(ctx, p)
}

func (s *opsStore) LeaseRelease(ctx context.Context, p *store.LeaseParams) error {
	s.releases.Add(1)
	return s.Store.LeaseRelease(ctx, p)
}

func (s *opsStore) EventAppend(ctx context.Context, p *store.EventAppendParams) error {
	s.appends.Add(1)
	return s.Store.EventAppend(ctx, p)
}

func (s *opsStore) read(ctx context.Context) {
	if ctx.Value(readerKey{}) != nil {
		s.reads.Add(1)
	}
}

func (s *opsStore) ResponseGet(ctx context.Context, id string) (*store.Response, error) {
	s.read(ctx)
	return s.Store.ResponseGet(ctx, id)
}

func (s *opsStore) EventList(ctx context.Context, p *store.EventListParams) ([]store.Event, error) {
	s.read(ctx)
	return s.Store.EventList(ctx, p)
}

func (s *opsStore) EventWait(ctx context.Context, id string, after int64) error {
	s.read(ctx)
	return s.Store.EventWait(ctx, id, after)
}

// A one-step response costs its create and one commit, which also gives
// the run's lease up (store.CommitParams.Release): no LeaseRelease
// follows it, and the lease is free in the store at once.
func TestHost_OneStepResponseWrites(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be testDB) {
		s := &opsStore{Store: be.open(t)}
		defer s.Close()
		h := newHost(t, s, nil, registerDemos)
		const n = 5
		for range n {
			r := create(t, h, examples.Echo, "hello", nil)
			if final := wait(t, h, r.ID); final.Status != store.StatusCompleted {
				t.Fatalf("status %s", final.Status)
			}
			h.WaitRunExited(t)
			run, err := s.RunGet(testCtx(t), r.RunID)
			if err != nil || run.Lease.Owner != "" || run.Active {
				t.Fatalf("run after its response finished: %+v (%v); want unowned, inactive", run, err)
			}
		}
		shutdown(t, h)
		t.Logf("%d one-step responses: %d creates, %d commits, %d lease releases, %d appends",
			n, s.creates.Load(), s.commits.Load(), s.releases.Load(), s.appends.Load())
		if s.creates.Load() != n || s.commits.Load() != n || s.releases.Load() != 0 {
			t.Fatalf("writes for %d one-step responses: %d creates, %d commits, %d lease releases; want %d, %d, 0",
				n, s.creates.Load(), s.commits.Load(), s.releases.Load(), n, n)
		}
	})
}
