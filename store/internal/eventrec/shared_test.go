package eventrec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/superstep/superstep/store"
)

// decodeAll decodes a record of len(want) events and checks them against
// want byte for byte, nil payloads included; it also reads each event
// alone after Skip, as a reader starting inside the record does.
func decodeAll(t testing.TB, data []byte, want []store.EventInput) {
	t.Helper()
	got, err := Decode(data, int64(len(want)))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	for i, ev := range got {
		if ev.Type != want[i].Type || !bytes.Equal(ev.Payload, want[i].Payload) || (ev.Payload == nil) != (want[i].Payload == nil) {
			t.Fatalf("event %d: got %q (%d bytes, nil %v), want %q (%d bytes, nil %v)", i, ev.Type, len(ev.Payload),
				ev.Payload == nil, want[i].Type, len(want[i].Payload), want[i].Payload == nil)
		}
		if cap(ev.Payload) != len(ev.Payload) {
			t.Fatalf("event %d: payload capacity %d past its length %d", i, cap(ev.Payload), len(ev.Payload))
		}
	}
	for i := range want {
		d := NewDecoder(data)
		if err := d.Skip(int64(i)); err != nil {
			t.Fatalf("Skip(%d): %v", i, err)
		}
		ev, ok, err := d.Next()
		if err != nil || !ok || !bytes.Equal(ev.Payload, want[i].Payload) {
			t.Fatalf("event %d after Skip: ok=%v err=%v, %d bytes, want %d", i, ok, err, len(ev.Payload), len(want[i].Payload))
		}
	}
}

func events(payloads ...string) []store.EventInput {
	evs := make([]store.EventInput, len(payloads))
	for i, p := range payloads {
		evs[i] = store.EventInput{Seq: int64(i), Type: fmt.Sprintf("t%d", i), Payload: []byte(p)}
	}
	return evs
}

// quoted returns s as a JSON string, escapes included.
func quoted(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestEncodeShares: the events of a committed reply (its text in the delta,
// the done events and the completed response) store the text once.
func TestEncodeShares(t *testing.T) {
	text := quoted(strings.Repeat("a \"quoted\" <word>\\ and\nline ", 4000)) // ~120 KB with escapes
	evs := events(
		`{"type":"response.created","response":{"output":[]}}`,
		`{"type":"response.output_text.delta","delta":`+text+`,"sequence_number":1}`,
		`{"type":"response.output_text.done","text":`+text+`}`,
		`{"type":"response.content_part.done","part":{"type":"output_text","text":`+text+`}}`,
		`{"type":"response.completed","response":{"output":[{"content":[{"text":`+text+`}]}],"copy":`+text+`}}`,
	)
	evs = append(evs, store.EventInput{Type: "nil"})
	data := encode(evs)
	if len(data) > len(text)+2000 {
		t.Fatalf("record of 6 copies of a %d-byte string is %d bytes", len(text), len(data))
	}
	if !bytes.HasPrefix(data, sharedMarker[:]) {
		t.Fatalf("record starts % x, want the marker", data[:2])
	}
	decodeAll(t, data, evs)
}

// TestEncodePlain: a record with nothing to share is the plain format,
// byte for byte (short payloads, long ones without repeats, repeats of
// strings shorter than MinShared).
func TestEncodePlain(t *testing.T) {
	long := quoted(strings.Repeat("x", MinShared))
	justShort := quoted(strings.Repeat("y", MinShared-3)) // MinShared-1 bytes with its quotes
	cases := map[string][]store.EventInput{
		"Short":           events(`{"a":1}`, `{"b":"c"}`),
		"LongOnce":        events(`{"a":`+long+`}`, `{"b":1}`, strings.Repeat("z", 5000)),
		"RepeatBelowMin":  events(`{"a":`+justShort+`,"pad":"`+strings.Repeat("p", 2000)+`x"}`, `{"b":`+justShort+`}`),
		"UnclosedString":  events(`{"a":"`+strings.Repeat("u", 3000), `{"a":"`+strings.Repeat("u", 3000)),
		"EscapedQuoteEnd": events(`"`+strings.Repeat("e", 2000)+`\"`, `"`+strings.Repeat("e", 2000)+`\"`),
	}
	for name, evs := range cases {
		t.Run(name, func(t *testing.T) {
			var want []byte
			for _, ev := range evs {
				want = Append(want, ev.Type, ev.Payload)
			}
			if got := encode(evs); !bytes.Equal(got, want) {
				t.Fatalf("Encode differs from the plain format (%d vs %d bytes)", len(got), len(want))
			}
		})
	}
}

// TestEncodeStringBounds: the scanner finds a string's end past escaped
// quotes and backslashes, so a repeat is shared whole and a string that
// differs only after an escaped quote is not taken for it.
func TestEncodeStringBounds(t *testing.T) {
	body := strings.Repeat("b", 1500)
	s1 := `"` + body + `\\\"tail1\\"`
	s2 := `"` + body + `\\\"tail2\\"`
	evs := events(`{"a":`+s1+`}`, `{"b":`+s2+`}`, `{"c":`+s1+`,"d":`+s1+`}`)
	data := encode(evs)
	decodeAll(t, data, evs)
	// s1 stored once, s2 once (not shared with s1), the third event's two
	// copies refer to the first.
	if max := 2*len(s1) + 200; len(data) > max {
		t.Fatalf("record is %d bytes, want at most %d", len(data), max)
	}
	if bytes.Count(data, []byte("tail1")) != 1 || bytes.Count(data, []byte("tail2")) != 1 {
		t.Fatalf("tails stored %d and %d times, want once each", bytes.Count(data, []byte("tail1")), bytes.Count(data, []byte("tail2")))
	}
}

// TestEncodeRepeatInOnePayload: a string repeated inside the first payload
// that has it is shared too.
func TestEncodeRepeatInOnePayload(t *testing.T) {
	s := quoted(strings.Repeat("r", 3000))
	evs := events(`[`+s+`,`+s+`,`+s+`]`, `{}`)
	data := encode(evs)
	if len(data) > len(s)+100 {
		t.Fatalf("record is %d bytes for a %d-byte string three times", len(data), len(s))
	}
	decodeAll(t, data, evs)
}

func TestEncodeRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		evs := randomEvents(r)
		decodeAll(t, Encode(evs), evs)
	}
}

// randomEvents makes events whose payloads mix short and long strings
// drawn from a small set, so that repeats are common, with escapes,
// unbalanced quotes and nil payloads.
func randomEvents(r *rand.Rand) []store.EventInput {
	pieces := []string{`"`, `\`, `\"`, `\\`, `{"k":`, `,`, `}`, `x`, "é", "\x00"}
	var strs []string
	for range 4 {
		n := MinShared - 4 + r.IntN(20)
		if r.IntN(3) == 0 {
			n = r.IntN(3000)
		}
		var b strings.Builder
		b.WriteByte('"')
		for b.Len() < n {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		b.WriteByte('"')
		strs = append(strs, b.String())
	}
	evs := make([]store.EventInput, r.IntN(8))
	for i := range evs {
		evs[i].Type = fmt.Sprint(r.IntN(3))
		if r.IntN(6) == 0 {
			continue
		}
		var p []byte
		for range r.IntN(6) {
			if r.IntN(2) == 0 {
				p = append(p, strs[r.IntN(len(strs))]...)
			} else {
				p = append(p, pieces[r.IntN(len(pieces))]...)
			}
		}
		if p == nil {
			p = []byte{}
		}
		evs[i].Payload = p
	}
	return evs
}

// TestDecodeRejectsBadReferences: damaged records with references are
// ErrCorrupt, never a panic nor a read outside the record.
func TestDecodeRejectsBadReferences(t *testing.T) {
	s := quoted(strings.Repeat("q", 2000))
	evs := events(`[`+s+`]`, `[`+s+`]`)
	good := encode(evs)
	if !bytes.HasPrefix(good, []byte{0x80, 0x00, 1, 1}) {
		t.Fatalf("header % x, want marker, 1 event, index 1", good[:4])
	}
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	// The second event's encoded form: after its type "t1" and its padded
	// length (2 bytes): lit "[" then the reference.
	form := bytes.LastIndex(good, []byte("t1")) + 2 + 2
	cases := map[string][]byte{
		"NoEventsListed":  mod(func(b []byte) []byte { b[2] = 0; return b }),
		"IndexPastRecord": mod(func(b []byte) []byte { b[3] = 5; return b }),
		"TruncatedHeader": {0x80, 0x00, 2, 1},
		"RefPastItself":   mod(func(b []byte) []byte { b[form+2] = 0x7f; return b }),
		"TruncatedForm":   good[:len(good)-3],
		"NilListed":       Append([]byte{0x80, 0x00, 1, 0}, "t", nil),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Decode(data, 2)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode: %v, want ErrCorrupt", err)
			}
			t.Log(err)
		})
	}
}

func FuzzDecode(f *testing.F) {
	s := quoted(strings.Repeat("f", MinShared))
	f.Add(Encode(events(`[`+s+`]`, `{"a":`+s+`}`)), int64(2))
	f.Add(Encode(events(`x`, `y`)), int64(2))
	f.Add([]byte{0x80, 0x00, 1, 0, 1, 't', 5, 2, 'a', 0, 0}, int64(1))
	f.Add(Encode(benchRecords()["W3"][:100]), int64(100))
	f.Fuzz(func(t *testing.T, data []byte, count int64) {
		evs, err := Decode(data, min(max(count, 0), 64))
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error not ErrCorrupt: %v", err)
		}
		for _, ev := range evs {
			if len(ev.Payload) > maxExpanded {
				t.Fatalf("payload of %d bytes", len(ev.Payload))
			}
		}
		d := NewDecoder(data)
		_ = d.Skip(1)
		d.Next()
	})
}

// FuzzRoundTrip: any list of events decodes to itself: random mixes of
// long and short strings, and the fuzzer's bytes, alone and made into a
// long string that repeats, cut at its bytes of 0xff into payloads.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint64(2), []byte(`{"a":"b\"c"}`))
	f.Add(uint64(7), uint64(0), []byte("\"\\\xff\"x"))
	f.Fuzz(func(t *testing.T, a, b uint64, data []byte) {
		evs := randomEvents(rand.New(rand.NewPCG(a, b)))
		decodeAll(t, Encode(evs), evs)
		if len(data) == 0 {
			return
		}
		long := append([]byte{'"'}, bytes.Repeat(data, MinShared/len(data)+1)...)
		long = append(long, '"')
		var ps [][]byte
		for _, p := range [][]byte{data, long, append(bytes.Clone(long), data...), append(bytes.Clone(data), long...)} {
			ps = append(ps, bytes.Split(p, []byte{0xff})...)
		}
		evs = evs[:0]
		for i, p := range ps {
			evs = append(evs, store.EventInput{Seq: int64(i), Type: "f", Payload: p})
		}
		decodeAll(t, Encode(evs), evs)
	})
}
