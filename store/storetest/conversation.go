package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/superstep/superstep/store"
)

// convItems returns n items with ids prefix-0.. and JSON naming them.
func convItems(prefix string, n int) []store.ConversationItem {
	out := make([]store.ConversationItem, n)
	for i := range out {
		id := fmt.Sprintf("%s-%d", prefix, i)
		out[i] = store.ConversationItem{ID: id, Data: fmt.Appendf(nil, `{"id":%q}`, id)}
	}
	return out
}

// itemIDs lists the items' ids.
func itemIDs(items []store.ConversationItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

// allItems lists every item of a conversation, oldest first, through pages
// of 2.
func allItems(t testing.TB, b *bundle, cs store.ConversationStore, id string) []string {
	t.Helper()
	var out []string
	after := ""
	for {
		page, more, err := cs.ConversationItemList(b.ctx, &store.ConversationItemListParams{ConversationID: id, After: after, Limit: 2})
		requireNoError(t, err, "ConversationItemList")
		for _, it := range page {
			if string(it.Data) != fmt.Sprintf(`{"id":%q}`, it.ID) {
				t.Fatalf("item %s has data %s", it.ID, it.Data)
			}
		}
		out = append(out, itemIDs(page)...)
		if !more {
			return out
		}
		after = page[len(page)-1].ID
	}
}

func requireConversationError(t testing.TB, err error, want store.ConversationReason, what string) {
	t.Helper()
	requireIs(t, err, store.ErrConflict, what)
	ce, ok := errors.AsType[*store.ConversationError](err)
	if !ok || ce.Reason != want {
		t.Fatalf("%s: err = %v, want a *store.ConversationError with reason %d", what, err, want)
	}
}

func testConversation(t *testing.T, h Harness) {
	t.Parallel()
	setup := func(t *testing.T) (*bundle, store.ConversationStore) {
		t.Helper()
		b := h.setup(t)
		cs, ok := b.s.(store.ConversationStore)
		if !ok {
			t.Skipf("%T does not implement store.ConversationStore", b.s)
		}
		return b, cs
	}
	create := func(t *testing.T, b *bundle, cs store.ConversationStore, n int) *store.Conversation {
		t.Helper()
		c, items, err := cs.ConversationCreate(b.ctx, &store.ConversationCreateParams{
			Conversation: &store.Conversation{ID: NewID("conv"), Owner: "alice", Metadata: []byte(`{"topic":"demo"}`)},
			Items:        convItems("first", n)})
		requireNoError(t, err, "ConversationCreate")
		if len(items) != n {
			t.Fatalf("ConversationCreate returned %d items, want %d", len(items), n)
		}
		return c
	}

	t.Run("CreateGetUpdateDelete", func(t *testing.T) {
		t.Parallel()
		b, cs := setup(t)
		c := create(t, b, cs, 3)
		got, err := cs.ConversationGet(b.ctx, c.ID)
		requireNoError(t, err, "ConversationGet")
		if got.Owner != "alice" || string(got.Metadata) != `{"topic":"demo"}` || got.TurnResponseID != "" || got.CreatedAt.IsZero() {
			t.Fatalf("ConversationGet = %+v", got)
		}
		_, _, err = cs.ConversationCreate(b.ctx, &store.ConversationCreateParams{Conversation: &store.Conversation{ID: c.ID}})
		requireIs(t, err, store.ErrConflict, "ConversationCreate of an existing id")
		up, err := cs.ConversationUpdate(b.ctx, c.ID, []byte(`{"topic":"other"}`))
		requireNoError(t, err, "ConversationUpdate")
		if string(up.Metadata) != `{"topic":"other"}` || up.Owner != "alice" {
			t.Fatalf("ConversationUpdate = %+v", up)
		}
		_, err = cs.ConversationUpdate(b.ctx, "conv_none", nil)
		requireIs(t, err, store.ErrNotFound, "ConversationUpdate of an unknown id")
		requireNoError(t, cs.ConversationDelete(b.ctx, c.ID), "ConversationDelete")
		_, err = cs.ConversationGet(b.ctx, c.ID)
		requireIs(t, err, store.ErrNotFound, "ConversationGet after delete")
		_, _, err = cs.ConversationItemList(b.ctx, &store.ConversationItemListParams{ConversationID: c.ID})
		requireIs(t, err, store.ErrNotFound, "ConversationItemList after delete")
		_, err = cs.ConversationItemGet(b.ctx, c.ID, "first-0")
		requireIs(t, err, store.ErrNotFound, "ConversationItemGet after delete")
		requireIs(t, cs.ConversationDelete(b.ctx, c.ID), store.ErrNotFound, "second ConversationDelete")
	})

	t.Run("ItemsAddListGetDelete", func(t *testing.T) {
		t.Parallel()
		b, cs := setup(t)
		c := create(t, b, cs, 2)
		added, err := cs.ConversationItemsAdd(b.ctx, c.ID, convItems("more", 3))
		requireNoError(t, err, "ConversationItemsAdd")
		if !slices.IsSortedFunc(added, func(x, y store.ConversationItem) int { return int(x.Seq - y.Seq) }) || added[0].Seq < 2 {
			t.Fatalf("added items have seqs %v", added)
		}
		want := []string{"first-0", "first-1", "more-0", "more-1", "more-2"}
		if got := allItems(t, b, cs, c.ID); !slices.Equal(got, want) {
			t.Fatalf("items = %v, want %v", got, want)
		}
		desc, more, err := cs.ConversationItemList(b.ctx, &store.ConversationItemListParams{ConversationID: c.ID, Desc: true, After: "more-1", Limit: 2})
		requireNoError(t, err, "ConversationItemList desc")
		if got := itemIDs(desc); !slices.Equal(got, []string{"more-0", "first-1"}) || !more {
			t.Fatalf("desc page after more-1 = %v (more %v)", got, more)
		}
		_, _, err = cs.ConversationItemList(b.ctx, &store.ConversationItemListParams{ConversationID: c.ID, After: "none"})
		requireIs(t, err, store.ErrNotFound, "ConversationItemList after an unknown item")
		it, err := cs.ConversationItemGet(b.ctx, c.ID, "more-1")
		requireNoError(t, err, "ConversationItemGet")
		if string(it.Data) != `{"id":"more-1"}` {
			t.Fatalf("ConversationItemGet = %s", it.Data)
		}
		_, err = cs.ConversationItemsAdd(b.ctx, c.ID, convItems("more", 1))
		requireIs(t, err, store.ErrConflict, "ConversationItemsAdd of an id the conversation has")
		before, _ := cs.ConversationGet(b.ctx, c.ID)
		requireNoError(t, cs.ConversationItemDelete(b.ctx, c.ID, "first-1"), "ConversationItemDelete")
		requireIs(t, cs.ConversationItemDelete(b.ctx, c.ID, "first-1"), store.ErrNotFound, "second ConversationItemDelete")
		after, _ := cs.ConversationGet(b.ctx, c.ID)
		if after.Version <= before.Version {
			t.Fatalf("version %d after an item delete, was %d", after.Version, before.Version)
		}
		want = []string{"first-0", "more-0", "more-1", "more-2"}
		if got := allItems(t, b, cs, c.ID); !slices.Equal(got, want) {
			t.Fatalf("items after delete = %v, want %v", got, want)
		}
		_, err = cs.ConversationItemsAdd(b.ctx, "conv_none", convItems("x", 1))
		requireIs(t, err, store.ErrNotFound, "ConversationItemsAdd to an unknown conversation")
	})

	// A turn holds the conversation from its create to its terminal
	// commit, which appends its items atomically and frees it.
	t.Run("TurnLocksAndTerminalCommitAppends", func(t *testing.T) {
		t.Parallel()
		b, cs := setup(t)
		c := create(t, b, cs, 1)
		cur, _ := cs.ConversationGet(b.ctx, c.ID)
		p := ResponseParams(nil)
		p.Conversation = &store.ConversationTurn{ID: c.ID, Version: cur.Version}
		res, err := b.s.ResponseCreate(b.ctx, p)
		requireNoError(t, err, "ResponseCreate of a turn")
		got, _ := cs.ConversationGet(b.ctx, c.ID)
		if got.TurnResponseID != res.Response.ID {
			t.Fatalf("TurnResponseID = %q, want %s", got.TurnResponseID, res.Response.ID)
		}
		second := ResponseParams(nil)
		second.Conversation = &store.ConversationTurn{ID: c.ID, Version: cur.Version}
		_, err = b.s.ResponseCreate(b.ctx, second)
		requireConversationError(t, err, store.ConversationLocked, "second turn while the first is in flight")
		b.requireNothingCreated(t, second, "refused turn")

		// A step that is not terminal appends nothing; a failed commit of
		// the terminal step (stale epoch) appends nothing either.
		Commit(b.ctx, t, b.s, p.RunID, nil)
		fin := NextCommit(b.ctx, t, b.s, p.RunID, &CommitOpts{Status: store.StatusCompleted})
		fin.Release = true
		fin.Conversation = &store.ConversationAppend{ID: c.ID, Items: convItems("turn", 3)}
		// An append or pending calls on a commit that does not finish the
		// response are refused, nothing written: the append ends the turn.
		for name, mut := range map[string]func(*store.CommitParams){
			"append":        func(q *store.CommitParams) { q.Conversation = fin.Conversation },
			"pending calls": func(q *store.CommitParams) { q.PendingCalls = []string{"call_x"} },
		} {
			q := NextCommit(b.ctx, t, b.s, p.RunID, nil)
			mut(q)
			if _, err := b.s.Commit(b.ctx, q); err == nil {
				t.Fatalf("a commit that is not terminal with %s succeeded", name)
			}
			if got, _ := cs.ConversationGet(b.ctx, c.ID); got.TurnResponseID != res.Response.ID {
				t.Fatalf("a refused commit with %s ended the turn: TurnResponseID %q", name, got.TurnResponseID)
			}
		}
		stale := *fin
		stale.Epoch--
		_, err = b.s.Commit(b.ctx, &stale)
		requireIs(t, err, store.ErrFenced, "terminal commit at a stale epoch")
		if got := allItems(t, b, cs, c.ID); !slices.Equal(got, []string{"first-0"}) {
			t.Fatalf("items after a refused terminal commit = %v", got)
		}
		_, err = b.s.Commit(b.ctx, fin)
		requireNoError(t, err, "terminal commit")
		if got := allItems(t, b, cs, c.ID); !slices.Equal(got, []string{"first-0", "turn-0", "turn-1", "turn-2"}) {
			t.Fatalf("items after the turn = %v", got)
		}
		got, _ = cs.ConversationGet(b.ctx, c.ID)
		if got.TurnResponseID != "" || got.Version <= cur.Version {
			t.Fatalf("after the turn: TurnResponseID %q, version %d (was %d)", got.TurnResponseID, got.Version, cur.Version)
		}
		// The version read before the turn is stale now.
		third := ResponseParams(nil)
		third.Conversation = &store.ConversationTurn{ID: c.ID, Version: cur.Version}
		_, err = b.s.ResponseCreate(b.ctx, third)
		requireConversationError(t, err, store.ConversationChanged, "turn naming a stale version")
		b.requireNothingCreated(t, third, "stale turn")
		third.Conversation.Version = got.Version
		_, err = b.s.ResponseCreate(b.ctx, third)
		requireNoError(t, err, "next turn")
	})

	t.Run("DeletedTurnFreesConversation", func(t *testing.T) {
		t.Parallel()
		b, cs := setup(t)
		c := create(t, b, cs, 0)
		p := ResponseParams(nil)
		p.Conversation = &store.ConversationTurn{ID: c.ID}
		_, err := b.s.ResponseCreate(b.ctx, p)
		requireNoError(t, err, "ResponseCreate of a turn")
		requireNoError(t, b.s.ResponseDelete(b.ctx, p.Response.ID), "ResponseDelete")
		next := ResponseParams(nil)
		next.Conversation = &store.ConversationTurn{ID: c.ID}
		_, err = b.s.ResponseCreate(b.ctx, next)
		requireNoError(t, err, "turn after the holder was deleted")
	})

	t.Run("TurnOfUnknownConversation", func(t *testing.T) {
		t.Parallel()
		b, _ := setup(t)
		p := ResponseParams(nil)
		p.Conversation = &store.ConversationTurn{ID: "conv_none"}
		_, err := b.s.ResponseCreate(b.ctx, p)
		requireConversationError(t, err, store.ConversationGone, "turn of an unknown conversation")
		b.requireNothingCreated(t, p, "turn of an unknown conversation")
	})

	// A conversation deleted during a turn: the turn finishes, its append
	// is skipped.
	t.Run("AppendToDeletedConversationIsSkipped", func(t *testing.T) {
		t.Parallel()
		b, cs := setup(t)
		c := create(t, b, cs, 0)
		p := ResponseParams(nil)
		p.Conversation = &store.ConversationTurn{ID: c.ID}
		_, err := b.s.ResponseCreate(b.ctx, p)
		requireNoError(t, err, "ResponseCreate of a turn")
		requireNoError(t, cs.ConversationDelete(b.ctx, c.ID), "ConversationDelete")
		fin := NextCommit(b.ctx, t, b.s, p.RunID, &CommitOpts{Status: store.StatusCompleted})
		fin.Conversation = &store.ConversationAppend{ID: c.ID, Items: convItems("turn", 2)}
		_, err = b.s.Commit(b.ctx, fin)
		requireNoError(t, err, "terminal commit after the conversation was deleted")
		_, err = cs.ConversationGet(b.ctx, c.ID)
		requireIs(t, err, store.ErrNotFound, "ConversationGet")
	})

	// Concurrent turns on one conversation: exactly one is created.
	t.Run("ConcurrentTurnsOneWins", func(t *testing.T) {
		t.Parallel()
		b, cs := setup(t)
		c := create(t, b, cs, 0)
		const n = 6
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				p := ResponseParams(nil)
				p.Conversation = &store.ConversationTurn{ID: c.ID}
				_, errs[i] = b.s.ResponseCreate(b.ctx, p)
			})
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
				continue
			}
			requireConversationError(t, err, store.ConversationLocked, "a losing turn")
		}
		if won != 1 {
			t.Fatalf("%d turns created, want 1 (errors %v)", won, errs)
		}
	})

	t.Run("PendingCalls", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		pr, ok := b.s.(store.PendingCallReader)
		if !ok {
			t.Skipf("%T does not implement store.PendingCallReader", b.s)
		}
		p := ResponseParams(&ResponseOpts{Owner: "alice"})
		_, err := b.s.ResponseCreate(b.ctx, p)
		requireNoError(t, err, "ResponseCreate")
		fin := NextCommit(b.ctx, t, b.s, p.RunID, &CommitOpts{Status: store.StatusCompleted})
		fin.PendingCalls = []string{"call_a", "call_b", "call_a"} // a call id twice must not fail the commit
		_, err = b.s.Commit(b.ctx, fin)
		requireNoError(t, err, "commit with pending calls")
		for _, call := range fin.PendingCalls {
			id, err := pr.PendingCallGet(b.ctx, "alice", call)
			requireNoError(t, err, "PendingCallGet "+call)
			if id != p.Response.ID {
				t.Fatalf("PendingCallGet(%s) = %s, want %s", call, id, p.Response.ID)
			}
		}
		_, err = pr.PendingCallGet(b.ctx, "bob", "call_a")
		requireIs(t, err, store.ErrNotFound, "PendingCallGet of another owner")
		_, err = pr.PendingCallGet(b.ctx, "alice", "call_none")
		requireIs(t, err, store.ErrNotFound, "PendingCallGet of an unknown call")
		requireNoError(t, b.s.ResponseDelete(b.ctx, p.Response.ID), "ResponseDelete")
		_, err = pr.PendingCallGet(b.ctx, "alice", "call_a")
		requireIs(t, err, store.ErrNotFound, "PendingCallGet after the response was deleted")
	})
}
