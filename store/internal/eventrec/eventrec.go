// Package eventrec encodes the events of one log record: the frames that
// one write (a commit, a live append, a response create) adds to a
// response's event log, stored together as one row covering a contiguous
// range of sequence numbers. store/sqlite and store/postgres share it, so
// both read and write the same bytes.
//
// # Format
//
// A record's data is the concatenation, in sequence order, of each event
// encoded as
//
//	uvarint(len(type)) type uvarint(n) payload
//
// where the uvarints are encoding/binary's (little-endian base 128), and n
// is 0 for a nil payload and len(payload)+1 otherwise, so that a nil
// payload and an empty one read back as they were written. The sequence
// numbers and the step are not in the data: the row holds the first
// sequence number (the others follow by one) and the step, which all
// events of a write share. A typical event costs 2-4 bytes of framing
// (the type names and payloads of W3's deltas are short), against a row
// header, a key and, on PostgreSQL, an index entry per event before.
//
// The migrations that convert per-event rows write this format in SQL;
// they and Append must agree.
//
// # Compressed records
//
// A record of MinCompressed bytes or more (in either format) is stored
// compressed when that saves an eighth of it: 0x80 0x01 and a zstd frame
// of the record. Decoders read all three forms; records written before
// (schema version 16 and older) are never compressed.
//
// # Records with references
//
// Encode stores a long JSON string (MinShared bytes or more) that repeats
// in a record once: the reply's text otherwise recurs in its delta, its
// done events and the completed response, five or more copies per commit.
// Such a record starts with a header
//
//	0x80 0x00 uvarint(k) uvarint(i1) uvarint(i2-i1) ... uvarint(ik-ik-1)
//
// listing the indexes of the k events whose payload bytes are an encoded
// form (encoder.add) of literal runs and references to earlier bytes of
// the record's events; the events follow in the format above. 0x80 0x00
// reads as a non-minimal uvarint, which no plain record starts with. A
// record with nothing to share is written in the plain format, so short
// payloads (nothing to scan) and the migrations' records are unchanged.
package eventrec

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/superstep/superstep/store"
)

// Event is one decoded event of a record.
type Event struct {
	Type    string
	Payload []byte
}

// Size returns the encoded size of one event.
func Size(typ string, payload []byte) int {
	n := uint64(0)
	if payload != nil {
		n = uint64(len(payload)) + 1
	}
	return uvarintLen(uint64(len(typ))) + len(typ) + uvarintLen(n) + len(payload)
}

// Append appends the encoding of one event to b.
func Append(b []byte, typ string, payload []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(typ)))
	b = append(b, typ...)
	if payload == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(payload))+1)
	return append(b, payload...)
}

// ErrCorrupt reports data that is not a well-formed record of the
// expected number of events.
var ErrCorrupt = errors.New("eventrec: corrupt record")

// Decoder reads the events of one record in order. Payloads returned are
// slices of the data (capacity capped, so appending to one never writes
// into the next), or new slices for payloads stored with references;
// types are copied.
type Decoder struct {
	data []byte
	off  int
	base int    // where the events start (after a header)
	idx  uint64 // index of the next event
	enc  uint64 // index of the next event stored with references
	left uint64 // events stored with references not reached yet
	hdr  int    // offset of the header's next index delta
	err  error  // a bad header
}

// NewDecoder returns a Decoder over data.
func NewDecoder(data []byte) *Decoder {
	data, err := decompress(data)
	if err != nil {
		return &Decoder{err: err}
	}
	d := &Decoder{data: data}
	if len(data) >= len(sharedMarker) && data[0] == sharedMarker[0] && data[1] == sharedMarker[1] {
		d.readHeader()
	}
	return d
}

// readHeader reads the header of a record with references: the number of
// events stored with references and their indexes, delta-coded, each
// after the first greater than the one before.
func (d *Decoder) readHeader() {
	d.off = len(sharedMarker)
	n, err := d.uvarint()
	if err == nil && n == 0 {
		err = fmt.Errorf("%w: header lists no event", ErrCorrupt)
	}
	if err != nil {
		d.err = err
		return
	}
	d.left = n
	for i := uint64(0); i < n; i++ {
		delta, err := d.uvarint()
		if err == nil && i > 0 && delta == 0 {
			err = fmt.Errorf("%w: header indexes not increasing", ErrCorrupt)
		}
		if err != nil {
			d.err = err
			return
		}
		if i == 0 {
			d.enc, d.hdr = delta, d.off
		}
	}
	d.base = d.off
}

// Next decodes the next event. It returns ErrCorrupt (wrapped) when the
// data ends inside an event or a length is out of range; ok is false at
// the end of the data.
func (d *Decoder) Next() (ev Event, ok bool, err error) { return d.next(true) }

// next reads the next event, expanding its payload when decode is set
// (Skip reads past events without building them).
func (d *Decoder) next(decode bool) (ev Event, ok bool, err error) {
	if d.err != nil {
		return Event{}, false, d.err
	}
	if d.off == len(d.data) {
		if d.left > 0 {
			return Event{}, false, fmt.Errorf("%w: header lists event %d of a record of %d", ErrCorrupt, d.enc, d.idx)
		}
		return Event{}, false, nil
	}
	tlen, err := d.uvarint()
	if err != nil {
		return Event{}, false, err
	}
	typ, err := d.bytes(tlen)
	if err != nil {
		return Event{}, false, err
	}
	n, err := d.uvarint()
	if err != nil {
		return Event{}, false, err
	}
	shared := d.left > 0 && d.idx == d.enc
	d.idx++
	if shared {
		d.left--
		if d.left > 0 {
			delta, k := binary.Uvarint(d.data[d.hdr:d.base]) // checked by readHeader
			d.hdr += k
			d.enc += delta
		}
	}
	if decode {
		ev.Type = string(typ)
	}
	if n == 0 {
		if shared {
			return Event{}, false, fmt.Errorf("%w: nil payload listed as stored with references", ErrCorrupt)
		}
		return ev, true, nil
	}
	at := d.off
	if ev.Payload, err = d.bytes(n - 1); err != nil {
		return Event{}, false, err
	}
	if shared && decode {
		if ev.Payload, err = d.expand(ev.Payload, at-d.base); err != nil {
			return Event{}, false, err
		}
	}
	return ev, true, nil
}

// maxExpanded bounds a payload rebuilt from references, so that damaged
// data (many references to the same long bytes) cannot ask for an
// allocation beyond any payload a store accepts.
const maxExpanded = 1 << 30

// expand rebuilds a payload stored with references (encoder.add) from its
// encoded form, which starts at offset pos of the record's events.
func (d *Decoder) expand(form []byte, pos int) ([]byte, error) {
	events := d.data[d.base:]
	var out []byte
	total := 0
	// The first pass checks the form and sums the length, the second
	// copies.
	for pass := range 2 {
		if pass == 1 {
			out = make([]byte, 0, total)
		}
		for i := 0; ; {
			n, k := binary.Uvarint(form[i:])
			if k <= 0 || n > uint64(len(form)-i-k) {
				return nil, fmt.Errorf("%w: bad literal at offset %d", ErrCorrupt, pos+i)
			}
			i += k
			if pass == 0 {
				total += int(n)
			} else {
				out = append(out, form[i:i+int(n)]...)
			}
			i += int(n)
			if i == len(form) {
				break
			}
			tok := uint64(pos + i)
			off, k1 := binary.Uvarint(form[i:])
			if k1 <= 0 {
				return nil, fmt.Errorf("%w: bad reference at offset %d", ErrCorrupt, tok)
			}
			n, k2 := binary.Uvarint(form[i+k1:])
			if k2 <= 0 || off > tok || n > tok-off {
				return nil, fmt.Errorf("%w: bad reference at offset %d", ErrCorrupt, tok)
			}
			i += k1 + k2
			if pass == 0 {
				if total += int(n); total > maxExpanded {
					return nil, fmt.Errorf("%w: payload longer than %d bytes", ErrCorrupt, maxExpanded)
				}
			} else {
				out = append(out, events[off:off+n]...)
			}
		}
	}
	return out, nil
}

// Skip decodes and drops n events (readers starting inside a record).
func (d *Decoder) Skip(n int64) error {
	for i := int64(0); i < n; i++ {
		if _, ok, err := d.next(false); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("%w: ended after %d of %d events to skip", ErrCorrupt, i, n)
		}
	}
	return nil
}

// Done reports whether every byte was read (and every event the header
// of a record with references lists was).
func (d *Decoder) Done() bool { return d.off == len(d.data) && d.left == 0 && d.err == nil }

func (d *Decoder) uvarint() (uint64, error) {
	v, n := binary.Uvarint(d.data[d.off:])
	if n <= 0 {
		return 0, fmt.Errorf("%w: bad length at offset %d", ErrCorrupt, d.off)
	}
	d.off += n
	return v, nil
}

func (d *Decoder) bytes(n uint64) ([]byte, error) {
	if n > uint64(len(d.data)-d.off) {
		return nil, fmt.Errorf("%w: %d bytes at offset %d run past the end (%d)", ErrCorrupt, n, d.off, len(d.data))
	}
	end := d.off + int(n)
	b := d.data[d.off:end:end]
	d.off = end
	return b, nil
}

// Decode decodes a record that must hold exactly count events.
func Decode(data []byte, count int64) ([]Event, error) {
	d := NewDecoder(data)
	evs := make([]Event, 0, count)
	for {
		ev, ok, err := d.Next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		evs = append(evs, ev)
	}
	if int64(len(evs)) != count {
		return nil, fmt.Errorf("%w: %d events where the record's range holds %d", ErrCorrupt, len(evs), count)
	}
	return evs, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// Page collects the events of one EventList page from the records that
// hold them, read in seq order: it slices the first record from the page's
// first seq and stops at the page's limits. Both backends' EventList use
// it, so they cut pages alike.
type Page struct {
	Events     []store.Event
	responseID string
	next       int64 // the seq the next event should have
	limit      int
	maxBytes   int
	size       int
}

// NewPage starts a page of the events of responseID from seq from on, at
// most limit of them, ending with the event whose payload makes the
// page's payloads reach maxBytes when maxBytes is positive.
func NewPage(responseID string, from int64, limit, maxBytes int) *Page {
	return &Page{responseID: responseID, next: from, limit: limit, maxBytes: maxBytes}
}

// Add adds the events of rec (whose encoded events are data) from the
// page's next seq on. It reports whether the page is full; a record whose
// data does not hold exactly its range's events is store.ErrCorrupt. A
// record that starts after the next seq (a gap: damage) is read from its
// start, so the gap shows in the seqs for store.Check to report.
func (p *Page) Add(rec store.EventRecord, data []byte) (full bool, err error) {
	bad := func(err error) error {
		return store.Corruptf("response %s: event record [%d, %d]: %v", p.responseID, rec.FirstSeq, rec.LastSeq, err)
	}
	if rec.LastSeq < rec.FirstSeq {
		return false, bad(errors.New("empty range"))
	}
	if rec.LastSeq < p.next {
		// Wholly before the page: the record holding the seq before it
		// (the page starts at the end of the log).
		return false, nil
	}
	d := NewDecoder(data)
	skip := max(p.next-rec.FirstSeq, 0)
	if err := d.Skip(skip); err != nil {
		return false, bad(err)
	}
	for seq := rec.FirstSeq + skip; seq <= rec.LastSeq; seq++ {
		ev, ok, err := d.Next()
		if err == nil && !ok {
			err = fmt.Errorf("%w: data ends before seq %d", ErrCorrupt, seq)
		}
		if err != nil {
			return false, bad(err)
		}
		p.Events = append(p.Events, store.Event{ResponseID: p.responseID, Seq: seq, Type: ev.Type, Payload: ev.Payload, Step: rec.Step})
		p.next = seq + 1
		p.size += len(ev.Payload)
		if len(p.Events) >= p.limit || (p.maxBytes > 0 && p.size >= p.maxBytes) {
			return true, nil
		}
	}
	if !d.Done() {
		return false, bad(fmt.Errorf("%w: data holds more events than the range", ErrCorrupt))
	}
	return false, nil
}
