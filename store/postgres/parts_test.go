package postgres

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
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
	e := encodeParts(parts, known, false)
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
	e := encodeParts(parts, nil, false)
	if e.inline > inlineBudget || len(e.blobHashes) != 1 || len(e.partHashes) != 2 {
		t.Fatalf("inline %d bytes (budget %d), %d blobs sent, %d blob parts; want the first inline, the repeats one blob",
			e.inline, inlineBudget, len(e.blobHashes), len(e.partHashes))
	}
	if !e.all[sha256.Sum256(same)] {
		t.Error("the repeated part is cached as inline; its blob exists now")
	}
}

// TestPartCache_Trust: a commit trusts the parts it sends by reference
// (the commit function does not probe them) only when they are those of
// the checkpoint this Store wrote at the step before, under the commit's
// epoch; otherwise a part missing since (removed behind the store's back
// here, as a prune by another owner would) is found by the probe, and
// the commit is written again with every part's bytes.
func TestPartCache_Trust(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	big := storetest.Parts(2, 4*inlineMax, 'a') // blobs, unchanged from step to step
	c := storetest.CreateResponse(ctx, t, s, &storetest.ResponseOpts{Checkpoint: big})
	run, epoch := c.Run.ID, c.Run.Lease.Epoch
	trusted := func(epoch, step int64) bool {
		_, ok := s.parts.known(run, epoch, step)
		return ok
	}
	if !trusted(epoch, 1) {
		t.Fatal("the step-1 commit does not trust the create's own checkpoint")
	}
	step := func(n int64) []store.Part {
		return append(slices.Clone(big), store.Part{Name: "state", Data: fmt.Appendf(nil, "step-%d", n)})
	}
	storetest.Commit(ctx, t, s, run, &storetest.CommitOpts{Checkpoint: step(1)})
	switch {
	case !trusted(epoch, 2):
		t.Fatal("the next commit does not trust the store's own last commit")
	case trusted(epoch, 3):
		t.Fatal("a commit two steps on trusts the parts of the step before its parent")
	case trusted(epoch+1, 2):
		t.Fatal("a commit under another epoch trusts the parts")
	}
	// The run's lease moves to another epoch (released and claimed again
	// by the same owner) and its blobs go behind the store's back: the
	// next commit probes its references, finds them missing and sends the
	// bytes again.
	owner := c.Run.Lease.Owner
	if err := s.LeaseRelease(ctx, &store.LeaseParams{RunID: run, Owner: owner, Epoch: epoch}); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: owner, Duration: time.Minute, Limit: 1})
	if err != nil || len(claimed) != 1 || claimed[0].ID != run {
		t.Fatalf("claim again: %v, %v", claimed, err)
	}
	if _, err := s.pool.Exec(ctx, "DELETE FROM blobs WHERE run_id = $1", run); err != nil {
		t.Fatal(err)
	}
	storetest.Commit(ctx, t, s, run, &storetest.CommitOpts{Checkpoint: step(2), Epoch: claimed[0].Lease.Epoch})
	cp, err := s.CheckpointGetLast(ctx, run)
	if err != nil || len(cp.Parts) != 3 || !bytes.Equal(cp.Parts[0].Data, big[0].Data) {
		t.Fatalf("checkpoint after the probe found the blobs missing: %v", err)
	}
	if trusted(claimed[0].Lease.Epoch, 3) {
		t.Fatal("parts read (CheckpointGetLast), not written, are trusted")
	}
	if err := store.Check(ctx, s); err != nil {
		t.Fatal(err)
	}
}
