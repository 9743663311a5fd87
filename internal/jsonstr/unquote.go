package jsonstr

import (
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Unquote returns the string the JSON string literal lit (its quotes
// included, JSON white space around it allowed) decodes to, as
// json.Unmarshal into a string decodes it: escapes resolved, each byte of
// invalid UTF-8 and each lone surrogate escape U+FFFD. ok is false when
// lit is not one JSON string literal. It allocates the result once, at
// its exact size, where json.Unmarshal allocates it twice (the unquoted
// bytes, then the string): for a request's 8 MiB text, 8 MiB less.
func Unquote(lit []byte) (s string, ok bool) {
	lit = trimSpace(lit)
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return "", false
	}
	body := lit[1 : len(lit)-1]
	n, ok := unquote(nil, body)
	if !ok {
		return "", false
	}
	if n == 0 {
		return "", true
	}
	b := make([]byte, n)
	unquote(b, body)
	return unsafe.String(&b[0], n), true
}

func trimSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// unquote decodes body, a JSON string literal without its quotes, into
// dst (which has room for it) or, with a nil dst, only measures it: it
// returns the decoded length. The rules are encoding/json's unquoteBytes,
// except that \' is refused here, as encoding/json's scanner refuses it
// before unquoting.
func unquote(dst, body []byte) (int, bool) {
	w := 0
	put := func(c byte) {
		if dst != nil {
			dst[w] = c
		}
		w++
	}
	putRune := func(r rune) {
		if dst != nil {
			utf8.EncodeRune(dst[w:], r)
		}
		w += utf8.RuneLen(r)
	}
	for r := 0; r < len(body); {
		c := body[r]
		switch {
		case c == '\\':
			r++
			if r >= len(body) {
				return 0, false
			}
			switch body[r] {
			case '"', '\\', '/':
				put(body[r])
			case 'b':
				put('\b')
			case 'f':
				put('\f')
			case 'n':
				put('\n')
			case 'r':
				put('\r')
			case 't':
				put('\t')
			case 'u':
				rr := getu4(body[r-1:])
				if rr < 0 {
					return 0, false
				}
				r += 5 // past the four hex digits; the loop's r++ is below
				if utf16.IsSurrogate(rr) {
					if rr1 := getu4(body[r:]); rr1 >= 0 {
						if dec := utf16.DecodeRune(rr, rr1); dec != unicode.ReplacementChar {
							r += 6
							putRune(dec)
							continue
						}
					}
					rr = unicode.ReplacementChar
				}
				putRune(rr)
				continue
			default:
				return 0, false
			}
			r++
		case c == '"' || c < ' ':
			return 0, false
		case c < utf8.RuneSelf:
			// A run of plain ASCII at once.
			j := r + 1
			for j < len(body) && body[j] >= ' ' && body[j] < utf8.RuneSelf && body[j] != '\\' && body[j] != '"' {
				j++
			}
			if dst != nil {
				copy(dst[w:], body[r:j])
			}
			w += j - r
			r = j
		default:
			rr, size := utf8.DecodeRune(body[r:])
			r += size
			if rr == utf8.RuneError && size == 1 {
				putRune(unicode.ReplacementChar)
				continue
			}
			if dst != nil {
				copy(dst[w:], body[r-size:r])
			}
			w += size
		}
	}
	return w, true
}

// getu4 decodes \uXXXX from the beginning of s, returning the hex value,
// or -1 (encoding/json's getu4).
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c = c - '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
