package responses

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
)

func BenchmarkParseCreate(b *testing.B) {
	body := []byte(`{"model":"demo.echo","stream":true,"background":true,"metadata":{"steps":"3","step_delay_ms":"0"},
		"input":[{"role":"user","content":[{"type":"input_text","text":"hello there"}]},{"type":"function_call_output","call_id":"call_1","output":"approve"}]}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := parseCreate(body, 0); err != nil {
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

// bigRequest is a create request with n short user messages.
func bigRequest(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"demo.echo","input":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":"user","content":"item %d"}`, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkInputItems_Limit1 is one GET input_items?limit=1 (newest first)
// of a stored request of 200,000 items (about 7.9 MB): memory per call is
// bounded by the page, not by the request's items.
func BenchmarkInputItems_Limit1(b *testing.B) {
	req := bigRequest(200_000)
	b.ReportAllocs()
	b.SetBytes(int64(len(req)))
	for b.Loop() {
		page, err := inputItemsPage("resp_abc", req, nil, listQuery{limit: 1, desc: true})
		if err != nil || len(page.Data) != 1 {
			b.Fatal(page, err)
		}
	}
}
