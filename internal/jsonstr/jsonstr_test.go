package jsonstr

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzAppend: Append writes what json.Marshal writes for the string, and
// Len is its length; the seeds run as a test.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\\b\f\n\r\t\x00\x1f<>&", "\u2028\u2029é☃", "\xff\xed\xbf\xbf\xf4\x90\x80\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := Append([]byte("x"), s); !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("Append(%q) = %q, want %q", s, got[1:], want)
		}
		if n := Len(s); n != len(want) {
			t.Fatalf("Len(%q) = %d, want %d", s, n, len(want))
		}
	})
}

// BenchmarkAppend: strings as the stream events hold them.
func BenchmarkAppend(b *testing.B) {
	for _, c := range []struct{ name, s string }{
		{"Type", "response.output_text.delta"},
		{"ID", "msg_0123456789abcdef0123456789abcdef_17"},
		{"Text50", "event-0017-eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"},
		{"Prose4K", strings.Repeat("The quick brown fox, it said, jumps over 12 lazy dogs. ", 75)},
		{"Escapes", strings.Repeat("<a href=\"x\">&amp;</a>\n", 20)},
	} {
		b.Run(c.name, func(b *testing.B) {
			dst := make([]byte, 0, 2*len(c.s)+64)
			b.SetBytes(int64(len(c.s)))
			for b.Loop() {
				dst = Append(dst[:0], c.s)
			}
		})
	}
}
