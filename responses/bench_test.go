package responses

import (
	"net/http/httptest"
	"testing"
)

func BenchmarkParseCreate(b *testing.B) {
	body := []byte(`{"model":"demo.echo","stream":true,"background":true,"metadata":{"steps":"3","step_delay_ms":"0"},
		"input":[{"role":"user","content":[{"type":"input_text","text":"hello there"}]},{"type":"function_call_output","call_id":"call_1","output":"approve"}]}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := parseCreate(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSSEEvent(b *testing.B) {
	rec := httptest.NewRecorder()
	sw, err := newSSEWriter(rec, 0)
	if err != nil {
		b.Fatal(err)
	}
	data := []byte(`{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"hello","logprobs":[]}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		rec.Body.Reset()
		if err := sw.event("response.output_text.delta", data); err != nil {
			b.Fatal(err)
		}
	}
}
