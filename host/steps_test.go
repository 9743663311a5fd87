package host

import (
	"errors"
	"testing"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/workflow"
)

// liveInput is the one place nesting is unwrapped: the stream names every
// level, the executor is the outermost, the kind is the innermost value's.
func TestLiveInput(t *testing.T) {
	nested := workflow.LiveEvent{Step: 4, ExecutorID: "outer", Attempt: 2, Value: workflow.LiveEvent{Step: 1, ExecutorID: "sub", Attempt: 1,
		Value: workflow.LiveEvent{Step: 3, ExecutorID: "writer", Attempt: 5, Value: agent.Update{Kind: agent.UpdateTextDelta, Text: "hi"}}}}
	got, ok := liveInput(nested)
	want := protocol.LiveEvent{Step: 4, Executor: "outer", Stream: "outer#2/1/sub#1/3/writer#5", Kind: protocol.LiveTextDelta, Text: "hi"}
	if !ok || got != want {
		t.Fatalf("nested: %+v %v, want %+v", got, ok, want)
	}
	for _, c := range []struct {
		v    any
		want protocol.LiveEvent
		ok   bool
	}{
		{"tok", protocol.LiveEvent{Kind: protocol.LiveTextDelta, Text: "tok"}, true},
		{workflow.LiveDiscard{Err: errors.New("x")}, protocol.LiveEvent{Kind: protocol.LiveDiscard}, true},
		{agent.Update{Kind: agent.UpdateRetry}, protocol.LiveEvent{Kind: protocol.LiveRetry}, true},
		{agent.Update{Kind: agent.UpdateToolCall, CallID: "c", Name: "f", Arguments: "{}"},
			protocol.LiveEvent{Kind: protocol.LiveToolCall, CallID: "c", Name: "f", Arguments: "{}"}, true},
		{agent.Update{Kind: agent.UpdateToolResult, CallID: "c", Text: "r"}, protocol.LiveEvent{Kind: protocol.LiveToolResult, CallID: "c", Text: "r"}, true},
		{agent.Update{Kind: agent.UpdateHandoff, Name: "x"}, protocol.LiveEvent{}, false},
		{42, protocol.LiveEvent{}, false},
	} {
		got, ok := liveInput(workflow.LiveEvent{Step: 1, ExecutorID: "e", Attempt: 1, Value: c.v})
		if c.ok {
			c.want.Step, c.want.Executor, c.want.Stream = 1, "e", "e#1"
		}
		if ok != c.ok || got != c.want {
			t.Errorf("%#v: %+v %v, want %+v %v", c.v, got, ok, c.want, c.ok)
		}
	}
}

// BenchmarkLiveInput measures the adapter's cost per live token (the
// stream name is built for every one).
func BenchmarkLiveInput(b *testing.B) {
	ev := workflow.LiveEvent{Step: 3, ExecutorID: "assistant", Attempt: 1, Value: agent.Update{Kind: agent.UpdateTextDelta, Text: "tok"}}
	b.ReportAllocs()
	for b.Loop() {
		liveInput(ev)
	}
}
