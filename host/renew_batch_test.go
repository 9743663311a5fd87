package host_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
)

// renewCountStore counts lease renewals, one by one and in batches.
type renewCountStore struct {
	*postgres.Store
	singles, batches, maxBatch atomic.Int64
}

func (s *renewCountStore) LeaseRenew(ctx context.Context, p *store.LeaseParams) (time.Time, error) {
	s.singles.Add(1)
	return s.Store.LeaseRenew(ctx, p)
}

func (s *renewCountStore) LeaseRenewBatch(ctx context.Context, p *store.LeaseRenewBatchParams) ([]store.LeaseRenewResult, error) {
	s.batches.Add(1)
	for n := int64(len(p.Runs)); ; {
		m := s.maxBatch.Load()
		if n <= m || s.maxBatch.CompareAndSwap(m, n) {
			break
		}
	}
	return s.Store.LeaseRenewBatch(ctx, p)
}

// A host on a store that renews leases in batches renews all of its runs
// in one write per round, not one write per run.
func TestHost_Postgres_RenewsLeasesInOneWrite(t *testing.T) {
	t.Parallel()
	s := &renewCountStore{Store: openPG(t, pgSchema(t)).(*postgres.Store)}
	defer s.Close()
	h := newHost(t, s, &host.Config{HostID: "h", LeaseDuration: 600 * time.Millisecond, CommitBackoff: time.Millisecond},
		registerDemos)
	defer shutdown(t, h)
	const runs = 5
	var ids []string
	for range runs {
		ids = append(ids, create(t, h, examples.Silent, "x", map[string]string{"steps": "100000", "step_delay_ms": "5"}).ID)
	}
	ctx := testCtx(t)
	for s.maxBatch.Load() < runs {
		if ctx.Err() != nil {
			t.Fatalf("no renewal of all %d runs in one batch (largest %d)", runs, s.maxBatch.Load())
		}
		time.Sleep(20 * time.Millisecond) // polling counters: no signal
	}
	if n := s.singles.Load(); n != 0 {
		t.Fatalf("%d leases renewed one by one", n)
	}
	for _, id := range ids {
		if _, err := h.Cancel(ctx, id, ""); err != nil {
			t.Fatal(err)
		}
	}
}
