package multihost

import (
	"context"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/superstep/superstep/internal/testkit/otlptest"
)

// TestMultihost_TraceTakeover: three hosts on PostgreSQL export their
// spans to a real OTLP/HTTP receiver. A background response runs on host
// 0, which is SIGKILLed mid-run; another host takes the run over when the
// lease expires. Every superstep span of the response, from both hosts, is
// in the trace its request started, and the new owner's "response
// (resumed)" span is a child of host 0's response span (which died
// unexported with host 0).
func TestMultihost_TraceTakeover(t *testing.T) {
	rc := otlptest.New(t)
	cl := newCluster(t, seedOf(t), "--lease", killLease)
	cl.env = rc.Env("superstep-multihost")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl.startAll(ctx)
	h0 := cl.host(0)
	c := newClient(h0.url())
	bg, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo.silent", Input: responses.ResponseNewParamsInputUnion{
		OfString: openai.String("x")}, Background: openai.Bool(true),
		Metadata: shared.Metadata{"steps": "20", "step_delay_ms": "100"}})
	if err != nil {
		t.Fatal(err)
	}
	stepsOf := func(ss []otlptest.Span) []otlptest.Span {
		return otlptest.Filter(ss, func(s otlptest.Span) bool {
			return s.Name == "superstep" && s.Attrs["superstep.response.id"] == bg.ID
		})
	}
	onHost := func(ss []otlptest.Span, id string) []otlptest.Span {
		return otlptest.Filter(ss, func(s otlptest.Span) bool { return s.Attrs["superstep.host.id"] == id })
	}
	rc.WaitFor(t, time.Minute, "2 supersteps exported by host 0", func(ss []otlptest.Span) bool {
		return len(onHost(stepsOf(ss), h0.id)) >= 2
	})
	if _, err := cl.kill(0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := poll(ctx, cl, bg.ID, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	all := rc.WaitFor(t, time.Minute, "the resumed response span, ended", func(ss []otlptest.Span) bool {
		return len(otlptest.Filter(ss, func(s otlptest.Span) bool {
			return s.Name == "response (resumed)" && s.Attrs["superstep.response.status"] == "completed"
		})) == 1
	})
	if err := cl.stopAll(30 * time.Second); err != nil {
		t.Error(err)
	}

	req := otlptest.Filter(all, otlptest.Named("POST /v1/responses"))
	if len(req) != 1 {
		t.Fatalf("%d request spans, want 1:\n%s", len(req), otlptest.Dump(all))
	}
	steps := stepsOf(all)
	first := onHost(steps, h0.id)
	resumed := otlptest.Filter(all, otlptest.Named("response (resumed)"))
	if len(resumed) != 1 {
		t.Fatalf("%d resumed response spans, want 1:\n%s", len(resumed), otlptest.Dump(all))
	}
	r := resumed[0]
	taker, _ := r.Attrs["superstep.host.id"].(string)
	if taker == h0.id || taker == "" || r.TraceID != req[0].TraceID || r.Parent != first[0].Parent ||
		otlptest.Exported(all, first[0].Parent) {
		t.Fatalf("resumed span %+v: want another host than %s, trace %s, parent %s (host 0's response span, not exported)",
			r, h0.id, req[0].TraceID, first[0].Parent)
	}
	second := onHost(steps, taker)
	if len(first)+len(second) != len(steps) || len(second) == 0 {
		t.Fatalf("superstep spans of hosts other than %s and %s, or none of the new owner:\n%s", h0.id, taker, otlptest.Dump(steps))
	}
	for _, s := range steps {
		want := first[0].Parent
		if s.Attrs["superstep.host.id"] == taker {
			want = r.SpanID
		}
		if s.TraceID != req[0].TraceID || s.Parent != want || s.Attrs["superstep.committed"] != true {
			t.Fatalf("superstep span %+v: want trace %s, parent %s, committed", s, req[0].TraceID, want)
		}
		if (s.Attrs["superstep.host.id"] == taker) != (s.Attrs["superstep.lease.epoch"].(int64) > first[0].Attrs["superstep.lease.epoch"].(int64)) {
			t.Fatalf("superstep span %+v: the new owner's supersteps are under a later lease epoch", s)
		}
	}
}
