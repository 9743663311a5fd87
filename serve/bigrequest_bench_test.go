package serve_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/superstep/superstep/serve"
)

// BenchmarkBigRequest posts one 8 MiB demo echo per iteration to a server
// in this process (SQLite) and reports the bytes allocated per request
// byte (server and client together: run with -memprofile to tell them
// apart).
func BenchmarkBigRequest(b *testing.B) {
	for _, stream := range []bool{false, true} {
		name := "json"
		if stream {
			name = "stream"
		}
		b.Run(name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			addrc := make(chan net.Addr, 1)
			done := make(chan error, 1)
			go func() {
				done <- serve.Run(ctx, &serve.Config{Workflows: echoWorkflows, DB: filepath.Join(b.TempDir(), "big.db"), Addr: "127.0.0.1:0",
					Logger: quiet(), NoConsole: true, MaxBodyBytes: 32 << 20, KeepAlive: time.Hour, Listening: func(a net.Addr) { addrc <- a }})
			}()
			base := "http://" + (<-addrc).String()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					b.Error(err)
				}
			}()
			body, err := json.Marshal(map[string]any{"model": "echo", "input": bigText(8 << 20), "stream": stream})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				httpDo(b, http.MethodPost, base+"/v1/responses", body)
			}
		})
	}
}
