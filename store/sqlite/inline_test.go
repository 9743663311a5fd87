package sqlite_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/store/storetest"
)

// TestInlinePartBecomesBlob: a part kept inline in the parent's manifest
// (it fit the inline budget there) that no longer fits must be stored as a
// blob, though its hash is in the parent's manifest; the checkpoint and,
// once the parent is pruned, the store must still read it whole.
func TestInlinePartBecomesBlob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := storetest.CreateResponse(ctx, t, s, &storetest.ResponseOpts{NoCheckpoint: true})
	part := func(name string, size int, b byte) store.Part {
		return store.Part{Name: name, Data: bytes.Repeat([]byte{b}, size)}
	}
	// Step 1: both 300-byte parts fit the budget. Step 2: the first grows
	// to 500 bytes and takes the budget, so "b" (unchanged) is a blob.
	steps := map[int64][]store.Part{
		1: {part("a", 300, 1), part("b", 300, 2)},
		2: {part("a", 500, 3), part("b", 300, 2)},
		3: {part("a", 500, 4), part("b", 300, 2)},
	}
	for step := int64(1); step <= 3; step++ {
		storetest.Commit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{Checkpoint: steps[step]})
	}
	for step := int64(1); step <= 3; step++ {
		cp, err := s.CheckpointGet(ctx, c.Run.ID, step)
		if err != nil {
			t.Fatalf("CheckpointGet step %d: %v", step, err)
		}
		requireSameParts(t, cp.Parts, steps[step])
	}
	if _, err := s.CheckpointPrune(ctx, &store.CheckpointPruneParams{RunID: c.Run.ID, KeepLast: 1}); err != nil {
		t.Fatal(err)
	}
	cp, err := s.CheckpointGet(ctx, c.Run.ID, 3)
	if err != nil {
		t.Fatalf("CheckpointGet after prune: %v", err)
	}
	requireSameParts(t, cp.Parts, steps[3])
	if err := store.Check(ctx, s); err != nil {
		t.Fatal(err)
	}
}

func requireSameParts(t *testing.T, got, want []store.Part) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d parts, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Name != want[i].Name || !bytes.Equal(got[i].Data, want[i].Data) {
			t.Fatalf("part %d: %q %d bytes, want %q %d bytes", i, got[i].Name, len(got[i].Data), want[i].Name, len(want[i].Data))
		}
	}
}
