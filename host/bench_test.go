package host_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
)

// benchHost returns a started host over a fresh SQLite store (o nil: the
// defaults, synchronous=FULL).
func benchHost(b *testing.B, o ...*sqlite.Options) *host.Host {
	b.Helper()
	var opts *sqlite.Options
	if len(o) > 0 {
		opts = o[0]
	}
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), opts)
	if err != nil {
		b.Fatal(err)
	}
	h, err := host.New(s, &host.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxSupersteps: 1 << 30})
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
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Shutdown(ctx)
		_ = s.Close()
	})
	return h
}

func benchCreate(b *testing.B, h *host.Host, model string, md map[string]string) *store.Response {
	b.Helper()
	r, err := h.Create(context.Background(), &host.CreateParams{Model: model, Store: true, Metadata: md,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "bench"}}})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkHost_SilentSuperstep measures one durable superstep (run it,
// commit its checkpoint to SQLite with synchronous=FULL) of one run.
func BenchmarkHost_SilentSuperstep(b *testing.B) {
	benchSilent(b, benchHost(b))
}

// BenchmarkHost_SilentSuperstepNormal is BenchmarkHost_SilentSuperstep
// with synchronous=NORMAL (no fsync per commit in WAL mode), so that the
// host's own CPU cost of a superstep shows through the disk's.
func BenchmarkHost_SilentSuperstepNormal(b *testing.B) {
	benchSilent(b, benchHost(b, &sqlite.Options{Synchronous: sqlite.SynchronousNormal}))
}

func benchSilent(b *testing.B, h *host.Host) {
	b.ReportAllocs()
	b.ResetTimer()
	r := benchCreate(b, h, examples.Silent, map[string]string{"steps": strconv.Itoa(b.N)})
	if _, err := h.Wait(context.Background(), r.ID, ""); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkHost_EchoResponse measures a whole response: create (durable
// response.created), one superstep with one message item, terminal event,
// and Wait.
func BenchmarkHost_EchoResponse(b *testing.B) {
	h := benchHost(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r := benchCreate(b, h, examples.Echo, nil)
		if _, err := h.Wait(context.Background(), r.ID, ""); err != nil {
			b.Fatal(err)
		}
	}
}
