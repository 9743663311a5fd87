package protocol

import (
	"strings"
	"testing"
	"time"
)

// BenchmarkProjectStep measures the projector's share of a superstep's
// commit: one message item and the step's frames, snapshot and record
// fields encoded, on top of a response that already holds 10 items.
func BenchmarkProjectStep(b *testing.B) {
	st := benchState(b, 10)
	s := &Step{Number: 11, Status: StatusInProgress, At: time.Unix(1, 0),
		Outputs: []Output{{Kind: OutputMessage, Executor: "w", Text: "a short reply of about fifty bytes, as W1 writes"}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ProjectStep(st, Live{}, s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProjectLive measures one live text delta (the token path).
func BenchmarkProjectLive(b *testing.B) {
	st := benchState(b, 10)
	fs, live, err := ProjectLive(st, st.NextSeq, Live{}, &LiveEvent{Step: 11, Executor: "w", Stream: "w#1", Kind: LiveTextDelta, Text: "tok"})
	if err != nil {
		b.Fatal(err)
	}
	next := fs[len(fs)-1].Seq + 1
	ev := &LiveEvent{Step: 11, Executor: "w", Stream: "w#1", Kind: LiveTextDelta, Text: "en "}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ProjectLive(st, next, live, ev); err != nil {
			b.Fatal(err)
		}
	}
}

// benchState returns a response in progress with n message items.
func benchState(b *testing.B, n int) State {
	c, err := Create(&NewResponseParams{ID: "resp_bench", Model: "m", Status: StatusInProgress, CreatedAt: time.Unix(1, 0)})
	if err != nil {
		b.Fatal(err)
	}
	st := c.Next
	for i := 1; i <= n; i++ {
		c, err := ProjectStep(st, Live{}, &Step{Number: int64(i), Status: StatusInProgress,
			Outputs: []Output{{Kind: OutputMessage, Executor: "w", Text: "earlier item"}}})
		if err != nil {
			b.Fatal(err)
		}
		st = c.Next
	}
	return st
}

// BenchmarkProjectLive_LongMessage streams one message of 4,000 deltas
// (about 16 KB) and closes it at the commit, as a long model reply does: the
// cost per delta must not grow with the message's length.
func BenchmarkProjectLive_LongMessage(b *testing.B) {
	st := benchState(b, 10)
	ev := &LiveEvent{Step: 11, Executor: "w", Stream: "w#1", Kind: LiveTextDelta, Text: "tok "}
	const deltas = 4000
	b.ReportAllocs()
	for b.Loop() {
		live, next := Live{}, st.NextSeq
		for range deltas {
			fs, l, err := ProjectLive(st, next, live, ev)
			if err != nil {
				b.Fatal(err)
			}
			live, next = l, fs[len(fs)-1].Seq+1
		}
		if _, err := ProjectStep(st, live, &Step{Number: 11, Status: StatusInProgress,
			Outputs: []Output{{Kind: OutputMessage, Executor: "w", Text: strings.Repeat("tok ", deltas)}}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProjectStep_W3 is the bench's W3 workload in the projector:
// one superstep with 200 outputs of 50 bytes that completes the response
// (1,203 frames, the snapshot and the record fields).
func BenchmarkProjectStep_W3(b *testing.B) {
	st := benchState(b, 0)
	outs := make([]Output, 200)
	for i := range outs {
		outs[i] = Output{Kind: OutputMessage, Executor: "w", Text: strings.Repeat("x", 50)}
	}
	s := &Step{Number: 1, Status: StatusCompleted, At: time.Unix(2, 0), Outputs: outs}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ProjectStep(st, Live{}, s); err != nil {
			b.Fatal(err)
		}
	}
}
