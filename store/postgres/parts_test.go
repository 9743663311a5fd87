package postgres

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/superstep/superstep/store"
)

// TestEncodeParts: which parts are inline, blobs or references, and the
// manifest decodes to the parts' names and inline bytes in order.
func TestEncodeParts(t *testing.T) {
	rep := func(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }
	parts := []store.Part{
		{Name: "changed", Data: rep('a', 300)},
		{Name: "empty", Data: nil},
		{Name: "big", Data: rep('b', inlineMax+1)},
		{Name: "was-inline", Data: rep('c', 10)},
		{Name: "was-blob", Data: rep('d', 10)},
		{Name: "dup", Data: rep('a', 300)},
		{Name: "fills-budget", Data: rep('e', inlineBudget-600)}, // what changed and dup left
		{Name: "over-budget", Data: rep('f', 1)},
	}
	sum := func(b []byte) hash { return sha256.Sum256(b) }
	known := map[hash]bool{sum(parts[3].Data): false, sum(parts[4].Data): true}
	e := encodeParts(parts, known)
	// inline: changed, empty, dup (same bytes as changed, written twice),
	// fills-budget.
	if want := int64(inlineBudget); e.inline != want {
		t.Errorf("inline bytes %d, want %d", e.inline, want)
	}
	if len(e.blobHashes) != 3 || len(e.refHashes) != 1 || len(e.partHashes) != 4 {
		t.Errorf("%d new blobs, %d references, %d blob parts; want 3 (big, was-inline, over-budget), 1 (was-blob), 4",
			len(e.blobHashes), len(e.refHashes), len(e.partHashes))
	}
	es, err := decodeManifest(e.manifest)
	if err != nil || len(es) != len(parts) {
		t.Fatalf("decodeManifest: %d entries, %v", len(es), err)
	}
	for i, p := range parts {
		inline := i == 0 || i == 1 || i == 5 || i == 6
		if es[i].name != p.Name || (es[i].inline != nil) != inline || (inline && !bytes.Equal(es[i].inline, p.Data)) {
			t.Errorf("entry %d: %q inline %v %.10q, want %q inline %v", i, es[i].name, es[i].inline != nil, es[i].inline, p.Name, inline)
		}
	}
	if e.all[sum(parts[0].Data)] || !e.all[sum(parts[3].Data)] || !e.all[sum(parts[2].Data)] {
		t.Errorf("parts as cached: %v", e.all)
	}
	for n := range len(e.manifest) {
		if _, err := decodeManifest(e.manifest[:n]); !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("manifest cut at %d: %v, want ErrCorrupt", n, err)
		}
	}
}

// A repeat of an inline part that the budget has no room for is a blob,
// sent once: the inline bytes never pass the budget.
func TestEncodeParts_RepeatPastBudget(t *testing.T) {
	same := bytes.Repeat([]byte{'r'}, inlineMax)
	parts := []store.Part{{Name: "a", Data: same}, {Name: "b", Data: same}, {Name: "c", Data: same}}
	e := encodeParts(parts, nil)
	if e.inline > inlineBudget || len(e.blobHashes) != 1 || len(e.partHashes) != 2 {
		t.Fatalf("inline %d bytes (budget %d), %d blobs sent, %d blob parts; want the first inline, the repeats one blob",
			e.inline, inlineBudget, len(e.blobHashes), len(e.partHashes))
	}
	if !e.all[sha256.Sum256(same)] {
		t.Error("the repeated part is cached as inline; its blob exists now")
	}
}
