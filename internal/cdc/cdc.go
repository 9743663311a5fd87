// Package cdc cuts byte strings into content-defined chunks.
//
// A boundary is placed where a rolling hash of the bytes just before it
// (a gear hash: each byte shifts the hash left by one and adds a fixed
// random value for the byte, so the hash depends on the last 64 bytes
// only) has its top bits zero. Where a boundary falls thus depends on the
// content around it, not on its offset: two strings that share a prefix
// share every chunk that ends before the first difference, and an edit in
// the middle changes only the chunks around it. A checkpoint part that
// grows by appending (a conversation that gains a turn) is then stored by
// reference but for its last chunks.
//
// The cut points are a pure function of the bytes and of the constants
// here. Changing them later would not break anything that joins chunks
// again, only the sharing of chunks between values cut before and after.
package cdc

import "iter"

// Chunk sizes. No chunk is shorter than Min (except the last) or longer
// than Max; past Min a boundary follows each byte with probability
// 2^-maskBits, so a chunk holds Min + 4 KiB on average.
const (
	Min      = 2 << 10
	Max      = 64 << 10
	maskBits = 12
)

// mask selects the hash's top maskBits bits: those depend on the most
// bytes of the window (a low bit k depends only on the last k+1 bytes).
const mask = uint64(1<<maskBits-1) << (64 - maskBits)

// gear maps each byte to a fixed pseudo-random value (SplitMix64 from a
// fixed seed). Part of the format's constants: see the package comment.
var gear = func() (g [256]uint64) {
	x := uint64(0x5375706572737465) // "Superste"
	for i := range g {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		g[i] = z ^ z>>31
	}
	return g
}()

// Chunks yields data cut into chunks, in order: sub-slices of data (no
// copies) whose concatenation is data. It yields nothing for empty data,
// and data itself when it is at most Min bytes long.
func Chunks(data []byte) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for len(data) > 0 {
			n := next(data)
			if !yield(data[:n:n]) {
				return
			}
			data = data[n:]
		}
	}
}

// next returns the length of the chunk that starts data.
func next(data []byte) int {
	if len(data) <= Min {
		return len(data)
	}
	end := min(len(data), Max)
	var h uint64
	// The hash of the 64 bytes before Min, so that the first possible cut
	// depends on a full window as every later one does.
	for _, b := range data[Min-64 : Min] {
		h = h<<1 + gear[b]
	}
	for i := Min; i < end; i++ {
		h = h<<1 + gear[data[i]]
		if h&mask == 0 {
			return i + 1
		}
	}
	return end
}
