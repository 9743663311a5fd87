package postgres

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"sync"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/internal/partref"
)

// hash is the content address of a checkpoint part.
type hash = [sha256.Size]byte

// partCache remembers, per run, the hashes of the parts of the last
// checkpoint this Store wrote or read, each with whether it is stored as a
// blob (true) or inline, so that Commit sends unchanged parts by reference.
// A stale entry is harmless: the commit function probes the parts sent by
// reference, reports a missing one, and Commit retries with every part's
// bytes.
//
// The probe is skipped (the references are trusted) when the entry is
// the checkpoint this Store itself wrote at the step before the commit's,
// under the commit's lease epoch: no other owner can have committed since
// (a claim moves the epoch), and a run's last checkpoint, with its blobs,
// is never pruned (superstep_prune_checkpoints keeps the last step's);
// a run deleted since fails the commit's fence before any of it is
// written. It saved 8-15 % of the server's CPU per commit
// (BenchmarkServerCPU, under load).
type partCache struct {
	mu    sync.Mutex
	max   int
	runs  map[string]partEntry
	order []string // insertion order, for eviction
}

// partEntry is a run's entry in the partCache: the parts of the checkpoint
// at step, written under epoch (trustNone: read, not written).
type partEntry struct {
	hs          map[hash]bool
	epoch, step int64
}

// trustNone is the epoch of an entry whose references are always probed.
const trustNone = -1

func newPartCache(max int) *partCache {
	return &partCache{max: max, runs: make(map[string]partEntry)}
}

// known returns the parts stored for runID (nil when unknown) and whether
// a commit at epoch and step may trust them without a probe (see
// partCache). The caller must not modify the map.
func (c *partCache) known(runID string, epoch, step int64) (hs map[hash]bool, trusted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.runs[runID]
	return e.hs, ok && e.epoch != trustNone && e.epoch == epoch && e.step == step-1
}

// set records hs as the stored parts of runID's last checkpoint, at step,
// written under epoch (trustNone when read).
func (c *partCache) set(runID string, hs map[hash]bool, epoch, step int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.runs[runID]; !ok {
		c.order = append(c.order, runID)
	}
	c.runs[runID] = partEntry{hs: hs, epoch: epoch, step: step}
	for len(c.runs) > c.max && len(c.order) > 0 {
		delete(c.runs, c.order[0])
		c.order = c.order[1:]
	}
	if len(c.order) > 2*c.max+16 { // drop ids forgotten by forget
		kept := c.order[:0]
		for _, id := range c.order {
			if _, ok := c.runs[id]; ok {
				kept = append(kept, id)
			}
		}
		c.order = kept
	}
}

// forget drops runID (after a failed reference, a prune or a delete).
func (c *partCache) forget(runID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.runs, runID)
}

// A part of at most inlineMax bytes that changed since the parent
// checkpoint is stored inline, in the checkpoint row's manifest, while
// the checkpoint's inline parts total at most inlineBudget bytes: the
// step that changes it then writes no blob row and no blob index entry,
// only the bytes in the row. BenchmarkStepWAL (SUPERSTEP_BENCH_PAYLOAD_BYTES)
// measured ~310 bytes of WAL saved per step whatever the part's size
// (265 to 1,565 bytes: 621 against 929, 721 against 1,028 for W1's 365,
// 1,921 against 2,229). A part that did not change is stored once, as a
// blob, and referenced by hash from then on (33 bytes a checkpoint). The
// limits keep the row below PostgreSQL's TOAST threshold (~2 KB), beyond
// which each commit would compress the row or, for bytes that do not
// compress, move them out of line (a TOAST row and index entry: what the
// blob row costs).
const (
	inlineMax    = 1024
	inlineBudget = 1536
)

// Manifest entry kinds: the part is the next blob of the row's
// part_hashes, or its bytes follow.
const (
	manifestBlob   = 0
	manifestInline = 1
)

// encodedParts is a checkpoint ready for the commit function: its
// manifest, the hashes of its blob parts in manifest order (nil for none),
// the distinct new blobs with their bytes, and the distinct hashes sent by
// reference.
type encodedParts struct {
	manifest   []byte
	partHashes [][]byte
	blobHashes [][]byte
	blobData   [][]byte
	refHashes  [][]byte
	size       int64
	inline     int64 // bytes stored inline: written by the commit
	all        map[hash]bool
}

// encodeParts hashes parts and decides how each is stored: a small part
// not in known (changed since the parent checkpoint, or the parent
// unknown) inline, one known as a blob by reference (probed by the commit
// function unless trusted, see partCache), any other as a blob (sent
// with its bytes; the commit function stores it unless the run has it). The manifest is: uvarint count, then per part uvarint name
// length, name, kind (manifestBlob, or manifestInline followed by uvarint
// length and the bytes).
func encodeParts(parts []store.Part, known map[hash]bool, trusted bool) *encodedParts {
	e := &encodedParts{blobHashes: [][]byte{}, blobData: [][]byte{}, refHashes: [][]byte{},
		all: make(map[hash]bool, len(parts))}
	m := binary.AppendUvarint(make([]byte, 0, 64), uint64(len(parts)))
	budget := inlineBudget
	for _, p := range parts {
		h := sha256.Sum256(p.Data)
		e.size += int64(len(p.Data))
		m = binary.AppendUvarint(m, uint64(len(p.Name)))
		m = append(m, p.Name...)
		blob, seen := e.all[h]
		if seen && !blob && len(p.Data) > budget {
			// A repeat of an inline part past the budget: a blob, sent
			// once (later repeats refer to it).
			blob, seen = true, false
			e.all[h] = true
		}
		if !seen {
			blob = true
			if _, ok := known[h]; !ok && len(p.Data) <= inlineMax && len(p.Data) <= budget {
				blob = false
			}
			e.all[h] = blob
		}
		if !blob {
			budget -= len(p.Data)
			e.inline += int64(len(p.Data))
			m = append(m, manifestInline)
			m = binary.AppendUvarint(m, uint64(len(p.Data)))
			m = append(m, p.Data...)
			continue
		}
		m = append(m, manifestBlob)
		e.partHashes = append(e.partHashes, h[:])
		if seen {
			continue
		}
		if known[h] {
			if !trusted {
				e.refHashes = append(e.refHashes, h[:])
			}
			continue
		}
		data := p.Data
		if data == nil {
			data = []byte{}
		}
		e.blobHashes = append(e.blobHashes, h[:])
		e.blobData = append(e.blobData, data)
	}
	e.manifest = m
	return e
}

// referRequest has each new blob of e, written with the create of
// response responseID, stored by reference to the bytes it shares with the
// response's request (partref: a new run's first checkpoint queues the
// request's input). blobs.size is then the reference's.
func (e *encodedParts) referRequest(request []byte, responseID string) {
	for i, d := range e.blobData {
		if st := partref.Encode(d, request, responseID); partref.IsRef(st) {
			e.blobData[i] = st
		}
	}
}

// manifestEntry is one part of a decoded manifest: its name and, when
// inline, its bytes (not nil).
type manifestEntry struct {
	name   string
	inline []byte
}

// decodeManifest decodes what encodeParts wrote (store.ErrCorrupt when it
// cannot).
func decodeManifest(b []byte) ([]manifestEntry, error) {
	r := bytes.NewReader(b)
	bad := func(what string) error { return store.Corruptf("store/postgres: checkpoint manifest: %s", what) }
	n, err := binary.ReadUvarint(r)
	if err != nil || n > uint64(len(b)) {
		return nil, bad("bad part count")
	}
	es := make([]manifestEntry, n)
	for i := range es {
		l, err := binary.ReadUvarint(r)
		if err != nil || l > uint64(r.Len()) {
			return nil, bad("bad name length")
		}
		name := make([]byte, l)
		_, _ = r.Read(name)
		es[i].name = string(name)
		kind, err := r.ReadByte()
		switch {
		case err != nil:
			return nil, bad("truncated")
		case kind == manifestBlob:
			continue
		case kind != manifestInline:
			return nil, bad("bad part kind")
		}
		l, err = binary.ReadUvarint(r)
		if err != nil || l > uint64(r.Len()) {
			return nil, bad("bad inline length")
		}
		es[i].inline = make([]byte, l)
		_, _ = r.Read(es[i].inline)
	}
	if r.Len() != 0 {
		return nil, bad("trailing bytes")
	}
	return es, nil
}
