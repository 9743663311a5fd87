package postgres

import (
	"errors"
	"fmt"
	"testing"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// TestGroupCommit_ConversationAppend: terminal commits of turns that append
// to their conversations, written as one group-commit batch: each member's
// append is in its own commit's savepoint, so a fenced member appends
// nothing and keeps its conversation held, while the others append theirs.
func TestGroupCommit_ConversationAppend(t *testing.T) {
	t.Parallel()
	s := oneBatchStore(t)
	ctx := t.Context()
	const n = 4
	var ps []*store.CommitParams
	for i := range n {
		conv := fmt.Sprintf("conv_gc_%d", i)
		if _, _, err := s.ConversationCreate(ctx, &store.ConversationCreateParams{Conversation: &store.Conversation{ID: conv}}); err != nil {
			t.Fatal(err)
		}
		cp := storetest.ResponseParams(nil)
		cp.Conversation = &store.ConversationTurn{ID: conv}
		if _, err := s.ResponseCreate(ctx, cp); err != nil {
			t.Fatal(err)
		}
		p := storetest.NextCommit(ctx, t, s, cp.RunID, &storetest.CommitOpts{Status: store.StatusCompleted})
		p.Conversation = &store.ConversationAppend{ID: conv, Items: []store.ConversationItem{
			{ID: "in", Data: []byte(`{"id":"in"}`)}, {ID: "out", Data: []byte(`{"id":"out"}`)}}}
		ps = append(ps, p)
	}
	ps[1].Epoch++ // fenced: appends nothing
	f := holdCommits(t, s)
	before := s.CommitStats().Batches
	results := commitAll(ctx, s, ps)
	f.waitQueued(t, n)
	f.release(t)
	for range n {
		r := <-results
		if r.p == ps[1] {
			if !errors.Is(r.err, store.ErrFenced) {
				t.Errorf("fenced member: %v", r.err)
			}
		} else if r.err != nil {
			t.Errorf("member: %v", r.err)
		}
	}
	if got := s.CommitStats().Batches - before; got >= n {
		t.Errorf("%d batches for %d commits: they were not written together", got, n)
	}
	for _, p := range ps {
		items, _, err := s.ConversationItemList(ctx, &store.ConversationItemListParams{ConversationID: p.Conversation.ID})
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.ConversationGet(ctx, p.Conversation.ID)
		if err != nil {
			t.Fatal(err)
		}
		if p == ps[1] {
			if len(items) != 0 || c.TurnResponseID != p.ResponseID {
				t.Errorf("fenced member's conversation: %d items, turn %q; want 0, %s", len(items), c.TurnResponseID, p.ResponseID)
			}
		} else if len(items) != 2 || c.TurnResponseID != "" {
			t.Errorf("conversation %s: %d items, turn %q; want 2, none", c.ID, len(items), c.TurnResponseID)
		}
	}
}
