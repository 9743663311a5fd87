// Package partref stores a checkpoint part that repeats its response's
// request by reference to the request (issue 14 #6).
//
// A new run's first checkpoint queues the request's input for the start
// executor: for an 8 MiB request, its blob held the 8 MiB text a second
// time. Encode stores, in place of such a part, the part's bytes with each
// long JSON string that the request also holds replaced by the position of
// that string in the request; Resolve turns it back into the part, byte
// for byte, given the request.
//
// A reference names the response whose request it reads, which a store
// writes in the same transaction as the blob (the response's create), so
// the request exists whenever the blob is written. A stored request never
// changes. A store that deletes the response while the blob stays (a run
// that goes on with later responses) rewrites the blob as the part first
// (Resolver.Unrefer). A store checks what Resolve returns against the
// part's hash, as it checks every blob.
//
// A stored value that does not start with Magic is the part itself. A part
// that starts with Magic is stored as a reference of one literal segment,
// so that every stored value reads back as what was written.
package partref

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"unicode/utf8"

	"github.com/superstep/superstep/internal/jsonstr"
	"github.com/superstep/superstep/store"
)

// MinBytes is the smallest part Encode looks into; smaller parts are
// stored as they are.
const MinBytes = 16 << 10

// MinString is the shortest JSON string (quotes included) Encode replaces
// by a reference: a reference takes about ten bytes, and a conversation
// replayed in a request's input is many messages of a few hundred bytes.
const MinString = 256

// Magic starts every reference (and nothing else Encode returns): a
// store's query finds the blobs that hold one by it.
const Magic = "\x00partref1"

// Segment kinds: bytes that follow, the request's bytes as they are, or
// the request's JSON string re-encoded as encoding/json writes it (HTML
// escaping on: what the workflow engine writes, where a client may have
// sent "<" as it is).
const (
	segLiteral  = 'L'
	segVerbatim = 'V'
	segJSON     = 'J'
)

// Encode returns what to store for part, a blob written with the response
// responseID, whose request is request: part itself when it is shorter
// than MinBytes or holds no JSON string of MinString bytes or more whose
// characters the request's JSON holds too, else a reference. A part that
// starts with Magic is always a reference.
func Encode(part, request []byte, responseID string) []byte {
	escaped := IsRef(part)
	if len(part) < MinBytes && !escaped {
		return part
	}
	var reqStrings []span
	if len(part) >= MinBytes && len(request) >= MinString {
		reqStrings = longStrings(request)
	}
	if len(reqStrings) == 0 && !escaped {
		return part
	}
	out := append(make([]byte, 0, 256), Magic...)
	out = binary.AppendUvarint(out, uint64(len(responseID)))
	out = append(out, responseID...)
	lit := 0 // part[lit:] is not yet in out
	ix := newIndex(request, reqStrings)
	for _, t := range longStrings(part) {
		kind, at, ok := ix.find(part[t.off:t.end])
		if !ok {
			continue
		}
		out = appendLiteral(out, part[lit:t.off])
		out = append(out, kind)
		out = binary.AppendUvarint(out, uint64(at.off))
		out = binary.AppendUvarint(out, uint64(at.end-at.off))
		lit = t.end
	}
	if lit == 0 && !escaped {
		return part // nothing shared
	}
	return appendLiteral(out, part[lit:])
}

// index finds the request's long strings by their bytes and, built on
// first need, by their characters: Encode's time grows with the bytes of
// the part and the request, not with the product of their strings (a
// stateless replay's input is a conversation of many messages).
type index struct {
	request []byte
	strs    []span
	seed    maphash.Seed
	raw     map[uint64][]span // by the hash of the string's bytes
	chars   map[string]span   // by its characters (the first); nil until needed
}

func newIndex(request []byte, strs []span) *index {
	ix := &index{request: request, strs: strs, seed: maphash.MakeSeed(), raw: make(map[uint64][]span, len(strs))}
	for _, r := range strs {
		h := maphash.Bytes(ix.seed, request[r.off:r.end])
		ix.raw[h] = append(ix.raw[h], r)
	}
	return ix
}

// find returns where the request holds tok, a JSON string of the part:
// the same bytes (segVerbatim), or the same characters where tok is
// written as encoding/json writes them (segJSON: what Resolve rebuilds).
func (ix *index) find(tok []byte) (kind byte, at span, ok bool) {
	for _, r := range ix.raw[maphash.Bytes(ix.seed, tok)] {
		if bytes.Equal(ix.request[r.off:r.end], tok) {
			return segVerbatim, r, true
		}
	}
	s, valid := jsonstr.Unquote(tok)
	if !valid || !encodesAs(s, tok) {
		return 0, span{}, false
	}
	if ix.chars == nil {
		ix.chars = make(map[string]span, len(ix.strs))
		for _, r := range ix.strs {
			if d, ok := jsonstr.Unquote(ix.request[r.off:r.end]); ok {
				if _, seen := ix.chars[d]; !seen {
					ix.chars[d] = r
				}
			}
		}
	}
	at, ok = ix.chars[s]
	return segJSON, at, ok
}

// encodeChunk is how many bytes of a string encodesAs encodes at a time.
const encodeChunk = 32 << 10

// encodesAs reports whether jsonstr.Append(nil, s) is tok, encoding s a
// chunk at a time into a small buffer instead of a copy of all of it (a
// request's input may be megabytes). Chunks end where a rune starts, so
// that each is encoded as it is within the whole.
func encodesAs(s string, tok []byte) bool {
	if len(tok) < 2 || tok[0] != '"' || tok[len(tok)-1] != '"' || jsonstr.Len(s) != len(tok) {
		return false
	}
	body := tok[1 : len(tok)-1]
	buf := make([]byte, 0, encodeChunk+64)
	for len(s) > 0 {
		n := min(encodeChunk, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		buf = jsonstr.Append(buf[:0], s[:n])
		enc := buf[1 : len(buf)-1]
		if len(enc) > len(body) || !bytes.Equal(body[:len(enc)], enc) {
			return false
		}
		body, s = body[len(enc):], s[n:]
	}
	return len(body) == 0
}

func appendLiteral(out, b []byte) []byte {
	if len(b) == 0 {
		return out
	}
	out = append(out, segLiteral)
	out = binary.AppendUvarint(out, uint64(len(b)))
	return append(out, b...)
}

// IsRef reports whether stored is a reference (Encode returned other bytes
// than the part's).
func IsRef(stored []byte) bool { return bytes.HasPrefix(stored, []byte(Magic)) }

// Owner reports whether stored is a reference and, if it is, the response
// whose request it reads. A value that starts like a reference but names
// no response is store.ErrCorrupt.
func Owner(stored []byte) (responseID string, ok bool, err error) {
	if !IsRef(stored) {
		return "", false, nil
	}
	id, _, err := header(stored)
	return id, true, err
}

func header(stored []byte) (id string, rest []byte, err error) {
	b := stored[len(Magic):]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, store.Corruptf("part reference: bad response id")
	}
	b = b[k:]
	return string(b[:n]), b[n:], nil
}

// Resolve returns the part stored as stored, given the request of the
// response Owner names. A value that is not a reference is returned as it
// is. One that does not decode against request is store.ErrCorrupt.
func Resolve(stored, request []byte) ([]byte, error) {
	if !IsRef(stored) {
		return stored, nil
	}
	_, b, err := header(stored)
	if err != nil {
		return nil, err
	}
	var out []byte
	for len(b) > 0 {
		kind := b[0]
		b = b[1:]
		v1, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, store.Corruptf("part reference: bad segment")
		}
		b = b[k:]
		switch kind {
		case segLiteral:
			if v1 > uint64(len(b)) {
				return nil, store.Corruptf("part reference: literal of %d bytes past the end", v1)
			}
			out, b = append(out, b[:v1]...), b[v1:]
		case segVerbatim, segJSON:
			n, k := binary.Uvarint(b)
			if k <= 0 || v1 > uint64(len(request)) || n > uint64(len(request))-v1 {
				return nil, store.Corruptf("part reference: a segment outside the request's %d bytes", len(request))
			}
			b = b[k:]
			tok := request[v1 : v1+n]
			if kind == segVerbatim {
				out = append(out, tok...)
				break
			}
			s, ok := jsonstr.Unquote(tok)
			if !ok {
				return nil, store.Corruptf("part reference: request bytes %d to %d are not a JSON string", v1, v1+n)
			}
			out = jsonstr.Append(out, s)
		default:
			return nil, store.Corruptf("part reference: unknown segment kind %q", kind)
		}
	}
	if out == nil {
		out = []byte{}
	}
	return out, nil
}

// ErrRequestGone reports a reference to the request of a response that
// does not exist (it is store.ErrCorrupt as well).
var ErrRequestGone = errors.New("partref: the request a blob refers to is gone")

// A Resolver turns stored blobs back into parts, reading the request of
// each response they refer to once. The zero Resolver is not usable: set
// Request.
type Resolver struct {
	// Request returns the request of response id; found is false when the
	// response does not exist.
	Request func(id string) (request []byte, found bool, err error)
	// Blob, when set, reads again what the blob of the part hashed hash
	// stores (nil when there is none). A reader that read a blob in one statement and the request
	// in another may find the response deleted in between, and the blob
	// rewritten as its part by the delete (Unrefer): Part then reads it
	// again rather than report ErrRequestGone.
	Blob     func(hash []byte) ([]byte, error)
	requests map[string][]byte
}

// Part returns the part stored as stored, the blob of the part hashed
// hash: stored itself, or what the reference resolves to. The caller
// checks it against hash.
func (r *Resolver) Part(stored, hash []byte) ([]byte, error) {
	owner, ref, err := Owner(stored)
	if !ref || err != nil {
		return stored, err
	}
	request, ok := r.requests[owner]
	if !ok {
		var found bool
		if request, found, err = r.Request(owner); err != nil {
			return nil, fmt.Errorf("read the request a blob refers to: %w", err)
		}
		if !found {
			if r.Blob != nil {
				again, err := r.Blob(hash)
				if err != nil {
					return nil, fmt.Errorf("read a blob again: %w", err)
				}
				if again != nil && !IsRef(again) {
					return again, nil // rewritten by the delete
				}
			}
			return nil, fmt.Errorf("%w: %w", ErrRequestGone, store.Corruptf("the blob refers to the request of response %s, which is gone", owner))
		}
		if r.requests == nil {
			r.requests = map[string][]byte{}
		}
		r.requests[owner] = request
	}
	return Resolve(stored, request)
}

// Blob is a blob row: the SHA-256 of its part and the bytes it stores.
type Blob struct{ Hash, Data []byte }

// Unrefer returns, for each of blobs that refers to the request of
// response id, its part, checked against its hash: what to store in its
// place before the response is deleted while the blob stays.
func (r *Resolver) Unrefer(blobs []Blob, id string) ([]Blob, error) {
	var out []Blob
	for _, b := range blobs {
		if owner, ref, err := Owner(b.Data); !ref || err != nil || owner != id {
			continue // another's, or not a reference: left as it is
		}
		part, err := r.Part(b.Data, b.Hash)
		if err == nil && (len(b.Hash) != sha256.Size || sha256.Sum256(part) != [sha256.Size]byte(b.Hash)) {
			err = store.Corruptf("the blob's bytes do not match their hash")
		}
		if err != nil {
			return nil, err
		}
		out = append(out, Blob{b.Hash, part})
	}
	return out, nil
}

// span is a JSON string literal, quotes included: b[off:end].
type span struct{ off, end int }

// longStrings returns the JSON string literals of b of MinString bytes or
// more, in order, scanning b as JSON text: a quote outside a string opens
// one, an unescaped quote inside closes it. In bytes that are not JSON the
// spans found are whatever lies between quotes; Encode compares them byte
// for byte, so a wrong span costs a missed reference, never a wrong part.
func longStrings(b []byte) []span {
	var out []span
	for i := 0; i < len(b); {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			break
		}
		start := i + q
		end, closed := jsonstr.End(b, start)
		if !closed {
			break
		}
		if end-start >= MinString {
			out = append(out, span{start, end})
		}
		i = end
	}
	return out
}
