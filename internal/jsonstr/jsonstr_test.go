package jsonstr

import (
	"bytes"
	"encoding/json"
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
