package eventrec

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/superstep/superstep/store"
)

// TestEncodeCompresses: a record of many short events (W3's commit) is
// stored compressed, far smaller, and reads back event by event (also
// from inside, as a reader resuming in it does); a short record and one
// that does not compress stay as encode wrote them.
func TestEncodeCompresses(t *testing.T) {
	w3 := benchRecords()["W3"]
	data := Encode(w3)
	raw := encode(w3)
	if !bytes.HasPrefix(data, compressedMarker[:]) || len(data)*10 > len(raw) {
		t.Fatalf("W3 record: %d bytes (starts % x) for %d uncompressed; want compressed at least 10 times", len(data), data[:2], len(raw))
	}
	decodeAll(t, data, w3)

	w1 := benchRecords()["W1"]
	if got := Encode(w1); !bytes.Equal(got, encode(w1)) {
		t.Errorf("a W1 record (%d bytes) was changed by compression", len(encode(w1)))
	}
	noise := make([]byte, 2*MinCompressed)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	random := []store.EventInput{{Type: "t", Payload: noise}}
	if got := Encode(random); !bytes.Equal(got, encode(random)) {
		t.Errorf("an incompressible record was stored compressed (%d bytes for %d)", len(got), len(encode(random)))
	}
	decodeAll(t, Encode(random), random)

	// A record with references compresses too, and both layers read back.
	reply := benchRecords()["Reply1MB"]
	if data := Encode(reply); !bytes.HasPrefix(data, compressedMarker[:]) || len(data) >= len(encode(reply)) {
		t.Errorf("the 1 MB reply's record: %d bytes, starts % x; want compressed below %d", len(data), data[:2], len(encode(reply)))
	} else {
		decodeAll(t, data, reply)
	}
}

// A damaged compressed record is ErrCorrupt, never a panic or another
// error; so is a compressed record inside a compressed record.
func TestDecodeCompressedCorrupt(t *testing.T) {
	w3 := benchRecords()["W3"]
	good := Encode(w3)
	nested := zenc.EncodeAll(good, compressedMarker[:])
	for name, data := range map[string][]byte{
		"Truncated": good[:len(good)/2],
		"Flipped":   append(append(bytes.Clone(good[:len(good)/2]), good[len(good)/2]^0xff), good[len(good)/2+1:]...),
		"NoFrame":   compressedMarker[:],
		"Nested":    nested,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Decode(data, int64(len(w3)))
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode: %v, want ErrCorrupt", err)
			}
		})
	}
}

// A record that compresses beyond maxRatio (it would read as damage) is
// stored as it is, and reads back.
func TestEncodeCompressionBound(t *testing.T) {
	same := []store.EventInput{{Type: "response.output_text.delta", Payload: bytes.Repeat([]byte("a"), 4<<20)}}
	raw := encode(same)
	if out := zenc.EncodeAll(raw, nil); uint64(len(raw)) <= maxRatio*uint64(len(out)) {
		t.Fatalf("the test record compresses only %d times; it must exceed maxRatio (%d)", len(raw)/len(out), maxRatio)
	}
	data := Encode(same)
	if !bytes.Equal(data, raw) {
		t.Fatalf("a record compressing beyond maxRatio was stored compressed (%d bytes)", len(data))
	}
	decodeAll(t, data, same)
}

// TestEncodeOwnsRecord: the record Encode returns is the caller's, of
// about its size, whichever way it was built (plain, compressed, too
// random to compress, past the pooled size): the next record of the same
// size, built in the same pooled buffers, leaves it as it was.
func TestEncodeOwnsRecord(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	noise := func(n int) []store.EventInput {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return []store.EventInput{{Type: "t", Payload: b}}
	}
	// flipped is evs with every payload byte changed.
	flipped := func(evs []store.EventInput) []store.EventInput {
		out := slices.Clone(evs)
		for i := range out {
			p := bytes.Clone(out[i].Payload)
			for j := range p {
				p[j] ^= 0x55
			}
			out[i].Payload = p
		}
		return out
	}
	for _, c := range []struct {
		name string
		evs  []store.EventInput
	}{
		{"W1", benchRecords()["W1"]}, {"W3", w3Record(t)}, {"Reply1MB", benchRecords()["Reply1MB"]},
		{"Random", noise(2 * MinCompressed)}, {"RandomBig", noise(maxPooled + 1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			other := flipped(c.evs)
			rec := Encode(c.evs)
			rec2 := Encode(other)
			for _, r := range [][]byte{rec, rec2} {
				// Rounded up to a size class, not a pooled buffer's capacity.
				if cap(r) > len(r)+len(r)/4+8<<10 {
					t.Errorf("a record of %d bytes holds %d", len(r), cap(r))
				}
			}
			decodeAll(t, rec, c.evs)
			decodeAll(t, rec2, other)
		})
	}
}
