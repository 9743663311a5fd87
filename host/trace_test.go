package host_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store/sqlite"
)

// attrOf returns span s's attribute key, and whether it is set.
func attrOf(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func dumpRecorded(ss []sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, "  %s parent=%s %q %v %v\n", s.SpanContext().SpanID(), s.Parent().SpanID(), s.Name(), s.Status(), s.Attributes())
	}
	return b.String()
}

// TestTrace_CommitFailureMarked: a superstep whose commit fails (an
// injected, non-transient failure, no retry) has a span marked not
// committed (status Error, superstep.committed=false) with the failed
// store.commit beneath it; the failed response's terminal commit is a
// child of the response span, which ends with status Error. The response
// record holds the response span's trace context.
func TestTrace_CommitFailureMarked(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	var failed atomic.Bool
	b := setup(t, &setupOpts{cfg: &host.Config{CommitRetries: -1, CommitBackoff: time.Millisecond, TracerProvider: tp,
		Test: host.TestConfig{FaultFunc: func(_ context.Context, f *host.Fault) error {
			if f.Point == host.FaultCommitBefore && f.Step == 2 && failed.CompareAndSwap(false, true) {
				return errors.New("disk on fire")
			}
			return nil
		}}}})
	ctx := testCtx(t)
	r, err := b.host.Create(ctx, &host.CreateParams{Model: examples.Silent, Store: true, Metadata: map[string]string{"steps": "3"},
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	final, err := b.host.Wait(ctx, r.ID, "")
	if err != nil || final.Status != "failed" {
		t.Fatalf("Wait: %v, status %v; want failed", err, final)
	}
	shutdown(t, b.host) // the response span ends when the run's goroutine does
	spans := rec.Ended()
	byName := func(name string) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range spans {
			if s.Name() == name {
				out = append(out, s)
			}
		}
		return out
	}
	resps := byName("response")
	if len(resps) != 1 {
		t.Fatalf("%d response spans:\n%s", len(resps), dumpRecorded(spans))
	}
	resp := resps[0]
	if st, _ := attrOf(resp, "superstep.response.status"); resp.Status().Code != codes.Error || st.AsString() != "failed" {
		t.Fatalf("response span %v %v: want status Error, failed", resp.Status(), resp.Attributes())
	}
	sc := resp.SpanContext()
	want := fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
	if got, err := b.store.ResponseGet(ctx, r.ID); err != nil || got.TraceContext != want {
		t.Fatalf("stored trace context %q (%v), want the response span's %q", got.TraceContext, err, want)
	}
	steps := byName("superstep")
	if len(steps) != 2 {
		t.Fatalf("%d superstep spans, want 2:\n%s", len(steps), dumpRecorded(spans))
	}
	commitsUnder := func(parent sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range byName("store.commit") {
			if s.Parent().SpanID() == parent.SpanContext().SpanID() {
				out = append(out, s)
			}
		}
		return out
	}
	for _, s := range steps {
		if s.Parent().SpanID() != sc.SpanID() || s.SpanContext().TraceID() != sc.TraceID() {
			t.Fatalf("superstep span not a child of the response span:\n%s", dumpRecorded(spans))
		}
		n, _ := attrOf(s, "superstep.number")
		committed, ok := attrOf(s, "superstep.committed")
		cs := commitsUnder(s)
		switch n.AsInt64() {
		case 1:
			if !ok || !committed.AsBool() || s.Status().Code == codes.Error || len(cs) != 1 || cs[0].Status().Code == codes.Error {
				t.Fatalf("superstep 1: want committed, one store.commit:\n%s", dumpRecorded(spans))
			}
		case 2:
			if !ok || committed.AsBool() || s.Status().Code != codes.Error || len(cs) != 1 || cs[0].Status().Code != codes.Error ||
				!strings.Contains(cs[0].Status().Description, "disk on fire") {
				t.Fatalf("superstep 2: want not committed (status Error), its store.commit failed:\n%s", dumpRecorded(spans))
			}
		default:
			t.Fatalf("superstep span number %v", n.AsInt64())
		}
	}
	fin := commitsUnder(resp)
	if terminal, _ := attrOf(fin[0], "superstep.commit.terminal"); len(fin) != 1 || !terminal.AsBool() || fin[0].Status().Code == codes.Error {
		t.Fatalf("the failed response's terminal commit: want one store.commit under the response span:\n%s", dumpRecorded(spans))
	}
}

// TestTrace_Off: without Config.TracerProvider no trace context is stored,
// even when the request's ctx carries a span (tracing is the host's
// choice, not the caller's).
func TestTrace_Off(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(testCtx(t), "caller")
	defer span.End()
	r, err := b.host.Create(ctx, &host.CreateParams{Model: examples.Echo, Store: true,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.store.ResponseGet(ctx, r.ID); err != nil || got.TraceContext != "" {
		t.Fatalf("stored trace context %q (%v), want none", got.TraceContext, err)
	}
}

// BenchmarkHost_SilentSuperstepTraced is BenchmarkHost_SilentSuperstepNormal
// with tracing on (every span sampled, batched to an exporter that drops
// them): the cost of a superstep's spans.
func BenchmarkHost_SilentSuperstepTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), &sqlite.Options{Synchronous: sqlite.SynchronousNormal})
	if err != nil {
		b.Fatal(err)
	}
	h, err := host.New(s, &host.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxSupersteps: 1 << 30, TracerProvider: tp})
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
	benchSilent(b, h)
}
