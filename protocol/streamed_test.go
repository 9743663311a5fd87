package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

// requestStreamedJSON is what RequestStreamed replaced: a decode of the
// whole request for one field.
func requestStreamedJSON(request []byte) bool {
	var req struct {
		Stream *bool `json:"stream"`
	}
	return json.Unmarshal(request, &req) == nil && req.Stream != nil && *req.Stream
}

func TestRequestStreamed(t *testing.T) {
	for _, tc := range []struct {
		req  string
		want bool
	}{
		{`{"model":"m","input":"hi","stream":true}`, true},
		{`{"stream": true , "model":"m"}`, true},
		{"{\n\t\"input\":\"a \\\"stream\\\":true\",\n\t\"stream\":\ttrue\n}", true},
		{`{"model":"m","input":[{"role":"user","content":"\"stream\":true"}],"stream":false}`, false},
		{`{"model":"m","metadata":{"stream":"true"},"input":"x"}`, false},
		{`{"model":"m","input":"x"}`, false},
		{`{"stream":null}`, false},
		{`{"stream":"true"}`, false},
		{`{}`, false},
		{``, false},
		{`[true]`, false},
		{`{"stream":tru`, false},
		{`{"input":"unterminated, "stream":true}`, false},
	} {
		if got := RequestStreamed([]byte(tc.req)); got != tc.want {
			t.Errorf("RequestStreamed(%s) = %v, want %v", tc.req, got, tc.want)
		}
	}
}

// FuzzRequestStreamed: no input panics, and a body ParseCreate accepts
// reads as the full decode reads it.
func FuzzRequestStreamed(f *testing.F) {
	for _, s := range []string{`{"model":"m","input":"hi","stream":true}`, `{"model":"m","input":[{"role":"user","content":"x"}],"stream":false,"metadata":{"stream":"true"}}`, `{"stream":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got := RequestStreamed(body)
		if _, err := ParseCreate(body, 0); err != nil {
			return
		}
		if want := requestStreamedJSON(body); got != want {
			t.Fatalf("RequestStreamed(%q) = %v, the decode says %v", body, got, want)
		}
	})
}

// BenchmarkRequestStreamed: the field of an 8 MiB request, by a scan and by
// the decode it replaced.
func BenchmarkRequestStreamed(b *testing.B) {
	body, _ := json.Marshal(map[string]any{"model": "m", "input": strings.Repeat("a \"long\" <input> & more\n", 8<<20/25), "stream": true})
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if !RequestStreamed(body) {
				b.Fatal("not streamed")
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if !requestStreamedJSON(body) {
				b.Fatal("not streamed")
			}
		}
	})
}
