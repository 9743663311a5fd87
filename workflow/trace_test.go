package workflow_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/superstep/superstep/workflow"
)

// spanAttr returns s's attribute key.
func spanAttr(s sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// TestTrace_Spans: beneath a recording span the runner makes a superstep
// span per superstep (committed=true) with an executor span per invocation
// beneath it; a superstep whose commit hook failed is marked committed=false
// with status Error; without a recording span in ctx it makes none.
func TestTrace_Spans(t *testing.T) {
	a, b := annotating("a", 0), annotating("b", 0)
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(a).AddEdge(a, b))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	run := func(ctx context.Context, fail error) error {
		r, err := wf.NewRun("r", "x")
		if err != nil {
			t.Fatal(err)
		}
		return r.Run(ctx, func(_ context.Context, s *workflow.Step) error {
			if s.Number == 2 {
				return fail
			}
			return nil
		}, nil)
	}

	if err := run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans without a recording span in ctx", n)
	}

	ctx, root := tp.Tracer("test").Start(context.Background(), "root")
	if err := run(ctx, errors.New("store down")); err == nil {
		t.Fatal("Run: the hook's error was not returned")
	}
	root.End()
	var steps, execs []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "superstep":
			steps = append(steps, s)
		case "executor a", "executor b":
			execs = append(execs, s)
		}
	}
	if len(steps) != 2 || len(execs) != 2 {
		t.Fatalf("%d superstep and %d executor spans, want 2 and 2", len(steps), len(execs))
	}
	for i, s := range steps {
		n, committed := spanAttr(s, workflow.AttrSuperstepNumber).AsInt64(), spanAttr(s, workflow.AttrSuperstepCommitted).AsBool()
		if n != int64(i+1) || s.Parent().SpanID() != root.SpanContext().SpanID() || committed != (n == 1) ||
			(s.Status().Code == codes.Error) != (n == 2) {
			t.Fatalf("superstep span %d: number %d committed %v status %v; want step 2 not committed (Error)", i, n, committed, s.Status())
		}
		if e := execs[i]; e.Parent().SpanID() != s.SpanContext().SpanID() || spanAttr(e, workflow.AttrExecutorAttempt).AsInt64() != 1 {
			t.Fatalf("executor span %q not beneath superstep %d", e.Name(), n)
		}
	}
}
