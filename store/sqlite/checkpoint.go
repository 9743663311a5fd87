package sqlite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/superstep/superstep/internal/fault"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/internal/partref"
)

// querier is what *sql.DB, *sql.Conn (the writer's, in a batch's
// transaction) and *sql.Tx offer.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// entry is one part of a checkpoint manifest: its name, the SHA-256 of its
// bytes (the blob's key) and its size. A part of at most inlineMax bytes,
// or a larger one while the manifest's inline bytes stay within
// inlineBudget, is kept in the manifest itself (inline) instead of in
// blobs: small parts are the common change of a superstep, and inline
// they cost the commit no blob row. A blob row is an insert at a random
// place of the blobs tree and, beyond ~230 bytes, an overflow page (blobs
// is WITHOUT ROWID), so a workflow's ~350-byte header changing every step
// cost two pages more per commit, and pruning it as many again.
type entry struct {
	name   string
	hash   [sha256.Size]byte
	size   int64
	inline []byte // the part's bytes when inline, nil otherwise
}

// Inline limits. A part of at most inlineMax bytes is always inline; a
// larger one is inline when it fits what the parts before it left of
// inlineBudget, which keeps a manifest of one such part and a few small
// ones within the ~990 bytes a row keeps in its leaf with 1 KB pages (no
// overflow page). 1 KB was the default page size before 2026-12-05, and
// databases made then keep it; with 4 KB pages a row keeps ~4,000. inlineBudget also bounds what an unchanged inline part
// rewrites per commit. No inline part is larger than inlineBudget (a build
// of schema version 15 or older reads one larger than 256 as corrupt:
// migration 016 bumps the version).
const (
	inlineMax    = 256
	inlineBudget = 640
)

// hashedPart is a part with its manifest entry, hashed by the caller's
// goroutine before the write reaches the writer.
type hashedPart struct {
	entry
	data []byte
	// stored is what the blob row holds when it is not data: a reference
	// to the request of the response created with it (referRequest).
	stored []byte
}

// referRequest has each blob part of parts, written with the create of
// response responseID, stored by reference to the bytes it shares with the
// response's request (partref: a new run's first checkpoint queues the
// request's input). It runs before the write queues for the writer.
func referRequest(parts []hashedPart, request []byte, responseID string) {
	for i := range parts {
		if p := &parts[i]; p.inline == nil {
			if st := partref.Encode(p.data, request, responseID); partref.IsRef(st) {
				p.stored = st
			}
		}
	}
}

// blobData is what the part's blob row holds.
func (p *hashedPart) blobData() []byte {
	if p.stored != nil {
		return p.stored
	}
	return nonNil(p.data)
}

// hashParts hashes parts and chooses which are inline.
func hashParts(parts []store.Part) []hashedPart {
	hs := make([]hashedPart, len(parts))
	inlined := 0
	for i, p := range parts {
		hs[i] = hashedPart{entry: entry{name: p.Name, hash: sha256.Sum256(p.Data), size: int64(len(p.Data))}, data: p.Data}
		if n := len(p.Data); n <= inlineMax || inlined+n <= inlineBudget {
			hs[i].inline = nonNil(p.Data)
			inlined += n
		}
	}
	return hs
}

// encodeManifest encodes entries as: uvarint count, then per entry uvarint
// name length, name, 32-byte hash, uvarint size, a byte 1 if inline (then
// the size bytes follow) or 0.
func encodeManifest(parts []hashedPart) []byte {
	b := binary.AppendUvarint(nil, uint64(len(parts)))
	for _, p := range parts {
		b = binary.AppendUvarint(b, uint64(len(p.name)))
		b = append(b, p.name...)
		b = append(b, p.hash[:]...)
		b = binary.AppendUvarint(b, uint64(p.size))
		if p.inline == nil {
			b = append(b, 0)
			continue
		}
		b = append(append(b, 1), p.inline...)
	}
	return b
}

// decodeManifest decodes what encodeManifest wrote (store.ErrCorrupt when
// it cannot).
func decodeManifest(b []byte) ([]entry, error) {
	r := bytes.NewReader(b)
	n, err := binary.ReadUvarint(r)
	if err != nil || n > uint64(len(b)) {
		return nil, store.Corruptf("sqlite: checkpoint manifest: bad count")
	}
	es := make([]entry, n)
	for i := range es {
		l, err := binary.ReadUvarint(r)
		if err != nil || l > uint64(r.Len()) {
			return nil, store.Corruptf("sqlite: checkpoint manifest: bad name length")
		}
		name := make([]byte, l)
		r.Read(name)
		es[i].name = string(name)
		if _, err := r.Read(es[i].hash[:]); err != nil {
			return nil, store.Corruptf("sqlite: checkpoint manifest: short hash")
		}
		size, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, store.Corruptf("sqlite: checkpoint manifest: bad size")
		}
		es[i].size = int64(size)
		if es[i].inline, err = readInline(r, size); err != nil {
			return nil, err
		}
	}
	if r.Len() != 0 {
		return nil, store.Corruptf("sqlite: checkpoint manifest: %d trailing bytes", r.Len())
	}
	return es, nil
}

// refersBlob reports whether the manifest m names a part stored as a blob
// (or cannot be decoded, so may), without decoding it into entries.
func refersBlob(m []byte) bool {
	n, k := binary.Uvarint(m)
	if k <= 0 {
		return true
	}
	m = m[k:]
	for range n {
		l, k := binary.Uvarint(m)
		if k <= 0 || l > uint64(len(m)-k) || len(m)-k-int(l) < sha256.Size {
			return true
		}
		m = m[k+int(l)+sha256.Size:]
		size, k := binary.Uvarint(m)
		if k <= 0 || len(m) == k || m[k] != 1 || size > uint64(len(m)-k-1) {
			return true // a blob (flag 0) or corrupt
		}
		m = m[k+1+int(size):]
	}
	return len(m) != 0
}

// readInline reads an entry's inline flag and, if set, its bytes.
func readInline(r *bytes.Reader, size uint64) ([]byte, error) {
	flag, err := r.ReadByte()
	switch {
	case err != nil || flag > 1:
		return nil, store.Corruptf("sqlite: checkpoint manifest: bad inline flag")
	case flag == 0:
		return nil, nil
	case size > inlineBudget || size > uint64(r.Len()):
		return nil, store.Corruptf("sqlite: checkpoint manifest: bad inline size %d", size)
	}
	data := make([]byte, size)
	r.Read(data)
	return data, nil
}

// allInline reports whether every part is inline: a checkpoint of such
// parts needs nothing of its parent (it refers to no blob).
func allInline(parts []hashedPart) bool {
	for _, p := range parts {
		if p.inline == nil {
			return false
		}
	}
	return true
}

// writeCheckpoint stores the checkpoint at step with the given parent:
// the blobs of parts not in the parent's manifest (unless the run already
// has them), then the manifest row, manifest (encodeManifest(parts), made
// by the caller before it queued for the writer). parentManifest is the
// parent's manifest when the caller read it already (nil: read here when
// needed: only a part stored as a blob looks for it in the parent). It
// returns the blob bytes written.
func writeCheckpoint(ctx context.Context, tx querier, runID string, runNum, step, parent int64, parentManifest []byte, parts []hashedPart, manifest []byte, now time.Time) (int64, error) {
	if err := checkLow("checkpoint", "step", step); err != nil {
		return 0, err
	}
	have := map[[sha256.Size]byte]bool{}
	if parent >= 0 && !allInline(parts) {
		m := parentManifest
		if m == nil {
			err := tx.QueryRowContext(ctx, "SELECT manifest FROM checkpoints WHERE k = ?", logKey(runNum, parent)).Scan(&m)
			if err != nil {
				return 0, mapError("read parent checkpoint", err)
			}
		}
		es, err := decodeManifest(m)
		if err != nil {
			return 0, err
		}
		for _, e := range es {
			// Only the parent's blobs: a part inline in the parent may
			// be a blob here (the budget), and its blob may not exist.
			if e.inline == nil {
				have[e.hash] = true
			}
		}
	}
	var written, size int64
	for _, p := range parts {
		size += p.size
		if p.inline != nil {
			written += p.size // rewritten in every manifest
			continue
		}
		if have[p.hash] {
			continue
		}
		have[p.hash] = true
		res, err := tx.ExecContext(ctx, "INSERT INTO blobs (run_id, hash, data) VALUES (?, ?, ?) ON CONFLICT DO NOTHING", runID, p.hash[:], p.blobData())
		if err != nil {
			return 0, mapError("insert blob", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			written += p.size
		}
		if err := fault.Point(ctx, "checkpoint.blob_inserted"); err != nil {
			return 0, err
		}
	}
	if err := fault.Point(ctx, "checkpoint.blobs_inserted"); err != nil {
		return 0, err
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO checkpoints (k, parent_step, size, manifest, created_at) VALUES (?, ?, ?, ?, ?)",
		logKey(runNum, step), parent, size, manifest, now.UnixNano())
	return written, mapError("insert checkpoint", err)
}

// readCheckpoint reads the checkpoint at step with its parts, verifying
// each part's hash (store.ErrCorrupt on mismatch or a missing blob).
func readCheckpoint(ctx context.Context, q querier, runID string, step int64) (*store.Checkpoint, error) {
	c := &store.Checkpoint{RunID: runID, Step: step}
	var m []byte
	var created int64
	if step < 0 || step > lowMax {
		return nil, fmt.Errorf("sqlite: %w: checkpoint %s/%d", store.ErrNotFound, runID, step)
	}
	err := q.QueryRowContext(ctx, "SELECT parent_step, manifest, created_at FROM checkpoints WHERE k = "+runKeyLo+" | ?2", runID, step).
		Scan(&c.ParentStep, &m, &created)
	if err != nil {
		return nil, mapError(fmt.Sprintf("checkpoint %s/%d", runID, step), err)
	}
	c.CreatedAt = fromNanos(created)
	es, err := decodeManifest(m)
	if err != nil {
		return nil, err
	}
	c.Parts = make([]store.Part, len(es))
	var refs *partref.Resolver // for blobs that refer to a request
	for i, e := range es {
		data := e.inline
		if data != nil {
			if sha256.Sum256(data) != e.hash {
				return nil, store.Corruptf("sqlite: checkpoint %s/%d: inline part %q does not match its hash", runID, step, e.name)
			}
			c.Parts[i] = store.Part{Name: e.name, Data: data}
			continue
		}
		err := q.QueryRowContext(ctx, "SELECT data FROM blobs WHERE run_id = ? AND hash = ?", runID, e.hash[:]).Scan(&data)
		if err == sql.ErrNoRows {
			return nil, store.Corruptf("sqlite: checkpoint %s/%d: part %q: blob missing", runID, step, e.name)
		}
		if err != nil {
			return nil, mapError("read blob", err)
		}
		if partref.IsRef(data) {
			if refs == nil {
				refs = requestResolver(ctx, q, runID)
			}
			if data, err = refs.Part(data, e.hash[:]); err != nil {
				return nil, fmt.Errorf("sqlite: checkpoint %s/%d: part %q: %w", runID, step, e.name, err)
			}
		}
		if int64(len(data)) != e.size || sha256.Sum256(data) != e.hash {
			return nil, store.Corruptf("sqlite: checkpoint %s/%d: part %q: bytes do not match their hash", runID, step, e.name)
		}
		c.Parts[i] = store.Part{Name: e.name, Data: data}
	}
	return c, nil
}

// requestResolver returns a partref.Resolver of run runID's blobs that
// reads requests, and blobs again, through q.
func requestResolver(ctx context.Context, q querier, runID string) *partref.Resolver {
	return &partref.Resolver{
		Request: func(id string) ([]byte, bool, error) {
			var request []byte
			err := q.QueryRowContext(ctx, "SELECT "+requestColumn+" FROM responses WHERE id = ?", id).Scan(&request)
			if err == sql.ErrNoRows {
				return nil, false, nil
			}
			return request, err == nil, err
		},
		Blob: func(hash []byte) ([]byte, error) {
			var data []byte
			err := q.QueryRowContext(ctx, "SELECT data FROM blobs WHERE run_id = ? AND hash = ?", runID, hash).Scan(&data)
			if err == sql.ErrNoRows {
				return nil, nil
			}
			return data, mapError("read blob", err)
		},
	}
}

// nonNil returns b, or an empty non-nil slice (SQLite would store NULL).
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// fromNanos converts stored Unix nanoseconds to a UTC time.
func fromNanos(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// timeOrZero converts stored Unix nanoseconds, 0 meaning the zero time.
func timeOrZero(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return fromNanos(ns)
}
