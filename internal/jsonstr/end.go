package jsonstr

import "bytes"

// End returns the index just after the JSON string whose opening quote is
// b[i], and whether the string is closed (if not, len(b)). A quote closes
// the string unless an odd run of backslashes precedes it; End jumps from
// quote to quote (bytes.IndexByte), so a long string (megabytes of a
// request's input) is not walked a byte at a time. On bytes that are not
// JSON it finds quoted runs all the same.
func End(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			break
		}
		q += j
		n := 0
		for k := q - 1; k > i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, true
		}
		j = q + 1
	}
	return len(b), false
}
