package eventrec

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestMayShare: mayShare is true for every payload where nextString finds
// a string of MinShared bytes or more (else Encode would not share it),
// wherever the string starts and however many escaped quotes it holds;
// and false for W3's response.completed, 50 KB of short strings.
func TestMayShare(t *testing.T) {
	hasLong := func(p []byte) bool {
		for a, b := nextString(p, 0); b > 0; a, b = nextString(p, b) {
			if b-a >= MinShared {
				return true
			}
		}
		return false
	}
	r := rand.New(rand.NewPCG(3, 4))
	pieces := []string{`"`, `\`, `\"`, `\\`, `"k":`, `,`, `x`, `\\"`, `\\\"`}
	for range 3000 {
		var b []byte
		for n := r.IntN(4 * MinShared); len(b) < n; {
			if r.IntN(40) == 0 { // a string near MinShared, dense with escaped quotes
				b = append(b, '"')
				for m := MinShared - 8 + r.IntN(16); m > 0; m -= 2 {
					b = append(b, `\"`...)
				}
				b = append(b, '"')
			}
			b = append(b, pieces[r.IntN(len(pieces))]...)
		}
		if hasLong(b) && !mayShare(b) {
			t.Fatalf("mayShare false for a payload of %d bytes holding a string of MinShared bytes (starts %.60q)", len(b), b)
		}
	}
	for at := range scanBlock + 1 {
		for _, inside := range []string{strings.Repeat("x", MinShared-2), strings.Repeat(`\"`, MinShared/2-1)} {
			p := []byte(strings.Repeat(`"k",`, at/4) + strings.Repeat(",", at%4) + `"` + inside + `"` + strings.Repeat(`,"k"`, 2*scanBlock))
			if !hasLong(p) || !mayShare(p) {
				t.Fatalf("string at %d (%.8s...): found %v, mayShare %v", at, inside, hasLong(p), mayShare(p))
			}
		}
	}
	evs := w3Record(t)
	completed := evs[len(evs)-1].Payload
	if len(completed) < 40<<10 || mayShare(completed) {
		t.Fatalf("W3's response.completed (%d bytes): mayShare %v, want false", len(completed), mayShare(completed))
	}
	if got := encode(evs); !bytes.Equal(got, plain(evs)) {
		t.Fatalf("W3's record is not the plain format")
	}
}
