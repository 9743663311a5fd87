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
	cs := Split(data)
	if got := bytes.Join(cs, nil); !bytes.Equal(got, data) {
		t.Fatalf("chunks of %d bytes join to %d bytes, not the input", len(data), len(got))
	}
	for i, c := range cs {
		if len(c) == 0 || (i < len(cs)-1 && len(c) < Min) {
			t.Fatalf("chunk %d of %d: %d bytes (Min %d)", i, len(cs), len(c), Min)
		}
		if cap(c) != len(c) {
			t.Fatalf("chunk %d: cap %d > len %d: an append to it would overwrite the next", i, cap(c), len(c))
		}
	}
	return cs
}

func TestSplit_Small(t *testing.T) {
	if cs := Split(nil); len(cs) != 0 {
		t.Fatalf("empty input: %d chunks", len(cs))
	}
	for _, n := range []int{1, Min - 1, Min} {
		if cs := checkChunks(t, randomBytes(1, n)); len(cs) != 1 {
			t.Fatalf("%d bytes: %d chunks, want 1", n, len(cs))
		}
	}
}

// TestCuts_Sizes: random bytes cut at level 0 every Min + 4 KiB on
// average, one boundary in 2^levelBits of a level higher; a run of one
// byte value (no boundary) at every Max.
func TestCuts_Sizes(t *testing.T) {
	data := randomBytes(2, 16<<20)
	cs := cuts(data)
	if avg := len(data) / len(cs); avg < Min+3<<10 || avg > Min+5<<10 {
		t.Fatalf("random bytes: %d cuts, every %d bytes on average, want about %d", len(cs), avg, Min+4<<10)
	}
	var byLevel [MaxLevel + 1]int
	prev := 0
	for _, c := range cs[:len(cs)-1] {
		if c.level < 0 || c.end-prev < Min || c.end-prev > Max {
			t.Fatalf("cut %+v after %d", c, prev)
		}
		byLevel[c.level]++
		prev = c.end
	}
	for l := 1; l <= 2; l++ {
		higher := 0
		for _, n := range byLevel[l:] {
			higher += n
		}
		if ratio := float64(len(cs)) / float64(higher) / float64(int(1)<<(levelBits*l)); ratio < 0.7 || ratio > 1.4 {
			t.Fatalf("cuts by level %v: level %d and higher %d of %d", byLevel, l, higher, len(cs))
		}
	}
	flat := cuts(bytes.Repeat([]byte{'u'}, 10*Max+5))
	for _, c := range flat[:len(flat)-1] {
		if c.end%Max != 0 && c.end%Min != 0 {
			t.Fatalf("a run of one byte cut at %d", c.end)
		}
	}
}

// TestSplit_Few: a big value takes few chunks (about 2^levelBits per
// level), not one per level-0 chunk.
func TestSplit_Few(t *testing.T) {
	data := randomBytes(9, 4<<20)
	cs := checkChunks(t, data)
	if n0 := len(cuts(data)); len(cs) > 60 || len(cs) >= n0/4 {
		t.Fatalf("4 MiB in %d chunks (%d level-0 cuts)", len(cs), n0)
	}
}

// TestSplit_Growing: a value that grows at its end, a few KB at a time,
// keeps most of its chunks from one version to the next: over 400
// versions the new chunks add up to a few times the final size (each byte
// is in a new chunk once per level), not to the sum of all versions, and
// no version takes many chunks.
func TestSplit_Growing(t *testing.T) {
	data := randomBytes(3, 0)
	have := map[string]bool{}
	stored, sum := 0, 0
	for v := range 400 {
		data = append(data, randomBytes(uint64(10+v), 2500)...)
		cs := checkChunks(t, data)
		if len(cs) > 50 {
			t.Fatalf("version %d (%d bytes): %d chunks", v, len(data), len(cs))
		}
		for _, c := range cs {
			if !have[string(c)] {
				have[string(c)] = true
				stored += len(c)
			}
		}
		sum += len(data)
	}
	if stored > (MaxLevel+2)*len(data) {
		t.Fatalf("400 versions up to %d bytes stored %d bytes of new chunks (%d in all versions)", len(data), stored, sum)
	}
	t.Logf("400 versions up to %d bytes: %d bytes of new chunks (%.1f× the last version; all versions %d bytes)", len(data), stored, float64(stored)/float64(len(data)), sum)
}

// TestSplit_Edit: a change in the middle changes only the chunks near it:
// the chunks before it, and all but a few after it, are the same.
func TestSplit_Edit(t *testing.T) {
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

// TestSplit_Fixed pins the cut points of a fixed input: they are part of
// what a store shares between checkpoints written by different versions.
func TestSplit_Fixed(t *testing.T) {
	var sizes []int
	for _, c := range Split(randomBytes(6, 1<<20)) {
		sizes = append(sizes, len(c))
	}
	want := []int{111131, 146855, 461890, 147127, 12957, 9204, 63473, 35892, 3299, 9863, 8525, 6095, 8445, 2675, 2810, 5515, 2533, 10287}
	if !slices.Equal(sizes, want) {
		t.Fatalf("cut sizes %v, want %v", sizes, want)
	}
}

func FuzzSplit(f *testing.F) {
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

func BenchmarkSplit(b *testing.B) {
	data := randomBytes(8, 1<<20)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		Split(data)
	}
}
