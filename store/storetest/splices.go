package storetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/superstep/superstep/store"
)

// splicedReply returns the events of a reply whose text (JSON-encoded,
// long) the item events share through splices, as the host writes them,
// from seq on, and the completed response holding it unspliced with its
// snapshot.
func splicedReply(id string, seq int64, text []byte) ([]store.EventInput, []byte) {
	sp := func(typ, head, tail string) store.EventInput {
		h := fmt.Sprintf(`{"type":%q,"sequence_number":%d,%s`, typ, seq, head)
		ev := store.EventInput{Seq: seq, Type: typ, Payload: []byte(h + tail), Splices: []store.Splice{{At: len(h), Bytes: text}}}
		seq++
		return ev
	}
	evs := []store.EventInput{
		sp("response.output_text.delta", `"delta":`, `,"logprobs":[]}`),
		sp("response.output_text.done", `"text":`, `,"logprobs":[]}`),
		sp("response.content_part.done", `"part":{"type":"output_text","text":`, `}}`),
	}
	// Two splices in one event, the second at the end of the rest.
	h := fmt.Sprintf(`{"type":"response.output_item.done","sequence_number":%d,"item":{"content":[{"text":`, seq)
	mid := `},{"text":`
	evs = append(evs, store.EventInput{Seq: seq, Type: "response.output_item.done", Payload: []byte(h + mid + `}]}}`),
		Splices: []store.Splice{{At: len(h), Bytes: text}, {At: len(h) + len(mid), Bytes: text}}})
	seq++
	snap := longSnapshot(id, store.StatusCompleted, text)
	evs = append(evs, store.EventInput{Seq: seq, Type: "response.completed", Payload: lifecycle("response.completed", seq, snap)})
	return evs, snap
}

// requireWhole checks that the response's events from evs[0].Seq on read
// back as evs made whole (their splices in place).
func requireWhole(t *testing.T, b *bundle, responseID string, evs []store.EventInput, what string) {
	t.Helper()
	got := ListAll(b.ctx, t, b.s, responseID)
	for _, want := range evs {
		if want.Seq >= int64(len(got)) {
			t.Fatalf("%s: event %d missing (%d events)", what, want.Seq, len(got))
		}
		g := got[want.Seq]
		if g.Type != want.Type || !bytes.Equal(g.Payload, want.AppendPayload(nil)) {
			t.Fatalf("%s: event %d reads %s, %d bytes; want %s, %d bytes whole", what, want.Seq, g.Type, len(g.Payload),
				want.Type, want.Len())
		}
	}
}

// testSplicedEvents: events whose payloads hold splices (a long text the
// events of a commit share) are written and read back whole, by Commit,
// CreateCommit and EventAppend, across a reopen; the snapshot the
// completed event carries reads back too. Splices out of order or past
// the payload are refused before anything is written.
func testSplicedEvents(t *testing.T, h Harness) {
	t.Parallel()
	text, _ := json.Marshal(strings.Repeat("a spliced \"reply\" <b> & more\n", 2000)) // ~60 KB

	t.Run("Commit", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		p := NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted, NoEvents: true})
		p.Events, p.Snapshot = splicedReply(c.Response.ID, c.Response.NextSeq, text)
		_, err := b.s.Commit(b.ctx, p)
		requireNoError(t, err, "Commit")
		requireWhole(t, b, c.Response.ID, p.Events, "after the commit")
		resp, err := b.s.ResponseGet(b.ctx, c.Response.ID)
		requireNoError(t, err, "ResponseGet")
		requireSnapshot(t, resp, p.Snapshot, "ResponseGet")
		h.reopen(t, b)
		requireWhole(t, b, c.Response.ID, p.Events, "after a reopen")
	})

	t.Run("EventAppend", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		evs, _ := splicedReply(c.Response.ID, c.Response.NextSeq, text)
		p := &store.EventAppendParams{RunID: c.Run.ID, Epoch: c.Run.Lease.Epoch, ResponseID: c.Response.ID, Events: evs[:4]}
		requireNoError(t, b.s.EventAppend(b.ctx, p), "EventAppend")
		requireWhole(t, b, c.Response.ID, evs[:4], "after the append")
	})

	t.Run("CreateCommit", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		cc := createCommitter(t, b)
		cp, p := createCommitParams(0, store.StatusCompleted)
		p.Events, p.Snapshot = splicedReply(cp.Response.ID, 1, text)
		_, _, err := cc.CreateCommit(b.ctx, cp, p)
		requireNoError(t, err, "CreateCommit")
		requireWhole(t, b, cp.Response.ID, p.Events, "after CreateCommit")
	})

	t.Run("BadSplicesRefused", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		before := ReadRunState(b.ctx, t, b.s, c.Run.ID)
		for name, sps := range map[string][]store.Splice{
			"past the end": {{At: 1000, Bytes: text}},
			"out of order": {{At: 5, Bytes: text}, {At: 2, Bytes: text}},
			"negative":     {{At: -1, Bytes: text}},
		} {
			p := NextCommit(b.ctx, t, b.s, c.Run.ID, nil)
			p.Events[0].Splices = sps
			if _, err := b.s.Commit(b.ctx, p); err == nil {
				t.Fatalf("Commit with splices %s: no error", name)
			}
			a := appendParams(c, c.Response.NextSeq, 1)
			a.Events[0].Splices = sps
			if err := b.s.EventAppend(b.ctx, a); err == nil {
				t.Fatalf("EventAppend with splices %s: no error", name)
			}
		}
		requireSameState(t, ReadRunState(b.ctx, t, b.s, c.Run.ID), before, "after refused writes")
	})
}
