package workflow

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// mustEncode is encodeValue(v), failing t on an error.
func mustEncode(t *testing.T, v any) typedValue {
	t.Helper()
	tv, err := encodeValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return tv
}

// TestMarshalHeader_AsMarshal: a header with a big value is spliced, byte
// for byte as json.Marshal writes it, with values that hold "v": and
// numbers themselves, in queues, batches, fan-ins and pending requests.
func TestMarshalHeader_AsMarshal(t *testing.T) {
	val := func(v any) typedValue { return mustEncode(t, v) }
	big := strings.Repeat(`"v":1 <&> "v":`+"\u2028\n", 10<<10)
	for _, withBig := range []bool{true, false} {
		first := val("small")
		if withBig {
			first = val(big)
		}
		h := &header{Version: 1, Workflow: `w"v":0`, Fingerprint: "f", Step: 3, Status: Running, Failure: `"v":2`,
			Queues: []queueJSON{
				{Target: "a", Messages: []envJSON{{Source: "s", Value: first}, {Value: val(12)}, {Value: typedValue{}}}},
				{Target: "b", Messages: []envJSON{{IsBatch: true, Batch: []typedValue{val(`"v":5`), val(7)}}, {IsBatch: true}}},
			},
			FanIns:  [][][]envJSON{{{{Value: val("x")}}, {}}},
			Pending: []requestJSON{{ID: "r", ExecutorID: "e", Payload: val(big[:100]), ResponseType: "any"}},
			State:   []string{`"v":9`}, Executors: []string{}}
		want, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got, err := marshalHeader(h)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("big=%v: %d bytes differ from json.Marshal's %d: %.300q", withBig, len(got), len(want), got)
		}
		if again, _ := json.Marshal(h); !bytes.Equal(again, want) {
			t.Fatal("marshalHeader left the header changed")
		}
		// json.Marshal allocated about three times the header here.
		if alloc := after.TotalAlloc - before.TotalAlloc; withBig && float64(alloc) > 1.2*float64(len(want)) {
			t.Fatalf("marshalHeader allocated %d bytes for a header of %d", alloc, len(want))
		}
	}
}

// TestEncodeValue_BigStringOnce: a big string value is encoded as
// json.Marshal encodes it, into one buffer of its size (Marshal grew its
// buffer by doubling and copied the result out).
func TestEncodeValue_BigStringOnce(t *testing.T) {
	s := strings.Repeat("text <&> \"quoted\"\n\u2028\xff", 20<<10)
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC() // json.Marshal's pooled buffer: dropped, as between requests
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	tv, err := encodeValue(s)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if tv.T != "string" || !bytes.Equal(tv.V, want) {
		t.Fatalf("encoded %s %.200q, want string %.200q", tv.T, tv.V, want)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; float64(alloc) > 1.1*float64(len(want)) {
		t.Fatalf("encoding %d bytes allocated %d", len(want), alloc)
	}
}

// TestCompletionRecord_AsMarshal: a completion's journal record with a big
// state write is spliced byte for byte as json.Marshal writes it (values
// that hold "v": and numbers themselves, in sends, events, writes and
// annotations), and reads back as the record.
func TestCompletionRecord_AsMarshal(t *testing.T) {
	val := func(v any) typedValue { return mustEncode(t, v) }
	big := strings.Repeat(`"v":1 <&> "v":`+"\u2028\n", 10<<10)
	rec := completionRec{Attempt: 2, Sends: []typedValue{val(`"v":3`), {}},
		Events:      []completionEvent{{Value: val(4), Intermediate: true}},
		Writes:      []completionWrite{{Key: `"v":5`, Value: val(big)}, {Key: "gone", Deleted: true}},
		Annotations: []completionNote{{Path: []string{`"v":6`}, Value: val("note")}}}
	want, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	vals := []*typedValue{&rec.Sends[0], &rec.Sends[1], &rec.Events[0].Value, &rec.Writes[0].Value, &rec.Writes[1].Value, &rec.Annotations[0].Value}
	got, err := marshalSpliced(&rec, vals)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%d bytes differ from json.Marshal's %d: %.300q", len(got), len(want), got)
	}
	var back completionRec
	if err := json.Unmarshal(got, &back); err != nil || string(back.Writes[0].Value.V) != string(rec.Writes[0].Value.V) {
		t.Fatalf("read back: %v", err)
	}
}
