// Package otlptest is a real OTLP trace receiver for tests: an HTTP server
// on 127.0.0.1 that decodes the protobuf ExportTraceServiceRequest an
// OpenTelemetry exporter posts to /v1/traces (New), or a gRPC server of the
// OTLP TraceService (NewGRPC), keeping every span, so that a test can point
// a `superstep serve` child process at it (Env) and check the spans it
// exported.
//
// It is a test harness (see internal/testkit): only tests import it.
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is a received span, its ids hex-encoded (Parent "" for a root).
type Span struct {
	Service                 string // the resource's service.name
	TraceID, SpanID, Parent string
	Name                    string
	Kind                    tracepb.Span_SpanKind
	// Attrs holds string, int64, bool, float64 or []string values.
	Attrs                map[string]any
	StatusError          bool
	StatusMessage        string
	StartNanos, EndNanos uint64
	Links                int
}

// Receiver is a running OTLP trace endpoint.
type Receiver struct {
	url      string // http://127.0.0.1:port
	protocol string // OTEL_EXPORTER_OTLP_PROTOCOL
	mu       sync.Mutex
	got      []Span
}

// New starts an OTLP/HTTP receiver, closed when tb ends.
func New(tb testing.TB) *Receiver {
	tb.Helper()
	rc := &Receiver{protocol: "http/protobuf"}
	srv := httptest.NewServer(http.HandlerFunc(rc.serve))
	tb.Cleanup(srv.Close)
	rc.url = srv.URL
	return rc
}

// NewGRPC starts an OTLP/gRPC receiver (plaintext), stopped when tb ends.
func NewGRPC(tb testing.TB) *Receiver {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	rc := &Receiver{protocol: "grpc", url: "http://" + ln.Addr().String()}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, grpcService{rc: rc})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // returns once stopped
	}()
	tb.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return rc
}

// grpcService is the OTLP TraceService of NewGRPC.
type grpcService struct {
	coltracepb.UnimplementedTraceServiceServer
	rc *Receiver
}

func (g grpcService) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	g.rc.record(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// URL is the receiver's base URL (for OTEL_EXPORTER_OTLP_ENDPOINT).
func (rc *Receiver) URL() string { return rc.url }

// Env is the environment of a process exporting its spans here (over
// http/protobuf or grpc, as the receiver takes them) as service, every 50
// ms, sampling every trace.
func (rc *Receiver) Env(service string) []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rc.url, "OTEL_EXPORTER_OTLP_PROTOCOL=" + rc.protocol,
		"OTEL_SERVICE_NAME=" + service, "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_TRACES_SAMPLER=parentbased_always_on"}
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.Error(w, "not an OTLP trace export", http.StatusNotFound)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, "not an ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	rc.record(&req)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// record keeps the spans of req.
func (rc *Receiver) record(req *coltracepb.ExportTraceServiceRequest) {
	var spans []Span
	for _, rs := range req.ResourceSpans {
		service, _ := attrMap(rs.GetResource().GetAttributes())["service.name"].(string)
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				spans = append(spans, Span{Service: service, TraceID: hex.EncodeToString(s.TraceId),
					SpanID: hex.EncodeToString(s.SpanId), Parent: hex.EncodeToString(s.ParentSpanId), Name: s.Name,
					Kind: s.Kind, Attrs: attrMap(s.Attributes), StatusError: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
					StatusMessage: s.GetStatus().GetMessage(), StartNanos: s.StartTimeUnixNano, EndNanos: s.EndTimeUnixNano,
					Links: len(s.Links)})
			}
		}
	}
	rc.mu.Lock()
	rc.got = append(rc.got, spans...)
	rc.mu.Unlock()
}

// attrMap decodes OTLP attributes.
func attrMap(kvs []*commonpb.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = v.IntValue
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = v.BoolValue
		case *commonpb.AnyValue_DoubleValue:
			m[kv.Key] = v.DoubleValue
		case *commonpb.AnyValue_ArrayValue:
			var ss []string
			for _, e := range v.ArrayValue.Values {
				ss = append(ss, e.GetStringValue())
			}
			m[kv.Key] = ss
		}
	}
	return m
}

// Spans returns the spans received so far.
func (rc *Receiver) Spans() []Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// WaitFor polls the received spans until cond holds, and fails tb after
// timeout.
func (rc *Receiver) WaitFor(tb testing.TB, timeout time.Duration, what string, cond func([]Span) bool) []Span {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := rc.Spans()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			tb.Fatalf("OTLP receiver: %s not received after %v; got %d spans:\n%s", what, timeout, len(s), Dump(s))
		}
		time.Sleep(20 * time.Millisecond) // polling what an exporter posts: no notification to wait for
	}
}

// Dump formats spans for a failure message.
func Dump(ss []Span) string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, "  %s %s parent=%s %q err=%v %v\n", s.TraceID, s.SpanID, s.Parent, s.Name, s.StatusError, s.Attrs)
	}
	return b.String()
}

// Filter returns the spans for which keep holds.
func Filter(ss []Span, keep func(Span) bool) []Span {
	var out []Span
	for _, s := range ss {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

// Named keeps the spans named name.
func Named(name string) func(Span) bool { return func(s Span) bool { return s.Name == name } }

// ChildrenOf returns the spans of ss whose parent is parent.
func ChildrenOf(ss []Span, parent Span) []Span {
	return Filter(ss, func(s Span) bool { return s.Parent == parent.SpanID && s.TraceID == parent.TraceID })
}

// Exported reports whether a span with id spanID is among ss.
func Exported(ss []Span, spanID string) bool {
	return slices.ContainsFunc(ss, func(s Span) bool { return s.SpanID == spanID })
}
