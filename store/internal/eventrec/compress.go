package eventrec

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// MinCompressed is the size from which Encode compresses a record. A
// commit of many small outputs (W3: 200 messages, 1,203 events, 374 KB of
// JSON whose keys, ids and framing repeat) shrinks about 40 times, which
// is that much less for the database to write, sync and keep. A W1 step's
// record (a few hundred bytes), a short reply's final commit (2-8 KB) and
// a live append (at most 32 frames queued, usually a few KB) stay plain:
// there a zstd call costs 8-10 µs and each reader's decode 5 µs for a few
// KB not written, and with 2 KiB as the bound 64 unpaced live streams
// reached less of the model's rate (live/raw 0.36-0.39 against 0.42-0.46
// plain, two rounds each, under load).
const MinCompressed = 16 << 10

// maxPooled bounds the buffers Encode keeps for the next records (the
// uncompressed record, zstd's output before its copy): a bigger record is
// rare enough to build in buffers of its own, which a pool would keep
// alive (two per P) long after it.
const maxPooled = 1 << 20

// plainBufs and zbufs hold the buffers of Encode (*[]byte): the
// uncompressed records, and zstd's output. They are two pools so that a
// big buffer of one is not taken for the other.
var plainBufs, zbufs sync.Pool

// getBuf returns a buffer of p (empty at first).
func getBuf(p *sync.Pool) *[]byte {
	if b, ok := p.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

// putBuf puts b back into p, holding used instead (the buffer b's was
// replaced by when it was too small) unless used is over maxPooled.
func putBuf(p *sync.Pool, b *[]byte, used []byte) {
	if cap(used) <= maxPooled {
		*b = used[:0]
	}
	p.Put(b)
}

// compressedMarker starts a compressed record: a zstd frame (with its
// content size and checksum) of the record in the plain format or with
// references follows. Like sharedMarker it reads as a non-minimal uvarint
// (1), which no plain record starts with.
var compressedMarker = [2]byte{0x80, 0x01}

// maxDecompressed bounds the memory a damaged frame can ask for.
const maxDecompressed = 1 << 30

// maxRatio bounds the content size a frame may claim, as a multiple of
// its own size. W3's record compresses 40 times and 50,000 identical
// deltas 4,000 times, but a long run of one byte compresses more: compress
// stores a record that would exceed the bound as it is.
const maxRatio = 4096

// The encoder and decoder are shared: EncodeAll and DecodeAll may be
// called concurrently (each call on its own goroutine, up to the
// concurrency given) and start no goroutines of their own.
var (
	zenc = mustEncoder()
	zdec = mustDecoder()
)

func mustEncoder() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)))
	if err != nil {
		panic(err) // options fixed here: a bug, not input
	}
	return e
}

func mustDecoder() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithDecoderMaxMemory(maxDecompressed))
	if err != nil {
		panic(err)
	}
	return d
}

// compress returns data compressed behind compressedMarker, in a buffer
// of its own and about its size, when data has MinCompressed bytes or more
// and the result is at most 7/8 of its size; otherwise data itself and
// false.
//
// It never writes what decompress refuses as damage: a record beyond
// maxDecompressed, or one that compressed more than maxRatio times, is
// returned as it is.
func compress(data []byte) ([]byte, bool) {
	if len(data) < MinCompressed || len(data) > maxDecompressed {
		return data, false
	}
	limit := len(data) - len(data)/8 // the longest result kept
	if len(data) > maxPooled {
		// Room for the largest result kept: EncodeAll appends block by
		// block, growing a small buffer by copies (31 MB allocated for
		// the 8 MB frame of an 8 MiB reply's record).
		out := zenc.EncodeAll(data, append(make([]byte, 0, len(compressedMarker)+limit), compressedMarker[:]...))
		if !kept(data, out) {
			return data, false
		}
		if len(out) < limit/2 {
			out = bytes.Clone(out) // not the room of a record twice its size
		}
		return out, true
	}
	// Into a buffer of the pool, then copied at its size: presized at
	// limit, W3's 9 KB result would take a cleared 327 KB buffer, all
	// kept with the record.
	buf := getBuf(&zbufs)
	z := zenc.EncodeAll(data, append(*buf, compressedMarker[:]...))
	var out []byte
	ok := kept(data, z)
	if ok {
		out = bytes.Clone(z)
	}
	putBuf(&zbufs, buf, z)
	if !ok {
		return data, false
	}
	return out, true
}

// kept reports whether the compressed form z of data is stored: short
// enough to save an eighth, and within maxRatio.
func kept(data, z []byte) bool {
	frame := len(z) - len(compressedMarker)
	return len(z) <= len(data)-len(data)/8 && uint64(len(data)) <= maxRatio*uint64(frame)
}

// decompress returns the record a compressed record holds, and data itself
// when it is not compressed.
func decompress(data []byte) ([]byte, error) {
	if len(data) < len(compressedMarker) || data[0] != compressedMarker[0] || data[1] != compressedMarker[1] {
		return data, nil
	}
	frame := data[len(compressedMarker):]
	// Encode writes the content size in the frame's header: a header
	// without one, or claiming more than a record of JSON events can
	// compress to, is damage, refused before DecodeAll allocates for it.
	var h zstd.Header
	if err := h.Decode(frame); err != nil || !h.HasFCS || h.FrameContentSize > maxRatio*uint64(len(frame)) {
		return nil, fmt.Errorf("%w: compressed record: bad frame header (%v)", ErrCorrupt, err)
	}
	out, err := zdec.DecodeAll(frame, make([]byte, 0, h.FrameContentSize))
	if err != nil {
		return nil, fmt.Errorf("%w: compressed record: %v", ErrCorrupt, err)
	}
	if len(out) >= len(compressedMarker) && out[0] == compressedMarker[0] && out[1] == compressedMarker[1] {
		return nil, fmt.Errorf("%w: compressed record holds a compressed record", ErrCorrupt)
	}
	return out, nil
}
