package localmodel_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkChatStream_Tokens reads a 256-token Chat Completions stream
// (token delay 0) with a plain HTTP client: the server's own throughput,
// without an SDK decoding the chunks. It reports tokens/s.
func BenchmarkChatStream_Tokens(b *testing.B) {
	srv := server(b, nil)
	reply := strings.TrimSpace(strings.Repeat("tok ", 256))
	body := []byte(`{"model":"m","stream":true,"metadata":{"reply":"` + reply + `"},"messages":[{"role":"user","content":"go"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || bytes.Count(data, []byte(`"content":"`)) != 257 {
			b.Fatalf("stream: %v", err)
		}
	}
	b.ReportMetric(float64(256*b.N)/b.Elapsed().Seconds(), "tokens/s")
}
