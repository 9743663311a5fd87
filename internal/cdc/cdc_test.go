package cdc

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// checkChunks checks the chunks of data: they join to data, and each but
// the last is within Min..Max.
func checkChunks(t testing.TB, data []byte) [][]byte {
	t.Helper()
	cs := slices.Collect(Chunks(data))
	if got := bytes.Join(cs, nil); !bytes.Equal(got, data) {
		t.Fatalf("chunks of %d bytes join to %d bytes, not the input", len(data), len(got))
	}
	for i, c := range cs {
		if len(c) == 0 || len(c) > Max || (i < len(cs)-1 && len(c) < Min) {
			t.Fatalf("chunk %d of %d: %d bytes (Min %d, Max %d)", i, len(cs), len(c), Min, Max)
		}
		if cap(c) != len(c) {
			t.Fatalf("chunk %d: cap %d > len %d: an append to it would overwrite the next", i, cap(c), len(c))
		}
	}
	return cs
}

func TestChunks_Small(t *testing.T) {
	if cs := slices.Collect(Chunks(nil)); len(cs) != 0 {
		t.Fatalf("empty input: %d chunks", len(cs))
	}
	for _, n := range []int{1, Min - 1, Min} {
		if cs := checkChunks(t, randomBytes(1, n)); len(cs) != 1 {
			t.Fatalf("%d bytes: %d chunks, want 1", n, len(cs))
		}
	}
}

// TestChunks_Sizes: random bytes cut into chunks of Min + 4 KiB on
// average; a run of one byte value (no boundary) into chunks of Max.
func TestChunks_Sizes(t *testing.T) {
	data := randomBytes(2, 4<<20)
	cs := checkChunks(t, data)
	avg := len(data) / len(cs)
	if avg < Min+2<<10 || avg > Min+6<<10 {
		t.Fatalf("random bytes: %d chunks of %d bytes on average, want about %d", len(cs), avg, Min+4<<10)
	}
	flat := checkChunks(t, bytes.Repeat([]byte{'u'}, 10*Max+5))
	for _, c := range flat[:len(flat)-1] {
		if len(c) != Min && len(c) != Max {
			t.Fatalf("a run of one byte: chunk of %d bytes, want all %d or all %d", len(c), Min, Max)
		}
	}
}

// TestChunks_Append: a value that grows at its end keeps every chunk but
// the last it had.
func TestChunks_Append(t *testing.T) {
	base := randomBytes(3, 300<<10)
	before := checkChunks(t, base)
	for _, extra := range []int{1, 100, 5000, 200 << 10} {
		after := checkChunks(t, append(slices.Clip(base), randomBytes(4, extra)...))
		for i, c := range before[:len(before)-1] {
			if !bytes.Equal(after[i], c) {
				t.Fatalf("+%d bytes: chunk %d of %d changed", extra, i, len(before))
			}
		}
	}
}

// TestChunks_Edit: a change in the middle changes only the chunks near it:
// the chunks before it, and all but a few after it, are the same.
func TestChunks_Edit(t *testing.T) {
	base := randomBytes(5, 512<<10)
	edited := slices.Clone(base)
	edited = slices.Insert(edited, 200<<10, []byte("an insertion in the middle")...)
	a, b := checkChunks(t, base), checkChunks(t, edited)
	set := map[string]bool{}
	for _, c := range a {
		set[string(c)] = true
	}
	changed := 0
	for _, c := range b {
		if !set[string(c)] {
			changed++
		}
	}
	if changed > 3 {
		t.Fatalf("an insertion changed %d of %d chunks, want at most 3", changed, len(b))
	}
}

// TestChunks_Fixed pins the cut points of a fixed input: they are part of
// what a store shares between checkpoints written by different versions.
func TestChunks_Fixed(t *testing.T) {
	var sizes []int
	for c := range Chunks(randomBytes(6, 64<<10)) {
		sizes = append(sizes, len(c))
	}
	want := []int{9818, 4240, 7274, 14671, 2278, 5181, 6201, 3392, 12481}
	if !slices.Equal(sizes, want) {
		t.Fatalf("cut sizes %v, want %v", sizes, want)
	}
}

func FuzzChunks(f *testing.F) {
	f.Add([]byte("hello"), 0)
	f.Add(randomBytes(7, 3*Max), 0)
	f.Add(bytes.Repeat([]byte{0}, 2*Max+1), 1)
	f.Fuzz(func(t *testing.T, data []byte, rep int) {
		// rep repeats data (up to 64 KiB more) to reach the sizes where cuts happen.
		for range min(max(rep, 0), 16) {
			if len(data) > 256<<10 {
				break
			}
			data = append(data, data...)
		}
		checkChunks(t, data)
	})
}

func BenchmarkChunks(b *testing.B) {
	data := randomBytes(8, 1<<20)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		for range Chunks(data) {
		}
	}
}
