// Package jsonstr writes JSON strings byte for byte as encoding/json
// writes them (HTML escaping on, as json.Marshal has it), into a buffer the
// caller can size exactly beforehand (Len).
package jsonstr

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// jsonSafe[b] says ASCII byte b is written as it is inside a JSON string
// (encoding/json's htmlSafeSet): not a control character, '"', '\\', or
// one of <, > and & (escaped for HTML).
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()

// Append appends s as a JSON string the way encoding/json does:
// short escapes for \b \f \n \r \t, \u00XX for other control characters
// and <, >, &, \ufffd for each byte of invalid UTF-8, and \u2028, \u2029
// escaped.
func Append(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if jsonSafe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Len is the length of what Append appends for s.
func Len(s string) int {
	n := 2 + len(s)
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if !jsonSafe[b] {
				switch b {
				case '\\', '"', '\b', '\f', '\n', '\r', '\t':
					n++
				default:
					n += 5
				}
			}
			i++
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			n += 5 // one byte becomes \ufffd
		case c == '\u2028' || c == '\u2029':
			n += 3 // three bytes become \u202X
		}
		i += size
	}
	return n
}
