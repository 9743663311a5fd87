package postgres

import (
	"crypto/sha256"
	"sync"

	"github.com/superstep/superstep/store"
)

// hash is the content address of a checkpoint part.
type hash = [sha256.Size]byte

// partCache remembers, per run, the hashes of the parts of the last
// checkpoint this Store wrote or read, so that Commit sends unchanged parts
// by reference. A stale entry is harmless: the commit function reports a
// missing reference and Commit retries with every part's bytes.
type partCache struct {
	mu    sync.Mutex
	max   int
	runs  map[string]map[hash]struct{}
	order []string // insertion order, for eviction
}

func newPartCache(max int) *partCache {
	return &partCache{max: max, runs: make(map[string]map[hash]struct{})}
}

// known returns the hashes stored for runID (nil when unknown). The caller
// must not modify the map.
func (c *partCache) known(runID string) map[hash]struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[runID]
}

// set records hs as the stored parts of runID's last checkpoint.
func (c *partCache) set(runID string, hs map[hash]struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.runs[runID]; !ok {
		c.order = append(c.order, runID)
	}
	c.runs[runID] = hs
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

// encodedParts is a checkpoint ready for the commit function: every part's
// name and hash in order, the distinct new blobs with their bytes, and the
// distinct hashes sent by reference.
type encodedParts struct {
	names      []string
	hashes     [][]byte
	blobHashes [][]byte
	blobData   [][]byte
	refHashes  [][]byte
	size       int64
	all        map[hash]struct{}
}

// encodeParts hashes parts; those in known are sent by reference.
func encodeParts(parts []store.Part, known map[hash]struct{}) *encodedParts {
	e := &encodedParts{names: make([]string, len(parts)), hashes: make([][]byte, len(parts)),
		blobHashes: [][]byte{}, blobData: [][]byte{}, refHashes: [][]byte{},
		all: make(map[hash]struct{}, len(parts))}
	for i, p := range parts {
		h := sha256.Sum256(p.Data)
		e.names[i] = p.Name
		e.hashes[i] = h[:]
		e.size += int64(len(p.Data))
		if _, dup := e.all[h]; dup {
			continue
		}
		e.all[h] = struct{}{}
		if _, ok := known[h]; ok {
			e.refHashes = append(e.refHashes, h[:])
			continue
		}
		data := p.Data
		if data == nil {
			data = []byte{}
		}
		e.blobHashes = append(e.blobHashes, h[:])
		e.blobData = append(e.blobData, data)
	}
	return e
}
