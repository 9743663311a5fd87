package eventrec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	in := []Event{
		{Type: "response.created", Payload: []byte(`{"sequence_number":0}`)},
		{Type: "nil.payload", Payload: nil},
		{Type: "empty.payload", Payload: []byte{}},
		{Type: "", Payload: []byte("no type")},
		{Type: "big", Payload: bytes.Repeat([]byte{0xff}, 70000)}, // a 3-byte length
		{Type: "héllo", Payload: []byte{0}},
	}
	var data []byte
	size := 0
	for _, ev := range in {
		data = Append(data, ev.Type, ev.Payload)
		size += Size(ev.Type, ev.Payload)
	}
	if size != len(data) {
		t.Fatalf("Size sums to %d, encoding is %d bytes", size, len(data))
	}
	out, err := Decode(data, int64(len(in)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if out[i].Type != in[i].Type || !bytes.Equal(out[i].Payload, in[i].Payload) || (out[i].Payload == nil) != (in[i].Payload == nil) {
			t.Fatalf("event %d: got %q %q (nil %v), want %q %q (nil %v)", i, out[i].Type, out[i].Payload,
				out[i].Payload == nil, in[i].Type, in[i].Payload, in[i].Payload == nil)
		}
	}
	// A payload is capped: appending to it must not overwrite the next
	// event's bytes in the shared data.
	_ = append(out[0].Payload, "XXXX"...)
	again, err := Decode(data, int64(len(in)))
	if err != nil || again[1].Type != "nil.payload" {
		t.Fatalf("after appending to a payload: %+v, %v", again, err)
	}
}

// TestFormat pins the bytes: the SQL migrations write them without this
// package.
func TestFormat(t *testing.T) {
	got := Append(Append(nil, "ab", []byte("xyz")), "c", nil)
	want := []byte{2, 'a', 'b', 4, 'x', 'y', 'z', 1, 'c', 0}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding %v, want %v", got, want)
	}
	long := Append(nil, "t", make([]byte, 200))
	if n, _ := binary.Uvarint(long[2:]); n != 201 || long[2] != 0xc9 || long[3] != 0x01 {
		t.Fatalf("200-byte payload length encoded as % x", long[2:4])
	}
}

func TestSkip(t *testing.T) {
	var data []byte
	for _, typ := range []string{"a", "b", "c"} {
		data = Append(data, typ, []byte(typ))
	}
	d := NewDecoder(data)
	if err := d.Skip(2); err != nil {
		t.Fatal(err)
	}
	ev, ok, err := d.Next()
	if err != nil || !ok || ev.Type != "c" || !d.Done() {
		t.Fatalf("after Skip(2): %+v %v %v done=%v", ev, ok, err, d.Done())
	}
	if err := NewDecoder(data).Skip(4); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Skip past the end: %v, want ErrCorrupt", err)
	}
}

func TestDecodeRejectsCorrupt(t *testing.T) {
	good := Append(Append(nil, "ab", []byte("xyz")), "c", nil)
	cases := map[string]struct {
		data  []byte
		count int64
		want  string
	}{
		"Truncated":      {good[:5], 2, "run past the end"},
		"TruncatedType":  {[]byte{9, 'a'}, 1, "run past the end"},
		"BadVarint":      {[]byte{0x80}, 1, "bad length"},
		"TooFewEvents":   {good, 3, "2 events where"},
		"TooManyEvents":  {good, 1, "2 events where"},
		"NoLengthAfter":  {[]byte{1, 'a'}, 1, "bad length"},
		"HugeLength":     {append([]byte{1, 'a'}, binary.AppendUvarint(nil, 1<<62)...), 1, "run past the end"},
		"EmptyWithCount": {nil, 1, "0 events where"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Decode(tc.data, tc.count)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode: %v, want ErrCorrupt mentioning %q", err, tc.want)
			}
		})
	}
}
