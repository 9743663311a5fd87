package eventrec

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"

	"github.com/superstep/superstep/internal/jsonstr"
	"github.com/superstep/superstep/store"
)

// MinShared is the shortest JSON string (in bytes as the payload holds
// it: quotes included, escapes as they are) that Encode stores once per
// record and refers to where it repeats. Shorter ones cost less to repeat
// than to look up; a payload shorter than this is never scanned.
const MinShared = 1024

// sharedMarker starts a record whose header lists the events stored with
// references. It reads as the uvarint 0 in a non-minimal form, which
// neither Append nor the migrations' SQL ever write, so no record of the
// plain format starts with it.
var sharedMarker = [2]byte{0x80, 0x00}

var seed = maphash.MakeSeed()

// Encode returns the record of events, in order. A long JSON string that
// occurs again in the record (the text of a reply repeats in its delta,
// its done events and the completed response) is stored once: later
// occurrences refer to the bytes of the first. A record with no repeated
// long string is the plain format, as Append writes it. A record of
// MinCompressed bytes or more is then compressed when that makes it
// shorter by an eighth (see compress.go).
//
// The record returned is the caller's (nothing else refers to it) and
// about as big as it holds.
func Encode(events []store.EventInput) []byte {
	if plainSize(events) < MinCompressed {
		return encode(events) // never compressed: built at its size
	}
	// The uncompressed record is zstd's input only: built in a buffer of
	// the pool, not in a new one to clear and collect (W3's 374 KB).
	buf := getBuf(&plainBufs)
	data, used := build(events, *buf)
	out, compressed := compress(data)
	if !compressed && cap(used) <= maxPooled {
		out = bytes.Clone(data) // data goes back to the pool
	}
	putBuf(&plainBufs, buf, used)
	return out
}

// plainSize is the size of events in the plain format.
func plainSize(events []store.EventInput) int {
	size := 0
	for i := range events {
		size += eventSize(&events[i])
	}
	return size
}

// eventSize is Size of the event's whole payload (its splices in place).
func eventSize(ev *store.EventInput) int {
	if len(ev.Splices) == 0 {
		return Size(ev.Type, ev.Payload)
	}
	n := ev.Len()
	return uvarintLen(uint64(len(ev.Type))) + len(ev.Type) + uvarintLen(uint64(n)+1) + n
}

// appendEvent is Append of the event's whole payload.
func appendEvent(b []byte, ev *store.EventInput) []byte {
	if len(ev.Splices) == 0 {
		return Append(b, ev.Type, ev.Payload)
	}
	b = binary.AppendUvarint(b, uint64(len(ev.Type)))
	b = append(b, ev.Type...)
	b = binary.AppendUvarint(b, uint64(ev.Len())+1)
	return ev.AppendPayload(b)
}

// encode is Encode without the compression.
func encode(events []store.EventInput) []byte {
	data, _ := build(events, nil)
	return data
}

// build returns the record encode returns, built in scratch when that has
// room and in a buffer of its own otherwise, and that buffer (the record
// may start past its start).
func build(events []store.EventInput, scratch []byte) (data, buf []byte) {
	// A repeat takes two strings of MinShared bytes: in two payloads that
	// may hold one, or in one of twice that size. Records without either
	// (all of W1's, W3's whose response.completed holds 200 items of short
	// strings, a short reply's final commit with its 1 KB
	// response.completed) are not scanned.
	size, long, double := 0, 0, false
	short, longest := 0, 0 // the sizes of the events not scanned, and of the longest
	// A spliced event counts as one that may share: its splices are the
	// long strings its writer gave to other events too.
	for i := range events {
		ev := &events[i]
		n := eventSize(ev)
		size += n
		if spliced(ev) || mayShare(ev.Payload) {
			long++
			double = double || n >= 2*MinShared
			longest = max(longest, n)
		} else {
			short += n
		}
	}
	if long == 0 || (long == 1 && !double) {
		data := scratch[:0]
		if cap(data) < size {
			data = make([]byte, 0, size)
		}
		for i := range events {
			data = appendEvent(data, &events[i])
		}
		return data, data
	}
	// Room for the header in front: the marker and the indexes of at most
	// long events, so that a record that needs none is returned without a
	// copy. The first guess at the record's size is the short events and
	// the longest one (a reply's text, stored once, in a few short
	// references elsewhere), not the plain record's: that of an 8 MiB reply
	// is five times its text, which the record holds once), with room for
	// what each long event holds besides its shared strings (an 8 MiB
	// reply's events: up to 1.2 KB each; with 64 bytes, the 10.8 MB buffer
	// grew by a copy for the last few hundred). A record that shares less
	// grows as appends grow.
	reserve := len(sharedMarker) + uvarintLen(uint64(long)) + long*uvarintLen(uint64(len(events)))
	guess := min(size, short+longest+long*4096)
	buf = scratch[:0]
	if cap(buf) < reserve+guess {
		buf = make([]byte, 0, reserve+guess)
	}
	e := &encoder{buf: buf[:reserve], base: reserve}
	for i := range events {
		ev := &events[i]
		var shared bool
		switch {
		case spliced(ev):
			shared = e.addSpliced(ev)
		case mayShare(ev.Payload):
			shared = e.add(ev.Type, ev.Payload)
		default:
			e.buf = appendEvent(e.buf, ev)
		}
		if shared {
			e.encoded = append(e.encoded, i)
		}
	}
	if len(e.encoded) == 0 {
		return e.buf[e.base:], e.buf
	}
	hdr := append(sharedMarker[:], binary.AppendUvarint(nil, uint64(len(e.encoded)))...)
	prev := 0
	for _, i := range e.encoded {
		hdr = binary.AppendUvarint(hdr, uint64(i-prev))
		prev = i
	}
	start := e.base - len(hdr)
	copy(e.buf[start:], hdr)
	return e.buf[start:], e.buf
}

// scanBlock is the size of the blocks mayShare looks at: the inside of a
// string of MinShared bytes (its quotes excluded) covers a whole block of
// the payload wherever it starts (MinShared-2 >= 2*scanBlock-1).
const scanBlock = 256

// mayShare reports whether p may hold a string of MinShared bytes or more
// as nextString finds them, so is worth scanning. It is false when each
// block of scanBlock bytes of p holds a quote that no backslash precedes,
// which the inside of a string never holds (a quote that does not end it
// follows an odd number of backslashes): W3's response.completed, 50 KB of
// short strings, is 200 short looks instead of 8,000 strings to walk.
func mayShare(p []byte) bool {
	if len(p) < MinShared {
		return false
	}
	for at := 0; at+scanBlock <= len(p); at += scanBlock {
		if !hasBareQuote(p, at, at+scanBlock) {
			return true
		}
	}
	return false
}

// hasBareQuote reports whether p[from:to] holds a quote that does not
// follow a backslash.
func hasBareQuote(p []byte, from, to int) bool {
	for i := from; i < to; i++ {
		q := bytes.IndexByte(p[i:to], '"')
		if q < 0 {
			return false
		}
		i += q
		if i == 0 || p[i-1] != '\\' {
			return true
		}
	}
	return false
}

// span is a string's place in the record's events (offsets from the end
// of the header).
type span struct{ off, n int }

type encoder struct {
	buf     []byte
	base    int // where the events start in buf
	seen    map[uint64]span
	pending []pending
	encoded []int
	// splices are the splices written so far, by their bytes' address:
	// the events of a commit share each one's bytes.
	splices []written
}

// written is a splice's bytes and where they were written first.
type written struct {
	p  *byte
	sp span
}

// pending is a string of the payload being encoded whose place in the
// record is not known yet (it is in a literal run not written yet).
type pending struct {
	h    uint64
	a, b int
}

// add appends one event whose payload is long enough to scan and reports
// whether it was stored with references. Its encoded form, when it has
// one, is
//
//	lit (ref lit)*
//	lit = uvarint(n) n bytes
//	ref = uvarint(off) uvarint(n): n bytes from offset off of the record's
//	      events, ending at or before the ref itself
//
// with the payload length field (len+1 of the encoded form) padded to the
// width of the plain payload's, so that offsets are known as the form is
// written. The encoded form is never longer than the payload: each ref
// replaces at least MinShared bytes by at most 30.
func (e *encoder) add(typ string, p []byte) bool {
	e.buf = binary.AppendUvarint(e.buf, uint64(len(typ)))
	e.buf = append(e.buf, typ...)
	w := uvarintLen(uint64(len(p)) + 1)
	lenAt := len(e.buf)
	e.buf = append(e.buf, make([]byte, w)...)
	start := len(e.buf)
	e.pending = e.pending[:0]
	lit, refs := 0, 0 // lit: where the payload's current literal run starts
	// flush writes the literal run up to end, placing the strings in it.
	flush := func(end int) {
		e.buf = binary.AppendUvarint(e.buf, uint64(end-lit))
		e.place(p, lit, len(e.buf)-e.base)
		e.buf = append(e.buf, p[lit:end]...)
	}
	for a, b := nextString(p, 0); b > 0; a, b = nextString(p, b) {
		if b-a < MinShared {
			continue
		}
		s := p[a:b]
		h := maphash.Bytes(seed, s)
		sp, ok := e.find(h, s)
		if !ok {
			if !e.isPending(h, s) {
				e.pending = append(e.pending, pending{h, a, b})
				continue
			}
			// A repeat inside this payload: write the run holding the
			// first occurrence, then refer to it.
			flush(a)
			if sp, ok = e.find(h, s); !ok {
				// Its hash was taken by another string. The run written
				// must be followed by a ref: an empty one; the string
				// starts the next run.
				e.buf = append(e.buf, 0, 0)
				lit = a
				refs++
				e.pending = append(e.pending, pending{h, a, b})
				continue
			}
		} else {
			flush(a)
		}
		e.buf = binary.AppendUvarint(e.buf, uint64(sp.off))
		e.buf = binary.AppendUvarint(e.buf, uint64(sp.n))
		lit = b
		refs++
	}
	if refs == 0 {
		e.place(p, 0, start-e.base)
		e.buf = append(e.buf, p...)
		binary.PutUvarint(e.buf[lenAt:], uint64(len(p))+1)
		return false
	}
	flush(len(p))
	putPadded(e.buf[lenAt:start], uint64(len(e.buf)-start)+1)
	return true
}

// spliced reports whether ev has a splice of MinShared bytes or more,
// which addSpliced stores once for all the events that hold it.
func spliced(ev *store.EventInput) bool {
	for _, sp := range ev.Splices {
		if len(sp.Bytes) >= MinShared {
			return true
		}
	}
	return false
}

// addSpliced is add for an event with splices: each splice of MinShared
// bytes or more that an earlier event of the record holds (by the address
// of its bytes: the writer shares them) is a reference to it, the rest of
// the payload literal runs, not scanned for strings. The first occurrence
// of each splice is also listed under its hash as add lists the strings it
// writes, so that a later event holding the same string unspliced (the
// completed response) refers to it too. It reports whether the event was
// stored with references.
func (e *encoder) addSpliced(ev *store.EventInput) bool {
	p := ev.Payload
	e.buf = binary.AppendUvarint(e.buf, uint64(len(ev.Type)))
	e.buf = append(e.buf, ev.Type...)
	total := ev.Len()
	w := uvarintLen(uint64(total) + 1)
	lenAt := len(e.buf)
	e.buf = append(e.buf, make([]byte, w)...)
	start := len(e.buf)
	// Which splices are references: those written before, in an earlier
	// event or earlier in this one (written, and so found by spliceAt, by
	// the time the reference is).
	isRef := make([]bool, len(ev.Splices))
	nrefs := 0
	for i, sp := range ev.Splices {
		if len(sp.Bytes) < MinShared {
			continue
		}
		_, isRef[i] = e.spliceAt(&sp.Bytes[0], len(sp.Bytes))
		for j := 0; j < i && !isRef[i]; j++ {
			isRef[i] = len(ev.Splices[j].Bytes) == len(sp.Bytes) && &ev.Splices[j].Bytes[0] == &sp.Bytes[0]
		}
		if isRef[i] {
			nrefs++
		}
	}
	// writeLit writes the bytes of the literal splice i at the end of buf
	// and lists it.
	writeLit := func(i int) {
		sp := ev.Splices[i]
		off := len(e.buf) - e.base
		e.buf = append(e.buf, sp.Bytes...)
		if len(sp.Bytes) >= MinShared {
			e.remember(&sp.Bytes[0], span{off, len(sp.Bytes)}, sp.Bytes)
		}
	}
	if nrefs == 0 {
		at := 0
		for i, sp := range ev.Splices {
			e.buf = append(e.buf, p[at:sp.At]...)
			writeLit(i)
			at = sp.At
		}
		e.buf = append(e.buf, p[at:]...)
		binary.PutUvarint(e.buf[lenAt:], uint64(total)+1)
		return false
	}
	// The runs between references: each is uvarint(length) and its bytes,
	// the rest's and the literal splices', in order.
	runAt, i := 0, 0 // the run's start in p, its first splice
	for {
		// The run up to the next reference (or the end).
		j, n, at := i, 0, runAt
		for ; j < len(ev.Splices) && !isRef[j]; j++ {
			n += ev.Splices[j].At - at + len(ev.Splices[j].Bytes)
			at = ev.Splices[j].At
		}
		end := len(p)
		if j < len(ev.Splices) {
			end = ev.Splices[j].At
		}
		n += end - at
		e.buf = binary.AppendUvarint(e.buf, uint64(n))
		from := runAt
		for k := i; k < j; k++ {
			e.buf = append(e.buf, p[from:ev.Splices[k].At]...)
			writeLit(k)
			from = ev.Splices[k].At
		}
		e.buf = append(e.buf, p[from:end]...)
		if j == len(ev.Splices) {
			break
		}
		r, _ := e.spliceAt(&ev.Splices[j].Bytes[0], len(ev.Splices[j].Bytes))
		e.buf = binary.AppendUvarint(e.buf, uint64(r.off))
		e.buf = binary.AppendUvarint(e.buf, uint64(r.n))
		runAt, i = end, j+1
	}
	putPadded(e.buf[lenAt:start], uint64(len(e.buf)-start)+1)
	return true
}

// spliceAt returns where the splice whose bytes start at p, n long, was
// written.
func (e *encoder) spliceAt(p *byte, n int) (span, bool) {
	for _, w := range e.splices {
		if w.p == p && w.sp.n == n {
			return w.sp, true
		}
	}
	return span{}, false
}

// remember lists a splice's bytes b, written at sp: by address for later
// splices, by hash for later strings that add scans.
func (e *encoder) remember(p *byte, sp span, b []byte) {
	e.splices = append(e.splices, written{p, sp})
	if e.seen == nil {
		e.seen = make(map[uint64]span)
	}
	h := maphash.Bytes(seed, b)
	if _, taken := e.seen[h]; !taken {
		e.seen[h] = sp
	}
}

// place records where the pending strings land: the bytes of p from from
// on are written at offset off of the record's events.
func (e *encoder) place(p []byte, from, off int) {
	if len(e.pending) > 0 && e.seen == nil {
		e.seen = make(map[uint64]span)
	}
	for _, s := range e.pending {
		if _, taken := e.seen[s.h]; !taken {
			e.seen[s.h] = span{off + s.a - from, s.b - s.a}
		}
	}
	e.pending = e.pending[:0]
}

// find returns an earlier occurrence of s already written.
func (e *encoder) find(h uint64, s []byte) (span, bool) {
	sp, ok := e.seen[h]
	if !ok || sp.n != len(s) {
		return span{}, false
	}
	at := e.base + sp.off
	return sp, bytes.Equal(e.buf[at:at+sp.n], s)
}

func (e *encoder) isPending(h uint64, s []byte) bool {
	for _, q := range e.pending {
		if q.h == h && q.b-q.a == len(s) {
			return true // the caller re-checks the bytes through find
		}
	}
	return false
}

// putPadded writes v as a uvarint filling all of b (continuation bytes
// of zero groups pad it); binary.Uvarint reads it back as v.
func putPadded(b []byte, v uint64) {
	for i := range len(b) - 1 {
		b[i] = byte(v&0x7f) | 0x80
		v >>= 7
	}
	if v >= 0x80 {
		panic("eventrec: padded length does not fit")
	}
	b[len(b)-1] = byte(v)
}

// nextString returns the bounds [a, b) of the first JSON string token of p
// at or after i, quotes included, b == 0 when there is none. A quote
// closes the string unless an odd number of backslashes precedes it. On
// bytes that are not JSON it finds quoted runs all the same, which only
// decides what is looked up: references are made to equal bytes alone.
func nextString(p []byte, i int) (a, b int) {
	j := bytes.IndexByte(p[i:], '"')
	if j < 0 {
		return 0, 0
	}
	a = i + j
	if b, ok := jsonstr.End(p, a); ok {
		return a, b
	}
	return 0, 0
}
