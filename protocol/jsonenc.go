package protocol

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/superstep/superstep/internal/jsonstr"
)

// The JSON primitives of the append-style encoder (wire.go): each appends
// what encoding/json.Marshal writes for the value, byte for byte (HTML
// escaping on, as Marshal has it), to dst. A step's frames are encoded
// into one buffer with them instead of a Marshal call per event, which
// cost a reflective walk, a scratch buffer and a copy per event and, for
// every value with a MarshalJSON of its own, a second buffer and a
// validating copy (FuzzWireEncoding compares them).

// longText is the length from which a sizer measures a string's encoding
// exactly: a shorter one is taken at its length (the buffers' slack
// covers its escapes), a longer one would otherwise grow its buffer by
// copies as big as itself.
const longText = 2 << 10

// sizer tells the encoded length of the strings a buffer is sized for,
// measuring a long string once for the frames that repeat it (a message's
// text is in five frames of its step).
type sizer struct {
	s string
	n int
	// splice: the frame being sized splices a text of SpliceMin bytes or
	// more (see quoteCache.text), which then takes no room in it.
	splice bool
}

// text is about the length of s encoded (quotes included): exact for a
// long string.
func (z *sizer) text(s string) int {
	if len(s) < longText || z == nil {
		return len(s) + 2
	}
	if z.splice && len(s) >= SpliceMin {
		return 0
	}
	// The same string again (its frames share it) compares equal at once:
	// Go compares the data pointers before the bytes.
	if s != z.s {
		z.s, z.n = s, jsonstr.Len(s)
	}
	return z.n
}

// quoted is a string and its encoding (jsonstr.Append) as an earlier
// frame's payload holds it.
type quoted struct {
	s string
	b []byte
}

// quoteCache encodes the id and the text of the item a Seq is writing
// the frames of once for all of them: a message's six frames hold its id
// six times and its text four times (W3's 200 messages: 2,000 strings
// encoded again). The encodings it keeps are bytes of frames already
// written, which no one writes again, except those of a frame whose
// encoding failed: Seq drops the cache then (forget). A nil cache
// encodes each string.
//
// A text of SpliceMin bytes or more is not appended: its encoding, made
// once in an allocation of its own, is listed in pend as a splice at the
// place it goes, and Seq.push gives the frame its splices. noSplice turns
// that off (tests compare with the frames as they were).
type quoteCache struct {
	lastID, lastText quoted
	pend             []Splice // At: offset in the dst being appended to
	noSplice         bool
}

// id appends s, an item's id.
func (q *quoteCache) id(dst []byte, s string) []byte {
	if q == nil {
		return jsonstr.Append(dst, s)
	}
	return q.lastID.append(dst, s)
}

// text appends s, an item's text (or a function call's arguments), or
// splices a long one.
func (q *quoteCache) text(dst []byte, s string) []byte {
	if q == nil {
		return jsonstr.Append(dst, s)
	}
	if len(s) >= SpliceMin && !q.noSplice {
		k := &q.lastText
		if k.b == nil || s != k.s {
			k.s, k.b = s, jsonstr.Append(make([]byte, 0, jsonstr.Len(s)), s)
		}
		q.pend = append(q.pend, Splice{At: len(dst), Bytes: k.b})
		return dst
	}
	return q.lastText.append(dst, s)
}

// forget drops what the cache holds (and the splices of a frame whose
// encoding failed).
func (q *quoteCache) forget() { *q = quoteCache{pend: q.pend[:0], noSplice: q.noSplice} }

// append appends s encoded: a copy of the encoding kept when s is the
// string kept (compared by pointer first: the frames of an item share its
// strings), else a new encoding, then kept.
func (k *quoted) append(dst []byte, s string) []byte {
	if k.b != nil && s == k.s {
		return append(dst, k.b...)
	}
	start := len(dst)
	dst = jsonstr.Append(dst, s)
	k.s, k.b = s, dst[start:len(dst):len(dst)]
	return dst
}

// appendStringPtr appends *s, or null for nil.
func appendStringPtr(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return jsonstr.Append(dst, *s)
}

// appendIntPtr appends *n, or null for nil.
func appendIntPtr(dst []byte, n *int64) []byte {
	if n == nil {
		return append(dst, "null"...)
	}
	return strconv.AppendInt(dst, *n, 10)
}

// appendFloatPtr appends *f as encoding/json formats a float64 (ES6
// number formatting), or null for nil; NaN and infinities are an error,
// as they are to encoding/json.
func appendFloatPtr(dst []byte, f *float64) ([]byte, error) {
	if f == nil {
		return append(dst, "null"...), nil
	}
	v := *f
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return dst, fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(v, 'g', -1, 64))
	}
	format := byte('f')
	if abs := math.Abs(v); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, v, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9, as encoding/json has it
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, nil
}

// appendBool appends b.
func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

// appendRaw appends raw JSON as encoding/json writes a json.RawMessage:
// null for nil, else compacted with <, >, &, U+2028 and U+2029 escaped,
// and an error when it is not valid JSON. Raw values here (a request's
// echoes, annotations) are usually compact already: those are copied as
// they are; any other goes through encoding/json.
func appendRaw(dst []byte, raw json.RawMessage) ([]byte, error) {
	if raw == nil {
		return append(dst, "null"...), nil
	}
	plain := len(raw) > 0
	for i := 0; plain && i < len(raw); i++ {
		switch raw[i] {
		case ' ', '\t', '\n', '\r', '<', '>', '&':
			plain = false
		case 0xE2: // U+2028 and U+2029 (E2 80 A8/A9); other E2 runes (’ “ … €) are plain
			plain = !(i+2 < len(raw) && raw[i+1] == 0x80 && (raw[i+2] == 0xA8 || raw[i+2] == 0xA9))
		}
	}
	if plain && json.Valid(raw) {
		return append(dst, raw...), nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// appendRawList appends a list of raw values: null for nil, [] for empty.
func appendRawList(dst []byte, list []json.RawMessage) ([]byte, error) {
	if list == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '[')
	for i, raw := range list {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendRaw(dst, raw); err != nil {
			return dst, err
		}
	}
	return append(dst, ']'), nil
}

// appendStringMap appends m with its keys sorted, as encoding/json does;
// null for nil.
func appendStringMap(dst []byte, m map[string]string) []byte {
	if m == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '{')
	if len(m) > 0 {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonstr.Append(dst, k)
			dst = append(dst, ':')
			dst = jsonstr.Append(dst, m[k])
		}
	}
	return append(dst, '}')
}

// nonNil returns list, or an empty list for nil (encoded [], not null).
func nonNil(list []json.RawMessage) []json.RawMessage {
	if list == nil {
		return []json.RawMessage{}
	}
	return list
}
