package eventrec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/superstep/superstep/store"
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

// record encodes events typ<first>..typ<last> with payloads naming them.
func record(first, last int64) (store.EventRecord, []byte) {
	var data []byte
	for seq := first; seq <= last; seq++ {
		data = Append(data, fmt.Sprintf("t%d", seq), fmt.Appendf(nil, "p%d", seq))
	}
	return store.EventRecord{FirstSeq: first, LastSeq: last, Step: 7}, data
}

func TestPage(t *testing.T) {
	add := func(p *Page, first, last int64) bool {
		t.Helper()
		full, err := p.Add(record(first, last))
		if err != nil {
			t.Fatal(err)
		}
		return full
	}
	got := func(p *Page) string {
		var b strings.Builder
		for _, ev := range p.Events {
			fmt.Fprintf(&b, "%d:%s:%s:%d ", ev.Seq, ev.Type, ev.Payload, ev.Step)
		}
		return b.String()
	}

	// From inside a record, through the next; a record wholly before the
	// page (the one holding the seq before it) adds nothing.
	p := NewPage("r", 4, 10, 0)
	if add(p, 0, 2) || add(p, 3, 5) || add(p, 6, 6) {
		t.Fatal("page of 10 full after 3 events")
	}
	if s := got(p); s != "4:t4:p4:7 5:t5:p5:7 6:t6:p6:7 " {
		t.Fatalf("page = %s", s)
	}
	// A gap (damage) shows in the seqs instead of being papered over.
	if add(p, 9, 9); p.Events[len(p.Events)-1].Seq != 9 {
		t.Fatalf("after a gap: %s", got(p))
	}

	// The limit ends the page inside a record.
	p = NewPage("r", 1, 2, 0)
	if !add(p, 0, 5) || got(p) != "1:t1:p1:7 2:t2:p2:7 " {
		t.Fatalf("limited page = %s", got(p))
	}
	// MaxBytes: the event that reaches it is the last (payloads are 2
	// bytes: 3 events reach 5).
	p = NewPage("r", 0, 100, 5)
	if add(p, 0, 1) || !add(p, 2, 5) || len(p.Events) != 3 {
		t.Fatalf("byte-bounded page = %s", got(p))
	}

	for name, rec := range map[string]store.EventRecord{
		"RangeLongerThanData": {FirstSeq: 0, LastSeq: 3},
		"DataLongerThanRange": {FirstSeq: 0, LastSeq: 1},
		"Reversed":            {FirstSeq: 2, LastSeq: 1},
	} {
		_, data := record(0, 2)
		if _, err := NewPage("r", 0, 100, 0).Add(rec, data); !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("%s: %v, want store.ErrCorrupt", name, err)
		}
	}
}
