package eventrec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/superstep/superstep/store"
)

// benchRecords are records as the hosts write them: W1's commit (a few
// short events), W3's (many short deltas), and a committed 1 MB reply
// whose text recurs in five events.
func benchRecords() map[string][]store.EventInput {
	w1 := events(`{"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message"}}`,
		`{"type":"response.output_text.delta","delta":"hello","sequence_number":2}`,
		`{"type":"response.completed","response":{"id":"resp_1","status":"completed"}}`)
	// A demo.echo reply's final commit: its response.completed is over
	// MinShared (scanned) and shares nothing.
	completed := `{"type":"response.completed","sequence_number":8,"response":{"id":"resp_0123456789abcdef0123456789abcdef",` +
		`"object":"response","created_at":1796394420,"status":"completed","model":"demo.echo","output":[{"id":"msg_1",` +
		`"type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hello world",` +
		`"annotations":[]}]}],` + strings.Repeat(`"field":"value",`, 45) + `"usage":null}}`
	w1Final := events(`{"type":"response.in_progress","response":{`+strings.Repeat(`"field":"value",`, 45)+`"x":1}}`,
		`{"type":"response.output_item.added","item":{"id":"msg_1"}}`,
		`{"type":"response.output_text.delta","delta":"hello world"}`,
		`{"type":"response.output_text.done","text":"hello world"}`,
		`{"type":"response.output_item.done","item":{"id":"msg_1","content":[{"text":"hello world"}]}}`, completed)
	var w3 []store.EventInput
	for i := range 1200 {
		w3 = append(w3, store.EventInput{Seq: int64(i), Type: "response.output_text.delta",
			Payload: fmt.Appendf(nil, `{"type":"response.output_text.delta","item_id":"msg_1","delta":"tok%d ","sequence_number":%d}`, i, i)})
	}
	text := quoted(strings.Repeat("lorem ipsum \"dolor\" <sit> amet\n", 1<<15)) // ~1 MB
	reply := events(`{"type":"response.output_text.delta","delta":`+text+`}`,
		`{"type":"response.output_text.done","text":`+text+`}`,
		`{"type":"response.content_part.done","part":{"text":`+text+`}}`,
		`{"type":"response.output_item.done","item":{"content":[{"text":`+text+`}]}}`,
		`{"type":"response.completed","response":{"output":[{"content":[{"text":`+text+`}]}]}}`)
	return map[string][]store.EventInput{"W1": w1, "W1Final": w1Final, "W3": w3, "Reply1MB": reply}
}

// BenchmarkEncodeW3Commit is Encode of the bench's W3 commit (w3Record),
// the record most of that workload's CPU goes to after the projector.
func BenchmarkEncodeW3Commit(b *testing.B) {
	evs := w3Record(b)
	in := 0
	for _, ev := range evs {
		in += len(ev.Payload)
	}
	b.SetBytes(int64(in))
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = len(Encode(evs))
	}
	b.ReportMetric(float64(n), "record-B")
}

// plain is the encoding before records shared strings (Size and Append).
func plain(evs []store.EventInput) []byte {
	size := 0
	for _, ev := range evs {
		size += Size(ev.Type, ev.Payload)
	}
	data := make([]byte, 0, size)
	for _, ev := range evs {
		data = Append(data, ev.Type, ev.Payload)
	}
	return data
}

func BenchmarkEncode(b *testing.B) {
	for name, evs := range benchRecords() {
		in := 0
		for _, ev := range evs {
			in += len(ev.Payload)
		}
		for _, enc := range []struct {
			name string
			f    func([]store.EventInput) []byte
		}{{"Plain", plain}, {"Encode", Encode}} {
			b.Run(name+"/"+enc.name, func(b *testing.B) {
				b.SetBytes(int64(in))
				b.ReportAllocs()
				var n int
				for b.Loop() {
					n = len(enc.f(evs))
				}
				b.ReportMetric(float64(n), "record-B")
			})
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	for name, evs := range benchRecords() {
		for _, enc := range []struct {
			name string
			f    func([]store.EventInput) []byte
		}{{"Plain", plain}, {"Encode", Encode}} {
			data := enc.f(evs)
			b.Run(name+"/"+enc.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Decode(data, int64(len(evs))); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
