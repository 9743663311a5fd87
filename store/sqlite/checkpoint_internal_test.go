package sqlite

import (
	"bytes"
	"slices"
	"testing"

	"github.com/superstep/superstep/store"
)

// TestRefersBlob: refersBlob agrees with decodeManifest on manifests of
// inline and blob parts, and every cut or damaged manifest (which
// decodeManifest refuses) counts as referring to blobs, so pruning
// collects rather than leaks.
func TestRefersBlob(t *testing.T) {
	t.Parallel()
	sizes := [][]int{{}, {0}, {10}, {300}, {700}, {10, 300}, {300, 300, 300}, {1000, 5}, {5, 1000}, {256, 256, 256}}
	for _, sz := range sizes {
		var parts []store.Part
		for i, n := range sz {
			parts = append(parts, store.Part{Name: string(rune('a' + i)), Data: bytes.Repeat([]byte{byte(i)}, n)})
		}
		m := encodeManifest(hashParts(parts))
		es, err := decodeManifest(m)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.ContainsFunc(es, func(e entry) bool { return e.inline == nil })
		if got := refersBlob(m); got != want {
			t.Fatalf("sizes %v: refersBlob %v, want %v", sz, got, want)
		}
		for cut := range len(m) {
			damaged := [][]byte{m[:cut], append(slices.Clone(m), 0)}
			for _, d := range damaged {
				if _, err := decodeManifest(d); err != nil && !refersBlob(d) {
					t.Fatalf("sizes %v: a manifest decodeManifest refuses (%v) does not refer to blobs", sz, err)
				}
			}
		}
	}
}
