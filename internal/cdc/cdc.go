// Package cdc cuts byte strings into content-defined chunks.
//
// A boundary is placed where a rolling hash of the bytes just before it
// (a gear hash: each byte shifts the hash left by one and adds a fixed
// random value for the byte, so the hash depends on the last 64 bytes
// only) has its top bits zero. Where a boundary falls thus depends on the
// content around it, not on its offset: two strings that share a prefix
// share every boundary up to the first difference, and an edit in the
// middle moves only the boundaries near it.
//
// Boundaries have levels: one in 2^levelBits of them has levelBits more
// top bits of the hash zero (level 1), one in 2^levelBits of those yet more
// (level 2), and so on. Split covers a string with the biggest chunks whose
// ends are boundaries of their level, small ones only towards its end. A
// value that grows at its end (a conversation that gains a turn) is then
// stored by reference but for its last few chunks, and it takes a number
// of chunks that grows with the logarithm of its size, not with its size:
// a checkpoint lists every chunk of its parts.
//
// The cut points are a pure function of the bytes and of the constants
// here. Changing them later would not break anything that joins chunks
// again, only the sharing of chunks between values cut before and after.
package cdc

import "math/bits"

// Chunk sizes. A boundary of level 0 is at least Min bytes after the one
// before it and at most Max; past Min one follows each byte with
// probability 2^-maskBits, so level-0 chunks hold Min + 4 KiB on average,
// and a chunk of level L about 2^(levelBits*L) times that.
const (
	Min       = 2 << 10
	Max       = 64 << 10
	maskBits  = 12
	levelBits = 3
	// MaxLevel is the highest level: its chunks hold ~25 MB on average.
	MaxLevel = 4
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

// cut is a boundary: the end of a level-0 chunk and its level; level -1
// marks the end of the data where no boundary is.
type cut struct {
	end, level int
}

// cuts returns the boundaries of data, in order, and the end of data last
// (level -1 unless it is a boundary too).
func cuts(data []byte) []cut {
	var out []cut
	for at := 0; at < len(data); {
		n, level := next(data[at:])
		at += n
		out = append(out, cut{at, level})
	}
	return out
}

// next returns the length of the level-0 chunk that starts data and the
// level of its end (-1 when data ends before a boundary).
func next(data []byte) (int, int) {
	if len(data) <= Min {
		return len(data), -1
	}
	var h uint64
	// The hash of the 64 bytes before Min, so that the first possible cut
	// depends on a full window as every later one does.
	for _, b := range data[Min-64 : Min] {
		h = h<<1 + gear[b]
	}
	end := min(len(data), Max)
	for i := Min; i < end; i++ {
		h = h<<1 + gear[data[i]]
		if h&mask == 0 {
			return i + 1, min((bits.LeadingZeros64(h)-maskBits)/levelBits, MaxLevel)
		}
	}
	if end == Max {
		return Max, 0 // no boundary within Max bytes: a forced one, of level 0
	}
	return end, -1
}

// Split returns data cut into chunks: sub-slices of data (no copies, each
// of capacity its length) whose concatenation is data. From the start, each
// chunk is the longest one of the highest level whose end is a boundary of
// that level: a chunk of level L ends at the next boundary of level L or
// higher, and starts where the previous one ended, itself a boundary of a
// level at least L. What remains after the last boundary is the last
// chunk. Empty data has no chunks.
func Split(data []byte) [][]byte {
	cs := cuts(data)
	// nextAt[L][i] is the index of the first cut at or after i of level L
	// or higher (len(cs) when none).
	var nextAt [MaxLevel + 1][]int
	for l := range nextAt {
		nextAt[l] = make([]int, len(cs)+1)
		nextAt[l][len(cs)] = len(cs)
		for i := len(cs) - 1; i >= 0; i-- {
			if cs[i].level >= l {
				nextAt[l][i] = i
			} else {
				nextAt[l][i] = nextAt[l][i+1]
			}
		}
	}
	var out [][]byte
	start, level := 0, MaxLevel // the start of data is a boundary of every level
	for i := 0; i < len(cs); {
		j := len(cs)
		for l := level; l >= 0 && j == len(cs); l-- {
			j = nextAt[l][i]
		}
		if j == len(cs) {
			out = append(out, data[start:len(data):len(data)]) // no boundary left
			break
		}
		end := cs[j].end
		out = append(out, data[start:end:end])
		start, level, i = end, cs[j].level, j+1
	}
	return out
}
