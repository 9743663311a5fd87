package host

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
)

func frames(from, n int64, size int) []protocol.Frame {
	fs := make([]protocol.Frame, n)
	for i := range fs {
		fs[i] = protocol.Frame{Seq: from + int64(i), Type: "response.output_text.delta", Payload: bytes.Repeat([]byte{'x'}, size)}
	}
	return fs
}

// The feed keeps a bounded, contiguous tail: a position before it is
// behind (the reader reads the store), one within it gets the events
// after it, and the end is known once the terminal commit is in.
func TestFeed_Tail(t *testing.T) {
	f := newFeed("resp_1", 1)
	if rd := f.since(-1); !rd.behind {
		t.Fatalf("since(-1) on a feed from seq 1: %+v, want behind (seq 0 is in the store only)", rd)
	}
	rd := f.since(0)
	if rd.behind || len(rd.events) != 0 || rd.ended || rd.closed {
		t.Fatalf("since(0) before any publish: %+v", rd)
	}
	f.publish(frames(1, 3, 10), 1)
	select {
	case <-rd.changed:
	default:
		t.Fatal("publish did not signal the waiting reader")
	}
	if rd := f.since(0); len(rd.events) != 3 || rd.events[0].Seq != 1 || rd.events[2].Step != 1 || rd.events[0].ResponseID != "resp_1" {
		t.Fatalf("since(0) after a publish: %+v", rd.events)
	}
	// Past the bound on events: the oldest go.
	for i := int64(0); i < feedMaxEvents; i++ {
		f.publish(frames(4+i, 1, 10), -1)
	}
	if rd := f.since(2); !rd.behind {
		t.Fatal("a position before the bounded tail is not behind")
	}
	last := int64(3 + feedMaxEvents)
	if rd := f.since(last - feedMaxEvents); rd.behind || len(rd.events) != feedMaxEvents || rd.events[len(rd.events)-1].Seq != last {
		t.Fatalf("the tail: behind %v, %d events", rd.behind, len(rd.events))
	}
	// Past the bound on bytes: at least the newest event stays.
	f.publish(frames(last+1, 1, 2*feedMaxBytes), 2)
	if rd := f.since(last); len(rd.events) != 1 || rd.behind {
		t.Fatalf("after a large event: %+v", rd)
	}
	if rd := f.since(last - 1); !rd.behind {
		t.Fatal("events before a large one were kept past the byte bound")
	}
	// Frames that do not continue the tail start a new one.
	f.publish(frames(last+5, 1, 1), 3)
	if rd := f.since(last + 1); !rd.behind {
		t.Fatal("a gap in the published frames was served from memory")
	}
	f.finish(&feedFinal{status: store.StatusCompleted, nextSeq: last + 6})
	if rd := f.since(last + 5); !rd.ended {
		t.Fatalf("after the terminal commit, at the end: %+v", rd)
	}
	if rd := f.since(last + 4); rd.ended || len(rd.events) != 1 {
		t.Fatalf("after the terminal commit, before the end: %+v", rd)
	}
}

// A commit that ends the response stays in the tail whole, past the
// bounds: a streamed request reading it from memory gets its big frames
// without the store decoding them again.
func TestFeed_TerminalCommitKept(t *testing.T) {
	f := newFeed("resp_1", 1)
	f.publish(frames(1, 1, 10), 1)
	big := frames(2, 5, feedMaxBytes)
	big[4].Type = protocol.EventResponseCompleted
	f.publish(big, 2)
	if rd := f.since(1); rd.behind || len(rd.events) != 5 || rd.events[4].Type != protocol.EventResponseCompleted {
		t.Fatalf("after a big terminal commit: behind %v, %d events", rd.behind, len(rd.events))
	}
	if rd := f.since(0); !rd.behind {
		t.Fatal("the event before the terminal commit was kept past the byte bound")
	}
}

// awaitFinal returns the terminal state once committed, nil when the feed
// closed without one, and the context's error when it ends first.
func TestFeed_AwaitFinal(t *testing.T) {
	f := newFeed("resp_1", 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.awaitFinal(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("awaitFinal with an ended context: %v", err)
	}
	done := make(chan *feedFinal)
	go func() {
		ff, _ := f.awaitFinal(context.Background())
		done <- ff
	}()
	f.finish(&feedFinal{status: store.StatusCompleted, nextSeq: 5})
	if ff := <-done; ff == nil || ff.status != store.StatusCompleted {
		t.Fatalf("awaitFinal: %+v", ff)
	}
	g := newFeed("resp_2", 1)
	go func() {
		ff, _ := g.awaitFinal(context.Background())
		done <- ff
	}()
	g.close()
	if ff := <-done; ff != nil {
		t.Fatalf("awaitFinal of a feed closed unfinished: %+v", ff)
	}
	g.publish(frames(1, 1, 1), 1)
	if rd := g.since(0); !rd.closed || len(rd.events) != 0 {
		t.Fatalf("a closed feed took events: %+v", rd)
	}
}

// A spliced frame (a long text shared by the frames of its step) stays
// spliced in the feed, counts its whole length against the byte bound,
// and reaches a reader whole.
func TestFeed_SplicedFramesReadWhole(t *testing.T) {
	text := bytes.Repeat([]byte{'t'}, feedMaxBytes/4)
	f := newFeed("resp_1", 0)
	fs := []protocol.Frame{
		{Seq: 0, Type: "response.output_text.delta", Payload: []byte(`{"delta":,"x":1}`), Splices: []protocol.Splice{{At: 9, Bytes: text}}},
		{Seq: 1, Type: "response.output_text.done", Payload: []byte(`{"text":}`), Splices: []protocol.Splice{{At: 8, Bytes: text}}},
		{Seq: 2, Type: "response.output_text.delta", Payload: []byte(`{"delta":"short"}`)},
	}
	f.publish(fs, 1)
	if f.bytes != fs[0].Len()+fs[1].Len()+fs[2].Len() {
		t.Fatalf("feed counts %d bytes, the frames hold %d whole", f.bytes, fs[0].Len()+fs[1].Len()+fs[2].Len())
	}
	rd := f.since(-1)
	if len(rd.events) != 3 {
		t.Fatalf("%d events, want 3", len(rd.events))
	}
	for i := range rd.events {
		ev := rd.events[i].event()
		if want := fs[i].Bytes(); ev.Seq != fs[i].Seq || !bytes.Equal(ev.Payload, want) {
			t.Fatalf("event %d: %d bytes, want %d whole", i, len(ev.Payload), len(want))
		}
	}
	// The byte bound sees the whole frames: three more such frames
	// (shared bytes, ~80 bytes apart from them) drop the first.
	more := make([]protocol.Frame, 3)
	for i := range more {
		more[i] = protocol.Frame{Seq: int64(3 + i), Type: "response.output_text.delta", Payload: []byte(`{"delta":}`),
			Splices: []protocol.Splice{{At: 9, Bytes: text}}}
	}
	f.publish(more, 2)
	if rd := f.since(-1); !rd.behind {
		t.Fatal("spliced frames past the byte bound were all kept")
	}
}
