package e2e

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/superstep/superstep/internal/testkit/otlptest"
)

type rspan = otlptest.Span

var (
	filter     = otlptest.Filter
	named      = otlptest.Named
	childrenOf = otlptest.ChildrenOf
	dumpSpans  = otlptest.Dump
)

// waitSpans waits until the receiver's spans satisfy cond.
func waitSpans(t *testing.T, rc *otlptest.Receiver, what string, cond func([]rspan) bool) []rspan {
	t.Helper()
	return rc.WaitFor(t, 30*time.Second, what, cond)
}

// ofResponse keeps the spans that name response id.
func ofResponse(id string) func(rspan) bool {
	return func(s rspan) bool { return s.Attrs["superstep.response.id"] == id }
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
	rc := otlptest.New(t)
	p := startServer(t, append(rc.Env("superstep-e2e"), "SUPERSTEP_DB="+filepath.Join(t.TempDir(), "trace.db")), "--model-server", "local")
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	c := p.client("k")
	s := drain(c.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "demo.tools",
		Input:    textInput(`what is 2 + 3? calculate {"a": 2, "op": "+", "b": 3}`),
		Metadata: shared.Metadata{"token_delay_ms": "0"}},
		option.WithHeader("traceparent", "00-"+traceID+"-"+parentID+"-01")), nil)
	requireLifecycle(t, s, "response.completed")
	id := s.last().Response.ID
	// The request's span may be exported after the response's: wait for both.
	all := waitSpans(t, rc, "the response and request spans", func(ss []rspan) bool {
		return len(filter(ss, func(s rspan) bool { return s.Name == "response" && s.Attrs["superstep.response.status"] != nil })) > 0 &&
			len(filter(ss, named("POST /v1/responses"))) > 0
	})
	if len(filter(all, func(s rspan) bool { return s.TraceID != traceID })) > 0 {
		t.Fatalf("spans outside the caller's trace:\n%s", dumpSpans(all))
	}
	req := one(t, filter(all, named("POST /v1/responses")), "of the request", all)
	if req.Parent != parentID || req.Kind != tracepb.Span_SPAN_KIND_SERVER || req.Attrs["http.response.status_code"] != int64(200) ||
		req.Service != "superstep-e2e" {
		t.Fatalf("request span %+v: want parent %s (the traceparent), server kind, status 200, service superstep-e2e", req, parentID)
	}
	resp := one(t, childrenOf(all, req), "under the request", all)
	if resp.Name != "response" || resp.Attrs["superstep.response.id"] != id || resp.Attrs["superstep.response.status"] != "completed" ||
		resp.Attrs["gen_ai.request.model"] != "demo.tools" {
		t.Fatalf("response span %+v: want response %s completed", resp, id)
	}
	steps := filter(childrenOf(all, resp), named("superstep"))
	if len(steps) == 0 {
		t.Fatalf("no superstep span under the response:\n%s", dumpSpans(all))
	}
	var execs []rspan
	for _, st := range steps {
		if st.Attrs["superstep.committed"] != true || st.StatusError || st.Attrs["superstep.number"] == nil ||
			st.Attrs["superstep.lease.epoch"] != int64(1) || st.Attrs["superstep.host.id"] == "" || st.Attrs["superstep.host.id"] == nil ||
			st.Attrs["superstep.events"].(int64) < 1 || st.Attrs["superstep.response.id"] != id {
			t.Fatalf("superstep span %+v: want committed, number, lease epoch 1, host id, events, response id", st)
		}
		commit := one(t, filter(childrenOf(all, st), named("store.commit")), "store.commit under a superstep", all)
		if commit.StatusError || commit.EndNanos < commit.StartNanos || commit.Attrs["superstep.number"] != st.Attrs["superstep.number"] {
			t.Fatalf("store.commit span %+v of superstep %+v", commit, st)
		}
		execs = append(execs, filter(childrenOf(all, st), func(s rspan) bool { return strings.HasPrefix(s.Name, "executor ") })...)
	}
	exec := one(t, execs, "of an executor invocation", all)
	if exec.Attrs["workflow.executor.id"] != "assistant" || exec.Attrs["workflow.executor.attempt"] != int64(1) || exec.StatusError {
		t.Fatalf("executor span %+v", exec)
	}
	under := childrenOf(all, exec)
	chats := filter(under, func(s rspan) bool { return s.Attrs["gen_ai.operation.name"] == "chat" })
	slices.SortFunc(chats, func(a, b rspan) int { return cmp.Compare(a.StartNanos, b.StartNanos) })
	if len(chats) != 2 {
		t.Fatalf("%d model call spans under the executor, want 2:\n%s", len(chats), dumpSpans(all))
	}
	for i, want := range []string{"tool_calls", "stop"} {
		c := chats[i]
		model, _ := c.Attrs["gen_ai.request.model"].(string)
		if model == "" || c.Name != "chat "+model || c.Kind != tracepb.Span_SPAN_KIND_CLIENT ||
			c.Attrs["gen_ai.usage.input_tokens"].(int64) < 1 || c.Attrs["gen_ai.usage.output_tokens"].(int64) < 1 ||
			!slices.Equal(c.Attrs["gen_ai.response.finish_reasons"].([]string), []string{want}) {
			t.Fatalf("model call span %d %+v: want gen_ai attributes, finish reason %s", i, c, want)
		}
	}
	tool := one(t, filter(under, func(s rspan) bool { return s.Attrs["gen_ai.operation.name"] == "execute_tool" }), "of the tool call", all)
	if tool.Name != "execute_tool calculate" || tool.Attrs["gen_ai.tool.name"] != "calculate" || tool.Attrs["gen_ai.tool.call.id"] == "" ||
		tool.Attrs["gen_ai.tool.call.id"] == nil || tool.StatusError {
		t.Fatalf("tool span %+v", tool)
	}
	if !(chats[0].EndNanos <= tool.StartNanos && tool.EndNanos <= chats[1].StartNanos) {
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
	rc := otlptest.New(t)
	p := startServer(t, append(rc.Env("superstep-e2e"), "SUPERSTEP_DB="+filepath.Join(t.TempDir(), "trace.db")))
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
	waitSpans(t, rc, "a superstep of the slow response", func(ss []rspan) bool {
		return len(filter(ss, func(s rspan) bool { return s.Name == "superstep" && ofResponse(slow.ID)(s) })) > 0
	})
	if _, err := c.Responses.Cancel(ctx, slow.ID); err != nil {
		t.Fatal(err)
	}
	if r := pollTerminal(t, c, slow.ID); r.Status != "cancelled" {
		t.Fatalf("cancelled response %s", r.Status)
	}
	all := waitSpans(t, rc, "both response spans", func(ss []rspan) bool {
		return len(filter(ss, func(s rspan) bool { return s.Name == "response" })) == 2
	})

	// The background one: its own trace, rooted at its request.
	resp := one(t, filter(all, func(s rspan) bool { return s.Name == "response" && ofResponse(bg.ID)(s) }), "of "+bg.ID, all)
	req := one(t, filter(all, func(s rspan) bool { return s.SpanID == resp.Parent }), "parent of the response", all)
	if req.Name != "POST /v1/responses" || req.Parent != "" || resp.Attrs["superstep.response.background"] != true ||
		resp.Attrs["superstep.response.status"] != "completed" {
		t.Fatalf("request %+v, response %+v: want a root request span, a completed background response", req, resp)
	}
	steps := filter(childrenOf(all, resp), named("superstep"))
	var nums []int64
	for _, s := range steps {
		nums = append(nums, s.Attrs["superstep.number"].(int64))
	}
	slices.Sort(nums)
	if !slices.Equal(nums, []int64{1, 2, 3, 4}) {
		t.Fatalf("superstep numbers %v, want 1..4:\n%s", nums, dumpSpans(all))
	}

	// The cancelled one.
	resp = one(t, filter(all, func(s rspan) bool { return s.Name == "response" && ofResponse(slow.ID)(s) }), "of "+slow.ID, all)
	if resp.Attrs["superstep.response.status"] != "cancelled" {
		t.Fatalf("response span %+v: want status cancelled", resp)
	}
	steps = filter(childrenOf(all, resp), named("superstep"))
	lost := filter(steps, func(s rspan) bool { return s.Attrs["superstep.committed"] == false })
	if len(lost) != 1 || !lost[0].StatusError {
		t.Fatalf("%d superstep spans not committed, want 1 with status Error:\n%s", len(lost), dumpSpans(steps))
	}
	fin := filter(childrenOf(all, resp), func(s rspan) bool {
		return s.Name == "store.commit" && s.Attrs["superstep.commit.terminal"] == true
	})
	if len(fin) != 1 || fin[0].StatusError {
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
	rc := otlptest.New(t)
	env := append(rc.Env("superstep-e2e"), "SUPERSTEP_DB="+filepath.Join(t.TempDir(), "trace.db"))
	p := startServer(t, env)
	c := p.client("k")
	bg, err := c.Responses.New(context.Background(), responses.ResponseNewParams{Model: "demo.silent",
		Input: textInput("x"), Background: openai.Bool(true), Metadata: shared.Metadata{"steps": "12", "step_delay_ms": "100"}})
	if err != nil {
		t.Fatal(err)
	}
	stepsOf := func(ss []rspan) []rspan {
		return filter(ss, func(s rspan) bool { return s.Name == "superstep" && ofResponse(bg.ID)(s) })
	}
	ofEpoch := func(ss []rspan, epoch int64) []rspan {
		return filter(stepsOf(ss), func(s rspan) bool { return s.Attrs["superstep.lease.epoch"] == epoch })
	}
	for kill := int64(1); kill <= 2; kill++ {
		// Kill once the process has committed (and exported) 2 supersteps.
		waitSpans(t, rc, fmt.Sprintf("2 supersteps exported by process %d", kill), func(ss []rspan) bool {
			return len(ofEpoch(ss, kill)) >= 2
		})
		p.stop(t, syscall.SIGKILL)
		p = startServer(t, env)
	}
	if r := pollTerminal(t, p.client("k"), bg.ID); r.Status != "completed" {
		t.Fatalf("response %s after the kills", r.Status)
	}
	all := waitSpans(t, rc, "the last resumed response span", func(ss []rspan) bool {
		return len(filter(ss, func(s rspan) bool {
			return s.Name == "response (resumed)" && s.Attrs["superstep.response.status"] == "completed"
		})) == 1
	})
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}

	req := one(t, filter(all, named("POST /v1/responses")), "of the request", all)
	steps := stepsOf(all)
	for _, s := range steps {
		if s.TraceID != req.TraceID {
			t.Fatalf("superstep span in trace %s, want the request's %s:\n%s", s.TraceID, req.TraceID, dumpSpans(steps))
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
			hosts[s.Attrs["superstep.host.id"]] = true
			if s.Parent != es[0].Parent || s.Attrs["superstep.committed"] != true {
				t.Fatalf("supersteps of epoch %d under different spans, or not committed:\n%s", epoch, dumpSpans(es))
			}
		}
		parents[epoch] = es[0].Parent
	}
	if len(hosts) != 3 || len(ofEpoch(all, 1))+len(ofEpoch(all, 2))+len(ofEpoch(all, 3)) != len(steps) {
		t.Fatalf("superstep spans from %d hosts, want 3 at epochs 1..3:\n%s", len(hosts), dumpSpans(steps))
	}
	// The response span of the first process and the resumed one of the
	// second died with them (spans are exported when they end); the last
	// process's resumed span is a child of the first response span.
	exported := func(id string) bool { return otlptest.Exported(all, id) }
	if exported(parents[1]) || exported(parents[2]) || parents[1] == parents[2] {
		t.Fatalf("the killed processes' response spans %s, %s: exported, or the same", parents[1], parents[2])
	}
	resumed := one(t, filter(all, named("response (resumed)")), "resumed and exported", all)
	if resumed.SpanID != parents[3] || resumed.TraceID != req.TraceID || resumed.Parent != parents[1] ||
		resumed.Attrs["superstep.response.id"] != bg.ID || resumed.Attrs["superstep.lease.epoch"] != int64(3) ||
		resumed.Attrs["superstep.resumed_from_step"].(int64) < 4 {
		t.Fatalf("resumed span %+v: want trace %s, parent %s (the first response span), the last supersteps under it",
			resumed, req.TraceID, parents[1])
	}
}

// TestTrace_GRPC: with OTEL_EXPORTER_OTLP_PROTOCOL=grpc the spans reach a
// real OTLP/gRPC receiver: request → response → superstep in the caller's
// trace.
func TestTrace_GRPC(t *testing.T) {
	t.Parallel()
	rc := otlptest.NewGRPC(t)
	p := startServer(t, append(rc.Env("superstep-grpc"), "SUPERSTEP_DB="+filepath.Join(t.TempDir(), "trace.db")))
	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	c := p.client("k")
	s := drain(c.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "demo.echo",
		Input: textInput("over grpc")}, option.WithHeader("traceparent", "00-"+traceID+"-"+parentID+"-01")), nil)
	requireLifecycle(t, s, "response.completed")
	// The request's span ends after the response's (the handler returns
	// once the stream is written) and may be exported in a later batch:
	// wait for both.
	all := waitSpans(t, rc, "the response and request spans", func(ss []rspan) bool {
		return len(filter(ss, func(s rspan) bool { return s.Name == "response" })) == 1 &&
			len(filter(ss, named("POST /v1/responses"))) > 0
	})
	req := one(t, filter(all, named("POST /v1/responses")), "of the request", all)
	resp := one(t, childrenOf(all, req), "under the request", all)
	steps := filter(childrenOf(all, resp), named("superstep"))
	if req.TraceID != traceID || req.Parent != parentID || req.Service != "superstep-grpc" ||
		resp.Attrs["superstep.response.id"] != s.last().Response.ID || len(steps) != 1 {
		t.Fatalf("over gRPC: want request → response → 1 superstep in trace %s:\n%s", traceID, dumpSpans(all))
	}
}
