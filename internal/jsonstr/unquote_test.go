package jsonstr

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"
)

// unquoteCases are JSON texts that Unquote must read as json.Unmarshal
// into a string does: escapes of every kind, surrogate pairs and lone
// surrogates, invalid UTF-8, and texts that are not one string.
var unquoteCases = []string{
	`""`, `"a"`, ` "a" `, "\t\"a\"\n", `"plain ascii text"`, `"\"\\\/\b\f\n\r\t"`, `"\u0000\u001f\u0041\u00e9\u2028"`,
	`"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`, `"\ud83dx"`, `"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`, `"\uD83D\uDE00"`,
	"\"caf\xc3\xa9\"", "\"\xff\xfe\"", "\"\xed\xa0\x80\"", "\"a\xe2\x82\"", "\"\xef\xbf\xbd\"",
	`"\u003chtml\u003e \u0026"`, `"tab	in"`, "\"ctl\x01\"", `"\x"`, `"\u12"`, `"\u12g4"`, `"unterminated`, `"a"b"`,
	`"\"`, `"trailing\\"`, `123`, `null`, `{"a":1}`, `["a"]`, `true`, ``, `"`, `'a'`,
}

func checkUnquote(t *testing.T, lit []byte) {
	t.Helper()
	var want string
	werr := json.Unmarshal(lit, &want)
	if werr == nil && string(trimSpace(lit)) == "null" {
		werr = errors.New("null: not a string (Unmarshal leaves the string as it was)")
	}
	got, ok := Unquote(lit)
	if ok != (werr == nil) || got != want {
		t.Fatalf("Unquote(%q) = %q, %v; json.Unmarshal: %q, %v", lit, got, ok, want, werr)
	}
}

// TestUnquote: Unquote agrees with json.Unmarshal on the cases above and
// on random strings of ASCII, escapes and (invalid) UTF-8 as encoding/json
// writes them and as raw bytes.
func TestUnquote(t *testing.T) {
	for _, c := range unquoteCases {
		checkUnquote(t, []byte(c))
	}
	r := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "z", " ", "\"", "\\", "\n", "<", "&", "\x00", "\x7f", "é", "😀", "\xff", "\xe2\x82", "\u2028",
		`\u00e9`, `\ud83d`, `\ude00`, `\/`, `\"`, `\\`, `\t`}
	for range 20000 {
		var raw []byte
		for range r.IntN(12) {
			raw = append(raw, pieces[r.IntN(len(pieces))]...)
		}
		enc, err := json.Marshal(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		checkUnquote(t, enc)
		checkUnquote(t, append(append([]byte{'"'}, raw...), '"'))
	}
}

// FuzzUnquote: Unquote agrees with json.Unmarshal on any input.
func FuzzUnquote(f *testing.F) {
	for _, c := range unquoteCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, lit []byte) { checkUnquote(t, lit) })
}

// TestUnquote_OneAllocation: a long text with escapes is decoded in one
// allocation of its size, where json.Unmarshal makes two.
func TestUnquote_OneAllocation(t *testing.T) {
	text := make([]byte, 1<<20)
	for i := range text {
		text[i] = "ab<\"\n"[i%5]
	}
	lit, err := json.Marshal(string(text))
	if err != nil {
		t.Fatal(err)
	}
	var s string
	if n := testing.AllocsPerRun(5, func() { s, _ = Unquote(lit) }); n != 1 {
		t.Fatalf("Unquote: %v allocations, want 1", n)
	}
	if s != string(text) {
		t.Fatal("Unquote did not return the text")
	}
}
