package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
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

// deleteBetween is a querier that, before it reads the request a blob
// refers to, runs del: a delete that lands between the blob's read and
// the request's.
type deleteBetween struct {
	querier
	del  func()
	done bool
}

func (q *deleteBetween) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if !q.done && strings.HasPrefix(query, "SELECT "+requestColumn) {
		q.done = true
		q.del()
	}
	return q.querier.QueryRowContext(ctx, query, args...)
}

// TestReadCheckpoint_RequestDeletedMeanwhile: a reader that read a blob
// referring to a response's request, when that response is deleted (its
// run going on) before the reader reads the request, reads the blob again
// (rewritten as its part by the delete) and gets the part, not a
// corruption error.
func TestReadCheckpoint_RequestDeletedMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "race.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runID, firstID, part := storetest.RequestPartRun(ctx, t, s)
	q := &deleteBetween{querier: s.rdb, del: func() {
		if err := s.ResponseDelete(ctx, firstID); err != nil {
			t.Error(err)
		}
	}}
	cp, err := readCheckpoint(ctx, q, runID, 0)
	if !q.done {
		t.Fatal("the blob was not read as a reference")
	}
	if err != nil || !bytes.Equal(cp.Parts[0].Data, part) {
		t.Fatalf("readCheckpoint: %v", err)
	}
}
