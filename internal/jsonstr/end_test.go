package jsonstr

import "testing"

// endBytewise is End as a walk of every byte, a backslash skipping the
// byte after it.
func endBytewise(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return len(b), false
}

// FuzzEnd: End, jumping from quote to quote, ends every string where the
// bytewise walk does, on any bytes.
func FuzzEnd(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b"`, `"a\\"b"`, `"\\\"x\\\\"`, `"\`, `"""`, `"a\\\\\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := range b {
			if b[i] != '"' {
				continue
			}
			gotEnd, gotOK := End(b, i)
			wantEnd, wantOK := endBytewise(b, i)
			if gotEnd != wantEnd || gotOK != wantOK {
				t.Fatalf("End(%q, %d) = %d, %v; bytewise %d, %v", b, i, gotEnd, gotOK, wantEnd, wantOK)
			}
		}
	})
}
