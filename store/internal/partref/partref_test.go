package partref

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/superstep/superstep/internal/jsonstr"
	"github.com/superstep/superstep/store"
)

// text is a long input with characters encoding/json escapes (<, >, &,
// quotes, a newline) and one it does not (é).
var text = strings.Repeat(`He said "<b>&</b>" é`+"\n", 2000)

func checkpointHeader(input []byte) []byte {
	return append(append([]byte(`{"v":1,"queue":[{"to":"start","msg":{"t":"string","v":`), input...), `}}]}`...)
}

func TestEncode(t *testing.T) {
	goStyle := jsonstr.Append(nil, text)
	var raw bytes.Buffer // as a JavaScript client writes it: no HTML escapes
	enc := json.NewEncoder(&raw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]string{"input": text}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name          string
		part, request []byte
		ref           bool
		maxStored     int
	}{
		{"same bytes", checkpointHeader(goStyle), append(append([]byte(`{"model":"m","input":`), goStyle...), '}'), true, 200},
		{"escaped otherwise", checkpointHeader(goStyle), raw.Bytes(), true, 200},
		{"not in the request", checkpointHeader(goStyle), []byte(`{"model":"m","input":"hi"}`), false, 0},
		{"other text", checkpointHeader(jsonstr.Append(nil, strings.ToUpper(text))), raw.Bytes(), false, 0},
		{"short part", []byte(`{"v":"` + strings.Repeat("a", 5000) + `"}`), []byte(`{"input":"` + strings.Repeat("a", 5000) + `"}`), false, 0},
		{"Magic, short", []byte(Magic + "x"), nil, true, 100},
		{"Magic, long", append([]byte(Magic), checkpointHeader(goStyle)...), raw.Bytes(), true, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stored := Encode(c.part, c.request, "resp_1")
			id, ref, err := Owner(stored)
			if err != nil || ref != c.ref || (ref && id != "resp_1") {
				t.Fatalf("Owner: %q, %v, %v; want a reference %v", id, ref, err, c.ref)
			}
			if !ref && !bytes.Equal(stored, c.part) {
				t.Fatalf("not a reference, yet stored differs from the part")
			}
			if ref && len(stored) > c.maxStored {
				t.Fatalf("stored %d bytes for a %d-byte part, want at most %d", len(stored), len(c.part), c.maxStored)
			}
			got, err := Resolve(stored, c.request)
			if err != nil || !bytes.Equal(got, c.part) {
				t.Fatalf("Resolve: %d bytes (%v), want the part's %d", len(got), err, len(c.part))
			}
		})
	}
}

func TestResolveCorrupt(t *testing.T) {
	request := []byte(`{"input":"` + strings.Repeat("a", MinBytes) + `"}`)
	good := Encode(checkpointHeader(jsonstr.Append(nil, strings.Repeat("a", MinBytes))), request, "resp_1")
	if _, ref, _ := Owner(good); !ref {
		t.Fatal("want a reference")
	}
	for _, c := range []struct {
		name    string
		stored  []byte
		request []byte
	}{
		{"truncated", good[:len(good)-3], request},
		{"shorter request", good, request[:len(request)/2]},
		{"no id", []byte(Magic), request},
		{"bad kind", append(Encode([]byte(Magic), nil, "r"), 'X', 1), request},
		{"not a string", good, bytes.Repeat([]byte("x"), len(request))},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Resolve(c.stored, c.request)
			if c.name == "not a string" {
				// Verbatim segments copy whatever is there; the store's
				// hash check catches those.
				if err == nil && bytes.Equal(got, checkpointHeader(jsonstr.Append(nil, strings.Repeat("a", MinBytes)))) {
					t.Fatal("resolved to the part against other bytes")
				}
				return
			}
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("Resolve: %v, want store.ErrCorrupt", err)
			}
		})
	}
}

// FuzzEncode: whatever the part and the request, what Encode stores
// resolves to the part, and Resolve never panics on stored bytes.
func FuzzEncode(f *testing.F) {
	long := strings.Repeat("é<a>", MinString/5)
	f.Add(checkpointHeader(jsonstr.Append(nil, long)), []byte(`{"input":"`+long+`"}`), []byte(nil))
	f.Add([]byte(Magic), []byte(`{}`), []byte(Magic+"\x01rL\x05"))
	f.Fuzz(func(t *testing.T, part, request, junk []byte) {
		if len(part) < MinBytes && len(part) > 64 {
			// Make long parts likely: repeat the fuzzer's bytes.
			part = bytes.Repeat(part, MinBytes/len(part)+1)
			request = append(append([]byte(`{"input":`), part...), '}')
		}
		stored := Encode(part, request, "resp_x")
		got, err := Resolve(stored, request)
		if err != nil || !bytes.Equal(got, part) {
			t.Fatalf("Resolve(Encode(part)): %d bytes (%v), want %d", len(got), err, len(part))
		}
		_, _ = Resolve(junk, request)
		_, _, _ = Owner(junk)
	})
}

// TestEncodesAs: encodesAs agrees with encoding the whole string at once,
// for strings longer than a chunk with multi-byte runes, invalid UTF-8 and
// U+2028 across chunk boundaries.
func TestEncodesAs(t *testing.T) {
	for _, s := range []string{
		"",
		"plain",
		strings.Repeat("é<\u2028>\xe2\x82", encodeChunk/3),
		strings.Repeat("a", encodeChunk-1) + "€" + strings.Repeat("b", encodeChunk),
		strings.Repeat("a", encodeChunk-1) + "\xe2\x82" + "c",
	} {
		whole := jsonstr.Append(nil, s)
		if !encodesAs(s, whole) {
			t.Errorf("encodesAs(%d-byte string, its encoding) is false", len(s))
		}
		if len(whole) > 3 {
			other := bytes.Clone(whole)
			other[len(other)/2]++
			if encodesAs(s, other) {
				t.Errorf("encodesAs(%d-byte string, another encoding) is true", len(s))
			}
		}
	}
}

// FuzzEncodesAs: encodesAs(s, tok) is whether jsonstr.Append(nil, s) is
// tok, for strings repeated past a chunk.
func FuzzEncodesAs(f *testing.F) {
	f.Add("é<\u2028>\xe2\x82", []byte(`"x"`), 3)
	f.Fuzz(func(t *testing.T, s string, tok []byte, flip int) {
		if len(s) > 0 {
			s = strings.Repeat(s, encodeChunk/len(s)+2)
		}
		whole := jsonstr.Append(nil, s)
		if !encodesAs(s, whole) {
			t.Fatal("false for its own encoding")
		}
		if flip > 0 && len(whole) > 0 {
			other := bytes.Clone(whole)
			other[flip%len(other)] ^= 1
			if encodesAs(s, other) != bytes.Equal(other, whole) {
				t.Fatal("disagrees with the whole encoding")
			}
		}
		if encodesAs(s, tok) != bytes.Equal(tok, whole) {
			t.Fatal("disagrees with the whole encoding")
		}
	})
}

// TestUnrefer: Unrefer returns the parts of the blobs that refer to the
// named response's request only, checked against their hashes, and
// reports a response that is gone or a part that does not match as
// corrupt.
func TestUnrefer(t *testing.T) {
	text := strings.Repeat("a<b>", MinBytes/4)
	request := []byte(`{"input":"` + text + `"}`)
	part := checkpointHeader(jsonstr.Append(nil, text))
	sum := sha256.Sum256(part)
	mine, theirs := Encode(part, request, "resp_1"), Encode(part, request, "resp_2")
	reads := 0
	r := &Resolver{Request: func(id string) ([]byte, bool, error) {
		reads++
		return request, id == "resp_1", nil
	}}
	blobs := []Blob{{sum[:], mine}, {sum[:], theirs}, {sum[:], part}, {sum[:], mine}}
	got, err := r.Unrefer(blobs, "resp_1")
	if err != nil || len(got) != 2 || !bytes.Equal(got[0].Data, part) || !bytes.Equal(got[1].Data, part) || reads != 1 {
		t.Fatalf("Unrefer: %d parts (%v) after %d request reads; want the two of resp_1, one read", len(got), err, reads)
	}
	if _, err := r.Unrefer([]Blob{{make([]byte, 32), mine}}, "resp_1"); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("a part that does not match its hash: %v, want store.ErrCorrupt", err)
	}
	if _, err := (&Resolver{Request: r.Request}).Unrefer(blobs, "resp_2"); !errors.Is(err, store.ErrCorrupt) || !errors.Is(err, ErrRequestGone) {
		t.Fatalf("a response that is gone: %v, want store.ErrCorrupt and ErrRequestGone", err)
	}
}

// conversation returns a request replaying n messages of about 300 bytes
// (as JavaScript writes JSON: < left as it is) and a part queuing them in
// reverse order, as the engine writes JSON (< as \u003c).
func conversation(tb testing.TB, n int) (request, part []byte) {
	msgs := make([]string, n)
	for i := range msgs {
		msgs[i] = fmt.Sprintf("message %d: <%s>", i, strings.Repeat("words ", 48))
	}
	var req bytes.Buffer
	enc := json.NewEncoder(&req)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{"model": "m", "input": msgs}); err != nil {
		tb.Fatal(err)
	}
	p := []byte(`{"queue":[`)
	for i := n - 1; i >= 0; i-- {
		p = append(jsonstr.Append(append(p, `{"msg":`...), msgs[i]), "},"...)
	}
	return req.Bytes(), append(p[:len(p)-1], "]}"...)
}

// TestEncode_Conversation: a part that queues each of a replayed
// conversation's 3,000 messages refers to each, and reads back.
func TestEncode_Conversation(t *testing.T) {
	request, part := conversation(t, 3000)
	stored := Encode(part, request, "resp_1")
	if len(stored) > len(part)/10 {
		t.Fatalf("a %d-byte part stored in %d bytes, want at most a tenth", len(part), len(stored))
	}
	got, err := Resolve(stored, request)
	if err != nil || !bytes.Equal(got, part) {
		t.Fatalf("Resolve: %d bytes (%v), want %d", len(got), err, len(part))
	}
}

func BenchmarkEncode(b *testing.B) {
	text := strings.Repeat("words <and> more ", 8<<20/17)
	goStyle := jsonstr.Append(nil, text)
	var raw bytes.Buffer
	enc := json.NewEncoder(&raw)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{"input": text})
	conv, convPart := conversation(b, 3000)
	for _, c := range []struct {
		name          string
		part, request []byte
	}{
		{"8MiB/same-bytes", checkpointHeader(goStyle), append(append([]byte(`{"input":`), goStyle...), '}')},
		{"8MiB/escaped-otherwise", checkpointHeader(goStyle), raw.Bytes()},
		{"conversation-3000", convPart, conv},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.part)))
			for b.Loop() {
				Encode(c.part, c.request, "resp_1")
			}
		})
	}
}

// TestPart_RequestGoneBlobRewritten: when the request a blob refers to is
// gone, Part reads the blob again (Resolver.Blob) and returns it when it
// is no longer a reference (the delete rewrote it as its part), reports
// ErrRequestGone when it still is one or there is no Blob, and the read's
// own failure when it fails.
func TestPart_RequestGoneBlobRewritten(t *testing.T) {
	text := strings.Repeat("a<b>", MinBytes/4)
	request := []byte(`{"input":"` + text + `"}`)
	part := checkpointHeader(jsonstr.Append(nil, text))
	stored := Encode(part, request, "resp_1")
	gone := func(string) ([]byte, bool, error) { return nil, false, nil }
	sum := sha256.Sum256(part)
	for _, c := range []struct {
		name  string
		blob  func([]byte) ([]byte, error)
		found bool
	}{
		{"rewritten", func(h []byte) ([]byte, error) {
			if !bytes.Equal(h, sum[:]) {
				t.Errorf("Blob read hash %x, want the part's", h)
			}
			return part, nil
		}, true},
		{"still a reference", func([]byte) ([]byte, error) { return stored, nil }, false},
		{"no Blob", nil, false},
	} {
		got, err := (&Resolver{Request: gone, Blob: c.blob}).Part(stored, sum[:])
		if c.found != (err == nil) || (c.found && !bytes.Equal(got, part)) || (!c.found && !errors.Is(err, ErrRequestGone)) {
			t.Errorf("%s: %d bytes, %v", c.name, len(got), err)
		}
	}
	// A failed read again is that failure, not a corrupt store.
	unreachable := errors.New("store unreachable")
	_, err := (&Resolver{Request: gone, Blob: func([]byte) ([]byte, error) { return nil, unreachable }}).Part(stored, sum[:])
	if !errors.Is(err, unreachable) || errors.Is(err, store.ErrCorrupt) {
		t.Errorf("the blob's read again failing: %v, want that failure and not store.ErrCorrupt", err)
	}
}
