package storetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/superstep/superstep/store"
)

// longSnapshot is a Response object of about 20 KiB whose output text is
// text (JSON-encoded), at status.
func longSnapshot(id string, status store.Status, text []byte) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"response","status":%q,"output":[{"content":[{"text":%s}]}]}`, id, status, text)
}

// lifecycle is the payload of a response.* event carrying snapshot, as the
// Responses API writes it.
func lifecycle(typ string, seq int64, snapshot []byte) []byte {
	return fmt.Appendf(nil, `{"type":%q,"sequence_number":%d,"response":%s}`, typ, seq, snapshot)
}

// testLongSnapshot: a long snapshot reads back as written, whether its
// write carries it in a lifecycle event (a backend may store it by
// reference to that event, schema version 15) or not, through every read
// of a response (ResponseCreate's result, ResponseGet, ResponseListByRun,
// ResponseCancel), across a reopen, with the events unchanged.
func testLongSnapshot(t *testing.T, h Harness) {
	t.Parallel()
	text, _ := json.Marshal(strings.Repeat("a \"long\" <reply> & more\n", 800))

	t.Run("CarriedByLifecycleEvents", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		p := ResponseParams(nil)
		id := p.Response.ID
		created := longSnapshot(id, store.StatusInProgress, text)
		p.Response.Snapshot = created
		p.Events = []store.EventInput{{Seq: 0, Type: "response.created", Payload: lifecycle("response.created", 0, created)}}
		res, err := b.s.ResponseCreate(b.ctx, p)
		requireNoError(t, err, "ResponseCreate")
		requireSnapshot(t, res.Response, created, "ResponseCreate's result")
		requireSnapshots(t, b, p.RunID, id, created, "after create")

		// A commit that keeps the snapshot (nil), then the terminal one:
		// the text in five events (shared in the record) and the
		// snapshot in the last.
		keep := NextCommit(b.ctx, t, b.s, p.RunID, nil)
		keep.Snapshot = nil
		_, err = b.s.Commit(b.ctx, keep)
		requireNoError(t, err, "Commit without a snapshot")
		requireSnapshots(t, b, p.RunID, id, created, "after a commit that keeps the snapshot")

		done := longSnapshot(id, store.StatusCompleted, text)
		c := NextCommit(b.ctx, t, b.s, p.RunID, &CommitOpts{Status: store.StatusCompleted, NoEvents: true})
		seq := int64(3)
		for _, ev := range []struct{ typ, payload string }{
			{"response.output_text.delta", `{"type":"response.output_text.delta","delta":` + string(text) + `}`},
			{"response.output_text.done", `{"type":"response.output_text.done","text":` + string(text) + `}`},
			{"response.output_item.done", `{"type":"response.output_item.done","item":{"content":[{"text":` + string(text) + `}]}}`},
		} {
			c.Events = append(c.Events, store.EventInput{Seq: seq, Type: ev.typ, Payload: []byte(ev.payload)})
			seq++
		}
		c.Events = append(c.Events, store.EventInput{Seq: seq, Type: "response.completed", Payload: lifecycle("response.completed", seq, done)})
		c.Snapshot = done
		_, err = b.s.Commit(b.ctx, c)
		requireNoError(t, err, "terminal Commit")
		requireSnapshots(t, b, p.RunID, id, done, "after the terminal commit")
		evs := ListAll(b.ctx, t, b.s, id)
		if len(evs) != int(seq)+1 || !bytes.Equal(evs[0].Payload, p.Events[0].Payload) {
			t.Fatalf("%d events after the terminal commit, want %d, the first as written", len(evs), seq+1)
		}
		for i, ev := range c.Events {
			if got := evs[ev.Seq]; got.Type != ev.Type || !bytes.Equal(got.Payload, ev.Payload) {
				t.Fatalf("event %d (%d of the commit) reads %s, %d bytes; want %s, %d bytes", ev.Seq, i, got.Type, len(got.Payload),
					ev.Type, len(ev.Payload))
			}
		}
		got, err := b.s.ResponseCancel(b.ctx, id)
		requireNoError(t, err, "ResponseCancel of a completed response")
		requireSnapshot(t, got, done, "ResponseCancel of a completed response")

		h.reopen(t, b)
		requireSnapshots(t, b, p.RunID, id, done, "after a reopen")
	})

	t.Run("CancelledWhileLong", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		p := ResponseParams(nil)
		created := longSnapshot(p.Response.ID, store.StatusInProgress, text)
		p.Response.Snapshot = created
		p.Events = []store.EventInput{{Seq: 0, Type: "response.created", Payload: lifecycle("response.created", 0, created)}}
		_, err := b.s.ResponseCreate(b.ctx, p)
		requireNoError(t, err, "ResponseCreate")
		got, err := b.s.ResponseCancel(b.ctx, p.Response.ID)
		requireNoError(t, err, "ResponseCancel")
		requireSnapshot(t, got, created, "ResponseCancel's result")
		if got.Status != store.StatusCancelled || !got.CancelRequested {
			t.Fatalf("after ResponseCancel: status %s, cancel requested %v", got.Status, got.CancelRequested)
		}
	})

	t.Run("NotCarried", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		// Long snapshots no event holds as a lifecycle event does: in
		// none of the payloads, or in one but not at its end.
		p := ResponseParams(nil)
		created := longSnapshot(p.Response.ID, store.StatusInProgress, text)
		p.Response.Snapshot = created
		p.Events[0].Payload = fmt.Appendf(nil, `{"type":"response.created","response":%s,"after":1}`, created)
		_, err := b.s.ResponseCreate(b.ctx, p)
		requireNoError(t, err, "ResponseCreate")
		requireSnapshots(t, b, p.RunID, p.Response.ID, created, "a snapshot inside an event")
		c := NextCommit(b.ctx, t, b.s, p.RunID, nil)
		c.Snapshot = longSnapshot(p.Response.ID, store.StatusInProgress, append(text[:len(text)-1:len(text)-1], 'x', '"'))
		_, err = b.s.Commit(b.ctx, c)
		requireNoError(t, err, "Commit")
		requireSnapshots(t, b, p.RunID, p.Response.ID, c.Snapshot, "a snapshot no event holds")
	})
}

// requireSnapshots fails unless response id of run runID reads snapshot
// through ResponseGet and ResponseListByRun.
func requireSnapshots(t *testing.T, b *bundle, runID, id string, snapshot []byte, what string) {
	t.Helper()
	got, err := b.s.ResponseGet(b.ctx, id)
	requireNoError(t, err, "ResponseGet "+what)
	requireSnapshot(t, got, snapshot, "ResponseGet "+what)
	list, err := b.s.ResponseListByRun(b.ctx, runID)
	requireNoError(t, err, "ResponseListByRun "+what)
	if len(list) != 1 {
		t.Fatalf("ResponseListByRun %s: %d responses, want 1", what, len(list))
	}
	requireSnapshot(t, list[0], snapshot, "ResponseListByRun "+what)
}

func requireSnapshot(t *testing.T, r *store.Response, want []byte, what string) {
	t.Helper()
	if !bytes.Equal(r.Snapshot, want) {
		t.Fatalf("%s: snapshot of %d bytes (%.40q...), want the %d written", what, len(r.Snapshot), r.Snapshot, len(want))
	}
}
