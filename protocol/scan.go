package protocol

import (
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/superstep/superstep/internal/jsonstr"
)

// The functions below walk JSON that json.Valid accepted: they find where
// a value ends without decoding it, so that the reader visits an object's
// members and an array's elements as sub-slices of the input, and skipping
// an item of a large request costs neither a copy nor an allocation.

var errNotValid = errors.New("protocol: JSON walked before it was validated")

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd returns the index just after the string that starts at i
// (len(b) for one not closed).
func stringEnd(b []byte, i int) int {
	end, _ := jsonstr.End(b, i)
	return end
}

// valueEnd returns the index just after the value that starts at i.
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// eachMember calls fn with the key and raw value of each member of the
// object b (valid JSON), in order.
func eachMember(b []byte, fn func(key string, val []byte) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errNotValid
	}
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] != '}' {
		ks := i
		i = stringEnd(b, i)
		key := decodeKey(b[ks:i])
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return errNotValid
		}
		vs := skipSpace(b, i+1)
		i = valueEnd(b, vs)
		if err := fn(key, b[vs:i]); err != nil {
			return err
		}
		if i = skipSpace(b, i); i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	if i >= len(b) {
		return errNotValid
	}
	return nil
}

// eachElement calls fn with the index and raw value of each element of
// the array b (valid JSON), in order.
func eachElement(b []byte, fn func(i int, val []byte) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return errNotValid
	}
	i = skipSpace(b, i+1)
	for n := 0; i < len(b) && b[i] != ']'; n++ {
		vs := i
		i = valueEnd(b, vs)
		if err := fn(n, b[vs:i]); err != nil {
			return err
		}
		if i = skipSpace(b, i); i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	if i >= len(b) {
		return errNotValid
	}
	return nil
}

// decodeKey returns the string a quoted JSON key holds, as encoding/json
// decodes it (escapes resolved, invalid UTF-8 replaced).
func decodeKey(q []byte) string {
	plain := len(q) >= 2
	for _, c := range q {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(q[1 : len(q)-1])
	}
	var s string
	_ = json.Unmarshal(q, &s) // q is a valid JSON string
	return s
}
