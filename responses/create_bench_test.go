package responses

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store/sqlite"
)

// benchW1Request is a blocking create of a 10-superstep silent run: the
// bench module's W1 (10 sequential steps, a 100-byte input) with the demo
// workflow.
var benchW1Request = []byte(`{"model":"` + examples.Silent + `","input":"` + string(bytes.Repeat([]byte("x"), 100)) +
	`","metadata":{"steps":"10"}}`)

// benchCreateHost returns a started host with the demo workflows over a
// SQLite store with synchronous=NORMAL (no fsync per commit), so that CPU,
// not the disk, shows.
func benchCreateHost(b *testing.B) *host.Host {
	b.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"),
		&sqlite.Options{Synchronous: sqlite.SynchronousNormal})
	if err != nil {
		b.Fatal(err)
	}
	h, err := host.New(st, &host.Config{Logger: testLogger()})
	if err != nil {
		b.Fatal(err)
	}
	if err := examples.Register(h); err != nil {
		b.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = h.Shutdown(ctx)
		_ = st.Close()
	})
	return h
}

// BenchmarkCreateBlocking_HTTP is one blocking POST /v1/responses of the
// W1 request over loopback HTTP (plain net/http client, keep-alive),
// eight at a time: the handler, the host's create and wait, and net/http
// on both sides. BenchmarkCreateBlocking_InProcess is the same run through
// host.Create and host.Wait; the difference is the HTTP path's cost.
func BenchmarkCreateBlocking_HTTP(b *testing.B) {
	h := benchCreateHost(b)
	handler, err := NewHandler(h, &Options{Logger: testLogger()})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	url := srv.URL + "/v1/responses"
	b.ReportAllocs()
	b.SetParallelism(4) // 8 goroutines on 2 CPUs: W1 c=8
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(url, "application/json", bytes.NewReader(benchW1Request))
			if err != nil {
				b.Error(err)
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"status":"completed"`)) {
				b.Errorf("status %d, %v: %.300s", resp.StatusCode, err, body)
				return
			}
		}
	})
}

func BenchmarkCreateBlocking_InProcess(b *testing.B) {
	h := benchCreateHost(b)
	p0, err := parseCreate(benchW1Request, 0) // once: a library caller has its params
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			p := *p0
			r, err := h.Create(ctx, &p)
			if err != nil {
				b.Error(err)
				return
			}
			if r, err = h.Wait(ctx, r.ID, ""); err != nil || r.Status != "completed" {
				b.Errorf("wait: %v", err)
				return
			}
		}
	})
}
