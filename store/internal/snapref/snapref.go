// Package snapref stores a response's snapshot by reference to the event
// that carries it (schema version 15).
//
// Every lifecycle event (response.created, response.completed, ...) holds
// the whole Response object, and a commit whose snapshot changed writes
// that event and the snapshot in one transaction: a terminal response's
// snapshot is the "response" member of its terminal event, byte for byte.
// For a long response (an 8 MiB reply) the row then held the text a second
// time. Encode stores, instead of such a snapshot, a reference to the
// bytes of the event payload that equal it (the event's seq, the offset
// and length inside its payload, and a CRC-32C of the bytes); Resolve
// turns the reference back into the snapshot, from that event as EventList
// returns it.
//
// The log is append-only and kept as long as its response, so the bytes a
// reference names never change while the reference can be read. A stored
// value that is not a reference (every snapshot written before version 15,
// and every snapshot under MinBytes) is the snapshot itself: a snapshot is
// a JSON object, and a reference starts with a byte no JSON text starts
// with.
package snapref

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/superstep/superstep/store"
)

// MinBytes is the smallest snapshot Encode stores by reference. A smaller
// one is stored as it is: the reference saves little, and reading the
// snapshot would read its event record too.
const MinBytes = 4 << 10

// magic starts a reference. No JSON text starts with a NUL byte.
const magic = "\x00snapref1"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Ref is a decoded reference: the snapshot is Payload[Off:Off+Len] of the
// response's event Seq.
type Ref struct {
	Seq, Off, Len int64
	CRC           uint32
}

// Encode returns the value to store for snapshot, whose events are written
// in the same transaction: a reference to the first event (from the last)
// whose payload holds snapshot where a lifecycle event holds its response
// (just before the payload's closing brace), or snapshot itself when none
// does or it is shorter than MinBytes. A nil snapshot stays nil (a commit
// that keeps the stored one).
func Encode(snapshot []byte, events []store.EventInput) []byte {
	if len(snapshot) < MinBytes {
		return snapshot
	}
	for i := len(events) - 1; i >= 0; i-- {
		if len(events[i].Splices) > 0 {
			continue // Payload is not the whole payload (lifecycle events are never spliced)
		}
		p := events[i].Payload
		off := len(p) - 1 - len(snapshot)
		if off < 0 || p[len(p)-1] != '}' || !bytes.Equal(p[off:len(p)-1], snapshot) {
			continue
		}
		ref := make([]byte, 0, len(magic)+3*binary.MaxVarintLen64+4)
		ref = append(ref, magic...)
		ref = binary.AppendUvarint(ref, uint64(events[i].Seq))
		ref = binary.AppendUvarint(ref, uint64(off))
		ref = binary.AppendUvarint(ref, uint64(len(snapshot)))
		return binary.BigEndian.AppendUint32(ref, crc32.Checksum(snapshot, castagnoli))
	}
	return snapshot
}

// Parse reports whether stored is a reference and decodes it. A value that
// starts like a reference but does not decode is store.ErrCorrupt.
func Parse(stored []byte) (Ref, bool, error) {
	if !bytes.HasPrefix(stored, []byte(magic)) {
		return Ref{}, false, nil
	}
	b := stored[len(magic):]
	var vals [3]int64
	for i := range vals {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > 1<<62 {
			return Ref{}, true, store.Corruptf("snapshot reference: bad field %d", i)
		}
		vals[i], b = int64(v), b[n:]
	}
	if len(b) != 4 {
		return Ref{}, true, store.Corruptf("snapshot reference: %d trailing bytes, want 4", len(b))
	}
	return Ref{Seq: vals[0], Off: vals[1], Len: vals[2], CRC: binary.BigEndian.Uint32(b)}, true, nil
}

// Resolve returns the snapshot r names in ev, the event r.Seq of the
// response (as EventList returns it: its payload may be a copy, or a
// slice of a record, which the snapshot then shares). A payload that does
// not hold the bytes r names is store.ErrCorrupt.
func (r Ref) Resolve(ev *store.Event) ([]byte, error) {
	if ev == nil || ev.Seq != r.Seq {
		return nil, store.Corruptf("snapshot reference: event %d is missing", r.Seq)
	}
	if r.Off+r.Len > int64(len(ev.Payload)) {
		return nil, store.Corruptf("snapshot reference: event %d has %d payload bytes, the snapshot ends at %d",
			r.Seq, len(ev.Payload), r.Off+r.Len)
	}
	snap := ev.Payload[r.Off : r.Off+r.Len : r.Off+r.Len]
	if crc32.Checksum(snap, castagnoli) != r.CRC {
		return nil, store.Corruptf("snapshot reference: the bytes of event %d differ from the snapshot written", r.Seq)
	}
	return snap, nil
}

// Lister reads one event of a response: the store's EventList.
type Lister func(responseID string, seq int64) (*store.Event, error)

// Read returns the snapshot stored as stored for response id: stored
// itself, or the bytes its reference names, read with list.
func Read(id string, stored []byte, list Lister) ([]byte, error) {
	r, ok, err := Parse(stored)
	if err != nil {
		return nil, fmt.Errorf("response %s: %w", id, err)
	}
	if !ok {
		return stored, nil
	}
	ev, err := list(id, r.Seq)
	if err != nil {
		return nil, fmt.Errorf("response %s: read the event holding its snapshot: %w", id, err)
	}
	snap, err := r.Resolve(ev)
	if err != nil {
		return nil, fmt.Errorf("response %s: %w", id, err)
	}
	return snap, nil
}
