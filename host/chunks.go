package host

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/superstep/superstep/internal/cdc"
	"github.com/superstep/superstep/internal/invariants"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/workflow"
)

// Big checkpoint parts are stored in content-defined chunks.
//
// A store keeps a part that did not change by reference (blobs are shared
// by hash within a run), but a part that grows is a new blob at every
// commit, and a run keeps the checkpoint each finished response resumes
// from. A hosted agent keeps its conversation in one state part, so a
// conversation of n turns kept n copies of its history: O(n²) bytes (200
// turns of 1.5 KB stored 31 MB of blobs, 1,000 turns 779 MB). Cut into
// chunks by content (cdc.Split), a part that grew at its end shares all
// but its last chunks with the part before, and takes O(log size) chunks
// (each a manifest entry of every checkpoint that holds it).
//
// The chunks of part name are store parts named
// chunkPrefix+"<i>/<n>/"+name, i from 0 to n-1, in order. The workflow
// names its parts "header", "state/…" and "executor/…" only, so no part of
// its own starts with chunkPrefix, and a checkpoint written before chunking
// reads as it did. Only state and executor parts are cut: the header holds
// the queues and pending requests, which change with every step, so its
// chunks would be new at every step anyway.
const (
	chunkPrefix = "chunk/"
	// chunkFrom is the size from which a state or executor part is cut:
	// below it, a part rewritten at each commit costs little, and one blob
	// is cheaper to store and read than a few.
	chunkFrom = 32 << 10
)

// chunkable reports whether p is cut into chunks.
func chunkable(p workflow.Part) bool {
	return len(p.Data) >= chunkFrom &&
		(strings.HasPrefix(p.Name, "state/") || strings.HasPrefix(p.Name, "executor/"))
}

// toStoreParts converts workflow checkpoint parts to store parts, a big
// state or executor part as its chunks (sub-slices of its data, in order).
func toStoreParts(ps []workflow.Part) []store.Part {
	out := make([]store.Part, 0, len(ps))
	for _, p := range ps {
		invariants.Check(!strings.HasPrefix(p.Name, chunkPrefix), "host: a workflow part is named like a chunk")
		if !chunkable(p) {
			out = append(out, store.Part{Name: p.Name, Data: p.Data})
			continue
		}
		cs := cdc.Split(p.Data)
		for i, c := range cs {
			out = append(out, store.Part{Name: chunkName(p.Name, i, len(cs)), Data: c})
		}
	}
	return out
}

// chunkName names chunk i of n of part name.
func chunkName(name string, i, n int) string {
	return chunkPrefix + strconv.Itoa(i) + "/" + strconv.Itoa(n) + "/" + name
}

// parseChunkName returns what chunkName was given, ok false when name is
// not of its form.
func parseChunkName(name string) (part string, i, n int, ok bool) {
	rest, ok := strings.CutPrefix(name, chunkPrefix)
	if !ok {
		return "", 0, 0, false
	}
	is, rest, ok1 := strings.Cut(rest, "/")
	ns, part, ok2 := strings.Cut(rest, "/")
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || i < 0 || n < 1 || i >= n || part == "" ||
		strconv.Itoa(i) != is || strconv.Itoa(n) != ns {
		return "", 0, 0, false
	}
	return part, i, n, true
}

// toWorkflowParts converts store checkpoint parts to workflow parts: the
// chunks of a part are joined into it, at the place of its first chunk.
// A chunk that is malformed, repeated or missing is an error: the state
// it belongs to cannot be read.
func toWorkflowParts(ps []store.Part) ([]workflow.Part, error) {
	out := make([]workflow.Part, 0, len(ps))
	type joined struct {
		at     int      // index in out
		chunks [][]byte // by chunk index
		got    []bool   // by chunk index: read (an empty chunk is one too)
		have   int
	}
	var parts map[string]*joined
	for _, p := range ps {
		if !strings.HasPrefix(p.Name, chunkPrefix) {
			out = append(out, workflow.Part{Name: p.Name, Data: p.Data})
			continue
		}
		name, i, n, ok := parseChunkName(p.Name)
		if !ok || n > len(ps) { // a count past the parts given: damage, not an allocation to make
			return nil, fmt.Errorf("host: checkpoint part %q: not a chunk's name, or of more chunks than the checkpoint has parts", p.Name)
		}
		if parts == nil {
			parts = map[string]*joined{}
		}
		j := parts[name]
		if j == nil {
			j = &joined{at: len(out), chunks: make([][]byte, n), got: make([]bool, n)}
			parts[name] = j
			out = append(out, workflow.Part{Name: name})
		}
		if len(j.chunks) != n || j.got[i] {
			return nil, fmt.Errorf("host: checkpoint part %q: chunk %d of %d repeated or of another count", name, i, n)
		}
		j.chunks[i], j.got[i] = p.Data, true
		j.have++
	}
	for name, j := range parts {
		if j.have != len(j.chunks) {
			return nil, fmt.Errorf("host: checkpoint part %q: %d of its %d chunks missing", name, len(j.chunks)-j.have, len(j.chunks))
		}
		size := 0
		for _, c := range j.chunks {
			size += len(c)
		}
		data := make([]byte, 0, size)
		for _, c := range j.chunks {
			data = append(data, c...)
		}
		out[j.at].Data = data
	}
	return out, nil
}
