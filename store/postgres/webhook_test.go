package postgres

import (
	"errors"
	"testing"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// TestGroupCommit_Webhooks: terminal commits with webhook deliveries
// queued at once are written in one batch, each member's deliveries in its
// savepoint: the members that succeed have theirs, a fenced member and one
// whose delivery cannot be written (an event already enqueued) have none,
// and the latter's whole commit is undone with it.
func TestGroupCommit_Webhooks(t *testing.T) {
	t.Parallel()
	s := oneBatchStore(t)
	ctx := t.Context()
	done := storetest.CreateResponse(ctx, t, s, nil)
	first := storetest.NextCommit(ctx, t, s, done.Run.ID, &storetest.CommitOpts{Status: store.StatusCompleted})
	first.Webhooks = []store.WebhookInput{{EventID: "evt_first", Type: "response.completed", Endpoint: "http://hooks.test/a"}}
	if _, err := s.Commit(ctx, first); err != nil {
		t.Fatal(err)
	}
	const n = 8
	var ps []*store.CommitParams
	for i := range n {
		c := storetest.CreateResponse(ctx, t, s, nil)
		p := storetest.NextCommit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{Status: store.StatusCompleted})
		p.Webhooks = []store.WebhookInput{{EventID: storetest.NewID("evt"), Type: "response.completed", Endpoint: "http://hooks.test/a"},
			{EventID: storetest.NewID("evt"), Type: "response.completed", Endpoint: "http://hooks.test/b"}}
		p.Release = i%2 == 0
		ps = append(ps, p)
	}
	fenced, dup := ps[2], ps[5]
	fenced.Epoch++
	dup.Webhooks[1] = first.Webhooks[0]
	f := holdCommits(t, s)
	results := commitAll(ctx, s, ps)
	f.waitQueued(t, n)
	f.release(t)
	for range n {
		r := <-results
		switch r.p {
		case fenced:
			if !errors.Is(r.err, store.ErrFenced) {
				t.Errorf("fenced member: %v, want ErrFenced", r.err)
			}
		case dup:
			if !errors.Is(r.err, store.ErrConflict) {
				t.Errorf("member with an enqueued event: %v, want ErrConflict", r.err)
			}
		default:
			if r.err != nil {
				t.Errorf("member %s: %v", r.p.RunID, r.err)
			}
		}
	}
	for _, p := range ps {
		resp, err := s.ResponseGet(ctx, p.ResponseID)
		if err != nil {
			t.Fatal(err)
		}
		ds, err := s.WebhookList(ctx, &store.WebhookListParams{ResponseID: p.ResponseID})
		if err != nil {
			t.Fatal(err)
		}
		want := 2
		if p == fenced || p == dup {
			want = 0
		}
		if resp.Finished() != (want > 0) || len(ds) != want {
			t.Errorf("response %s: finished %v with %d deliveries, want %d", p.ResponseID, resp.Finished(), len(ds), want)
		}
	}
	if err := store.Check(ctx, s); err != nil {
		t.Fatal(err)
	}
}
