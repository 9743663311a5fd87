package eventrec

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/superstep/superstep/store"
)

// whole returns evs with each payload made whole (its splices in place),
// as a store's readers get them.
func whole(evs []store.EventInput) []store.EventInput {
	out := make([]store.EventInput, len(evs))
	for i := range evs {
		out[i] = store.EventInput{Seq: evs[i].Seq, Type: evs[i].Type, Payload: evs[i].Payload}
		if len(evs[i].Splices) > 0 {
			out[i].Payload = evs[i].AppendPayload(nil)
		}
	}
	return out
}

// replyFrames returns the events of one committed reply of text as the
// projector writes them: the text spliced into the delta and the three
// done events (one shared encoding), then the completed response holding
// it unspliced.
func replyFrames(text string) []store.EventInput {
	q := []byte(quoted(text))
	sp := func(seq int64, typ, head, tail string) store.EventInput {
		return store.EventInput{Seq: seq, Type: typ, Payload: []byte(head + tail), Splices: []store.Splice{{At: len(head), Bytes: q}}}
	}
	return []store.EventInput{
		{Seq: 0, Type: "response.output_item.added", Payload: []byte(`{"type":"response.output_item.added"}`)},
		sp(1, "response.output_text.delta", `{"type":"response.output_text.delta","delta":`, `,"logprobs":[]}`),
		sp(2, "response.output_text.done", `{"type":"response.output_text.done","text":`, `,"logprobs":[]}`),
		sp(3, "response.content_part.done", `{"type":"response.content_part.done","part":{"type":"output_text","text":`, `}}`),
		sp(4, "response.output_item.done", `{"type":"response.output_item.done","item":{"content":[{"text":`, `}]}}`),
		{Seq: 5, Type: "response.completed", Payload: []byte(`{"type":"response.completed","response":{"output":[{"text":` + string(q) + `}]}}`)},
	}
}

// TestEncodeSpliced: a reply whose frames share its text through splices
// reads back whole, and its record holds the text once, as the record of
// the same frames made whole does (the completed response, not spliced,
// refers to the first splice's bytes).
func TestEncodeSpliced(t *testing.T) {
	text := strings.Repeat("the reply, \"quoted\" <b>. ", 4000) // ~100 KB
	evs := replyFrames(text)
	rec := encode(evs)
	decodeAll(t, rec, whole(evs))
	if n := bytes.Count(rec, []byte("the reply")); n != 4000 {
		t.Errorf("the record holds the text's phrase %d times, want 4000 (the text once)", n)
	}
	if plainRec := encode(whole(evs)); len(rec) > len(plainRec)+64 {
		t.Errorf("spliced record %d bytes, the whole frames' record %d", len(rec), len(plainRec))
	}
	// The compressed path (Encode) too.
	decodeAll(t, Encode(evs), whole(evs))
}

// TestEncodeSplicedAlone: one spliced event, nothing to refer to, is the
// plain format, byte for byte the record of its whole payload; a splice
// repeated inside one event is written once.
func TestEncodeSplicedAlone(t *testing.T) {
	q := []byte(quoted(strings.Repeat("x", 5000)))
	one := []store.EventInput{{Seq: 0, Type: "t", Payload: []byte(`{"a":,"b":1}`), Splices: []store.Splice{{At: 5, Bytes: q}}}}
	if got, want := encode(one), encode(whole(one)); !bytes.Equal(got, want) {
		t.Fatalf("alone: record differs from the whole payload's (%d vs %d bytes)", len(got), len(want))
	}
	twice := []store.EventInput{{Seq: 0, Type: "t", Payload: []byte(`{"a":,"b":}`),
		Splices: []store.Splice{{At: 5, Bytes: q}, {At: 10, Bytes: q}}}}
	rec := encode(twice)
	decodeAll(t, rec, whole(twice))
	if len(rec) > len(q)+64 {
		t.Errorf("a splice twice in one event: record of %d bytes, want about %d", len(rec), len(q))
	}
}

// TestEncodeSplicedRandom: random events, some with splices of shared or
// own bytes (short and long, at any offset, adjacent), read back whole.
func TestEncodeSplicedRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		evs := randomSpliced(r)
		decodeAll(t, encode(evs), whole(evs))
		decodeAll(t, Encode(evs), whole(evs))
	}
}

func randomSpliced(r *rand.Rand) []store.EventInput {
	pool := make([][]byte, 1+r.IntN(3))
	for i := range pool {
		n := []int{10, MinShared - 1, MinShared, 3000, 20000}[r.IntN(5)]
		pool[i] = []byte(quoted(strings.Repeat(string(rune('a'+i)), n)))
	}
	evs := make([]store.EventInput, 1+r.IntN(8))
	for i := range evs {
		rest := []byte(strings.Repeat("{}", r.IntN(20)))
		var sps []store.Splice
		at := 0
		for range r.IntN(4) {
			at += r.IntN(len(rest) - at + 1)
			sps = append(sps, store.Splice{At: at, Bytes: pool[r.IntN(len(pool))]})
		}
		if r.IntN(4) == 0 && len(pool[0]) >= MinShared {
			// The string unspliced, as a completed response holds it.
			rest = append(append([]byte(`{"x":`), pool[0]...), '}')
			sps = nil
		}
		evs[i] = store.EventInput{Seq: int64(i), Type: "t", Payload: rest, Splices: sps}
	}
	return evs
}

// FuzzEncodeSpliced: any events and splices read back whole.
func FuzzEncodeSpliced(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Fuzz(func(t *testing.T, a, b uint64) {
		evs := randomSpliced(rand.New(rand.NewPCG(a, b)))
		decodeAll(t, Encode(evs), whole(evs))
	})
}
