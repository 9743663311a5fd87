package e2e

import (
	"cmp"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is a real OTLP/HTTP trace endpoint (POST /v1/traces,
// protobuf ExportTraceServiceRequest), keeping every span it was sent.
type otlpReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []rspan
}

// rspan is a received span, its ids hex-encoded.
type rspan struct {
	service                  string
	traceID, spanID, parent  string
	name                     string
	attrs                    map[string]any // string, int64, bool, float64 or []string
	statusError              bool
	statusMessage            string
	startNanos, endNanos     uint64
	links                    int
	kind                     tracepb.Span_SpanKind
	scope                    string
	droppedAttrs, droppedEvs uint32
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rc := &otlpReceiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *otlpReceiver) serve(w http.ResponseWriter, r *http.Request) {
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
	var spans []rspan
	for _, rs := range req.ResourceSpans {
		service, _ := attrMap(rs.GetResource().GetAttributes())["service.name"].(string)
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				spans = append(spans, rspan{service: service, traceID: hex.EncodeToString(s.TraceId),
					spanID: hex.EncodeToString(s.SpanId), parent: hex.EncodeToString(s.ParentSpanId), name: s.Name,
					attrs: attrMap(s.Attributes), statusError: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
					statusMessage: s.GetStatus().GetMessage(), startNanos: s.StartTimeUnixNano, endNanos: s.EndTimeUnixNano,
					links: len(s.Links), kind: s.Kind, scope: ss.GetScope().GetName()})
			}
		}
	}
	rc.mu.Lock()
	rc.got = append(rc.got, spans...)
	rc.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// attrMap decodes OTLP attributes.
func attrMap(kvs []*commonpb.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
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

// spans returns the spans received so far.
func (rc *otlpReceiver) spans() []rspan {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// waitFor polls the received spans until cond holds (30s at most).
func (rc *otlpReceiver) waitFor(t *testing.T, what string, cond func([]rspan) bool) []rspan {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := rc.spans()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("OTLP receiver: %s not received after 30s; got %d spans:\n%s", what, len(s), dumpSpans(s))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// env is the server's environment pointing its exporter at rc.
func (rc *otlpReceiver) env() []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rc.srv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_SERVICE_NAME=superstep-e2e", "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_TRACES_SAMPLER=parentbased_always_on"}
}

func dumpSpans(ss []rspan) string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, "  %s %s parent=%s %q err=%v %v\n", s.traceID, s.spanID, s.parent, s.name, s.statusError, s.attrs)
	}
	return b.String()
}

// filter returns the spans for which keep holds.
func filter(ss []rspan, keep func(rspan) bool) []rspan {
	var out []rspan
	for _, s := range ss {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

func named(name string) func(rspan) bool { return func(s rspan) bool { return s.name == name } }

func childrenOf(ss []rspan, parent rspan) []rspan {
	return filter(ss, func(s rspan) bool { return s.parent == parent.spanID && s.traceID == parent.traceID })
}

// ofResponse keeps the spans that name response id.
func ofResponse(id string) func(rspan) bool {
	return func(s rspan) bool { return s.attrs["superstep.response.id"] == id }
}

// one requires exactly one span among ss and returns it.
func one(t *testing.T, ss []rspan, what string, all []rspan) rspan {
	t.Helper()
	if len(ss) != 1 {
		t.Fatalf("%d spans %s, want 1; all spans:\n%s", len(ss), what, dumpSpans(all))
	}
	return ss[0]
}

// TestTrace_StreamedToolCall: a streamed response of the tools demo with a
// traceparent header, from a real `superstep serve` exporting OTLP/HTTP,
// gives the span tree request → response → superstep → (store.commit,
// executor → chat ×2 and execute_tool) in the caller's trace, with the
// GenAI and superstep attributes.
func TestTrace_StreamedToolCall(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	p := startServer(t, append(rc.env(), "SUPERSTEP_DB="+filepath.Join(t.TempDir(), "trace.db")), "--model-server", "local")
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	c := p.client("k")
	s := drain(c.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "demo.tools",
		Input:    textInput(`what is 2 + 3? calculate {"a": 2, "op": "+", "b": 3}`),
		Metadata: shared.Metadata{"token_delay_ms": "0"}},
		option.WithHeader("traceparent", "00-"+traceID+"-"+parentID+"-01")), nil)
	requireLifecycle(t, s, "response.completed")
	id := s.last().Response.ID
	all := rc.waitFor(t, "the response span", func(ss []rspan) bool {
		return len(filter(ss, func(s rspan) bool { return s.name == "response" && s.attrs["superstep.response.status"] != nil })) > 0
	})
	if len(filter(all, func(s rspan) bool { return s.traceID != traceID })) > 0 {
		t.Fatalf("spans outside the caller's trace:\n%s", dumpSpans(all))
	}
	req := one(t, filter(all, named("POST /v1/responses")), "of the request", all)
	if req.parent != parentID || req.kind != tracepb.Span_SPAN_KIND_SERVER || req.attrs["http.response.status_code"] != int64(200) ||
		req.service != "superstep-e2e" {
		t.Fatalf("request span %+v: want parent %s (the traceparent), server kind, status 200, service superstep-e2e", req, parentID)
	}
	resp := one(t, childrenOf(all, req), "under the request", all)
	if resp.name != "response" || resp.attrs["superstep.response.id"] != id || resp.attrs["superstep.response.status"] != "completed" ||
		resp.attrs["gen_ai.request.model"] != "demo.tools" {
		t.Fatalf("response span %+v: want response %s completed", resp, id)
	}
	steps := filter(childrenOf(all, resp), named("superstep"))
	if len(steps) == 0 {
		t.Fatalf("no superstep span under the response:\n%s", dumpSpans(all))
	}
	var execs []rspan
	for _, st := range steps {
		if st.attrs["superstep.committed"] != true || st.statusError || st.attrs["superstep.number"] == nil ||
			st.attrs["superstep.lease.epoch"] != int64(1) || st.attrs["superstep.host.id"] == "" || st.attrs["superstep.host.id"] == nil ||
			st.attrs["superstep.events"].(int64) < 1 || st.attrs["superstep.response.id"] != id {
			t.Fatalf("superstep span %+v: want committed, number, lease epoch 1, host id, events, response id", st)
		}
		commit := one(t, filter(childrenOf(all, st), named("store.commit")), "store.commit under a superstep", all)
		if commit.statusError || commit.endNanos < commit.startNanos || commit.attrs["superstep.number"] != st.attrs["superstep.number"] {
			t.Fatalf("store.commit span %+v of superstep %+v", commit, st)
		}
		execs = append(execs, filter(childrenOf(all, st), func(s rspan) bool { return strings.HasPrefix(s.name, "executor ") })...)
	}
	exec := one(t, execs, "of an executor invocation", all)
	if exec.attrs["workflow.executor.id"] != "assistant" || exec.attrs["workflow.executor.attempt"] != int64(1) || exec.statusError {
		t.Fatalf("executor span %+v", exec)
	}
	under := childrenOf(all, exec)
	chats := filter(under, func(s rspan) bool { return s.attrs["gen_ai.operation.name"] == "chat" })
	slices.SortFunc(chats, func(a, b rspan) int { return cmp.Compare(a.startNanos, b.startNanos) })
	if len(chats) != 2 {
		t.Fatalf("%d model call spans under the executor, want 2:\n%s", len(chats), dumpSpans(all))
	}
	for i, want := range []string{"tool_calls", "stop"} {
		c := chats[i]
		model, _ := c.attrs["gen_ai.request.model"].(string)
		if model == "" || c.name != "chat "+model || c.kind != tracepb.Span_SPAN_KIND_CLIENT ||
			c.attrs["gen_ai.usage.input_tokens"].(int64) < 1 || c.attrs["gen_ai.usage.output_tokens"].(int64) < 1 ||
			!slices.Equal(c.attrs["gen_ai.response.finish_reasons"].([]string), []string{want}) {
			t.Fatalf("model call span %d %+v: want gen_ai attributes, finish reason %s", i, c, want)
		}
	}
	tool := one(t, filter(under, func(s rspan) bool { return s.attrs["gen_ai.operation.name"] == "execute_tool" }), "of the tool call", all)
	if tool.name != "execute_tool calculate" || tool.attrs["gen_ai.tool.name"] != "calculate" || tool.attrs["gen_ai.tool.call.id"] == "" ||
		tool.attrs["gen_ai.tool.call.id"] == nil || tool.statusError {
		t.Fatalf("tool span %+v", tool)
	}
	if !(chats[0].endNanos <= tool.startNanos && tool.endNanos <= chats[1].startNanos) {
		t.Fatalf("model call, tool call, model call out of order:\n%s", dumpSpans([]rspan{chats[0], tool, chats[1]}))
	}
}

// TestTrace_BackgroundAndCancel: a background response without a
// traceparent starts a trace at its request; a cancelled one has a
// superstep span marked not committed (status Error,
// superstep.committed=false) and its cancelled commit under the response
// span.
func TestTrace_BackgroundAndCancel(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	p := startServer(t, append(rc.env(), "SUPERSTEP_DB="+filepath.Join(t.TempDir(), "trace.db")))
	c := p.client("k")
	ctx := context.Background()
	bg, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo.silent", Input: textInput("x"),
		Background: openai.Bool(true), Metadata: shared.Metadata{"steps": "3"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := pollTerminal(t, c, bg.ID); r.Status != "completed" {
		t.Fatalf("background response %s", r.Status)
	}
	slow, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo.silent", Input: textInput("x"),
		Background: openai.Bool(true), Metadata: shared.Metadata{"steps": "100", "step_delay_ms": "50"}})
	if err != nil {
		t.Fatal(err)
	}
	rc.waitFor(t, "a superstep of the slow response", func(ss []rspan) bool {
		return len(filter(ss, func(s rspan) bool { return s.name == "superstep" && ofResponse(slow.ID)(s) })) > 0
	})
	if _, err := c.Responses.Cancel(ctx, slow.ID); err != nil {
		t.Fatal(err)
	}
	if r := pollTerminal(t, c, slow.ID); r.Status != "cancelled" {
		t.Fatalf("cancelled response %s", r.Status)
	}
	all := rc.waitFor(t, "both response spans", func(ss []rspan) bool {
		return len(filter(ss, func(s rspan) bool { return s.name == "response" })) == 2
	})

	// The background one: its own trace, rooted at its request.
	resp := one(t, filter(all, func(s rspan) bool { return s.name == "response" && ofResponse(bg.ID)(s) }), "of "+bg.ID, all)
	req := one(t, filter(all, func(s rspan) bool { return s.spanID == resp.parent }), "parent of the response", all)
	if req.name != "POST /v1/responses" || req.parent != "" || resp.attrs["superstep.response.background"] != true ||
		resp.attrs["superstep.response.status"] != "completed" {
		t.Fatalf("request %+v, response %+v: want a root request span, a completed background response", req, resp)
	}
	steps := filter(childrenOf(all, resp), named("superstep"))
	var nums []int64
	for _, s := range steps {
		nums = append(nums, s.attrs["superstep.number"].(int64))
	}
	slices.Sort(nums)
	if !slices.Equal(nums, []int64{1, 2, 3, 4}) {
		t.Fatalf("superstep numbers %v, want 1..4:\n%s", nums, dumpSpans(all))
	}

	// The cancelled one.
	resp = one(t, filter(all, func(s rspan) bool { return s.name == "response" && ofResponse(slow.ID)(s) }), "of "+slow.ID, all)
	if resp.attrs["superstep.response.status"] != "cancelled" {
		t.Fatalf("response span %+v: want status cancelled", resp)
	}
	steps = filter(childrenOf(all, resp), named("superstep"))
	lost := filter(steps, func(s rspan) bool { return s.attrs["superstep.committed"] == false })
	if len(lost) != 1 || !lost[0].statusError {
		t.Fatalf("%d superstep spans not committed, want 1 with status Error:\n%s", len(lost), dumpSpans(steps))
	}
	fin := filter(childrenOf(all, resp), func(s rspan) bool {
		return s.name == "store.commit" && s.attrs["superstep.commit.terminal"] == true
	})
	if len(fin) != 1 || fin[0].statusError {
		t.Fatalf("the cancelled commit: %d store.commit spans under the response, want 1:\n%s", len(fin), dumpSpans(all))
	}
}

// TestTrace_ContinuousAcrossKills: a background response whose server is
// SIGKILLed twice mid-run (SQLite) and resumed by the next process: every
// superstep span of the response, from the three processes, is in the
// trace its request started; each resumed process has a "response
// (resumed)" span whose parent is the response span of the first (never
// exported: it died with its process), so the tree stays whole.
func TestTrace_ContinuousAcrossKills(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	env := append(rc.env(), "SUPERSTEP_DB="+filepath.Join(t.TempDir(), "trace.db"))
	p := startServer(t, env)
	c := p.client("k")
	bg, err := c.Responses.New(context.Background(), responses.ResponseNewParams{Model: "demo.silent",
		Input: textInput("x"), Background: openai.Bool(true), Metadata: shared.Metadata{"steps": "12", "step_delay_ms": "100"}})
	if err != nil {
		t.Fatal(err)
	}
	stepsOf := func(ss []rspan) []rspan {
		return filter(ss, func(s rspan) bool { return s.name == "superstep" && ofResponse(bg.ID)(s) })
	}
	ofEpoch := func(ss []rspan, epoch int64) []rspan {
		return filter(stepsOf(ss), func(s rspan) bool { return s.attrs["superstep.lease.epoch"] == epoch })
	}
	for kill := int64(1); kill <= 2; kill++ {
		// Kill once the process has committed (and exported) 2 supersteps.
		rc.waitFor(t, fmt.Sprintf("2 supersteps exported by process %d", kill), func(ss []rspan) bool {
			return len(ofEpoch(ss, kill)) >= 2
		})
		p.stop(t, syscall.SIGKILL)
		p = startServer(t, env)
	}
	if r := pollTerminal(t, p.client("k"), bg.ID); r.Status != "completed" {
		t.Fatalf("response %s after the kills", r.Status)
	}
	all := rc.waitFor(t, "the last resumed response span", func(ss []rspan) bool {
		return len(filter(ss, func(s rspan) bool {
			return s.name == "response (resumed)" && s.attrs["superstep.response.status"] == "completed"
		})) == 1
	})
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}

	req := one(t, filter(all, named("POST /v1/responses")), "of the request", all)
	steps := stepsOf(all)
	for _, s := range steps {
		if s.traceID != req.traceID {
			t.Fatalf("superstep span in trace %s, want the request's %s:\n%s", s.traceID, req.traceID, dumpSpans(steps))
		}
	}
	// Each process's supersteps, under one parent: its response span.
	parents := map[int64]string{}
	hosts := map[any]bool{}
	for epoch := int64(1); epoch <= 3; epoch++ {
		es := ofEpoch(all, epoch)
		if len(es) == 0 {
			t.Fatalf("no superstep span at lease epoch %d:\n%s", epoch, dumpSpans(steps))
		}
		for _, s := range es {
			hosts[s.attrs["superstep.host.id"]] = true
			if s.parent != es[0].parent || s.attrs["superstep.committed"] != true {
				t.Fatalf("supersteps of epoch %d under different spans, or not committed:\n%s", epoch, dumpSpans(es))
			}
		}
		parents[epoch] = es[0].parent
	}
	if len(hosts) != 3 || len(ofEpoch(all, 1))+len(ofEpoch(all, 2))+len(ofEpoch(all, 3)) != len(steps) {
		t.Fatalf("superstep spans from %d hosts, want 3 at epochs 1..3:\n%s", len(hosts), dumpSpans(steps))
	}
	// The response span of the first process and the resumed one of the
	// second died with them (spans are exported when they end); the last
	// process's resumed span is a child of the first response span.
	exported := func(id string) bool { return len(filter(all, func(s rspan) bool { return s.spanID == id })) > 0 }
	if exported(parents[1]) || exported(parents[2]) || parents[1] == parents[2] {
		t.Fatalf("the killed processes' response spans %s, %s: exported, or the same", parents[1], parents[2])
	}
	resumed := one(t, filter(all, named("response (resumed)")), "resumed and exported", all)
	if resumed.spanID != parents[3] || resumed.traceID != req.traceID || resumed.parent != parents[1] ||
		resumed.attrs["superstep.response.id"] != bg.ID || resumed.attrs["superstep.lease.epoch"] != int64(3) ||
		resumed.attrs["superstep.resumed_from_step"].(int64) < 4 {
		t.Fatalf("resumed span %+v: want trace %s, parent %s (the first response span), the last supersteps under it",
			resumed, req.traceID, parents[1])
	}
}
