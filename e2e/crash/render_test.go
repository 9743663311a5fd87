package crash

import (
	"fmt"
	"strings"
	"testing"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/verify"
)

// ev builds a received event of type typ with payload fields.
func ev(seq int64, typ, fields string) verify.ReceivedEvent {
	data := fmt.Sprintf(`{"type":%q,"sequence_number":%d%s}`, typ, seq, fields)
	return verify.ReceivedEvent{Seq: seq, Type: typ, Data: []byte(data)}
}

// respOut is a response field with message items of texts.
func respOut(status string, texts ...string) string {
	items := make([]string, len(texts))
	for i, t := range texts {
		items[i] = fmt.Sprintf(`{"type":"message","content":[{"type":"output_text","text":%q}]}`, t)
	}
	return fmt.Sprintf(`,"response":{"status":%q,"output":[%s]}`, status, strings.Join(items, ","))
}

func msgItem(idx int, text string) string {
	return fmt.Sprintf(`,"output_index":%d,"item":{"type":"message","content":[{"type":"output_text","text":%q}]}`, idx, text)
}

func delta(idx int, d string) string { return fmt.Sprintf(`,"output_index":%d,"delta":%q`, idx, d) }

// A killed live superstep: "a b" streamed up to "a", a reset back to the
// committed output, then the re-run streams the whole item.
var resetStream = []verify.ReceivedEvent{
	ev(0, "response.created", respOut("queued")),
	ev(1, "response.in_progress", respOut("in_progress")),
	ev(2, "response.output_item.added", msgItem(0, "")),
	ev(3, "response.output_text.delta", delta(0, "a")),
	ev(4, "response.in_progress", respOut("in_progress")),
	ev(5, "response.output_item.added", msgItem(0, "")),
	ev(6, "response.output_text.delta", delta(0, "a")),
	ev(7, "response.output_text.delta", delta(0, " b")),
	ev(8, "response.output_item.done", msgItem(0, "a b")),
	ev(9, "response.completed", respOut("completed", "a b")),
}

// TestRender checks the live renderer on a stream with a reset, and that
// it fails the ways a broken host would: the reset missing (the re-run's
// deltas pile onto the voided ones), a re-run that streams only part of
// its item, a final output that differs from what was shown.
func TestRender(t *testing.T) {
	if err := render(resetStream); err != nil {
		t.Fatalf("a correct stream with a reset: %v", err)
	}
	noReset := append(append([]verify.ReceivedEvent(nil), resetStream[:4]...), resetStream[6:]...)
	if err := render(noReset); err == nil {
		t.Error("a stream whose re-run items follow the voided deltas without a reset passed")
	}
	partial := append(append([]verify.ReceivedEvent(nil), resetStream[:6]...), resetStream[7:]...)
	if err := render(partial); err == nil {
		t.Error("a re-run whose deltas miss the first token passed")
	}
	wrongEnd := append(append([]verify.ReceivedEvent(nil), resetStream[:9]...), ev(9, "response.completed", respOut("completed", "a c")))
	if err := render(wrongEnd); err == nil {
		t.Error("a final output differing from the rendered one passed")
	}
}

// TestLogResets counts resets and those that voided streamed items.
func TestLogResets(t *testing.T) {
	var log []store.Event
	for _, e := range resetStream {
		log = append(log, store.Event{Seq: e.Seq, Type: e.Type, Payload: e.Data})
	}
	if r, v := logResets(log); r != 1 || v != 1 {
		t.Errorf("logResets = %d resets, %d voiding; want 1, 1", r, v)
	}
	view := verify.ClientView{Events: resetStream, ResumedAt: []int64{3}}
	if !resumedBeforeReset(view) {
		t.Error("a client that resumed after seq 3 and got the reset at 4: not counted")
	}
	view.ResumedAt = []int64{5}
	if resumedBeforeReset(view) {
		t.Error("a client that got the reset before it resumed: counted")
	}
}
