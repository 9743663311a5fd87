package responses

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/superstep/superstep/protocol"
)

// pumpServer is a server with what pump uses.
func pumpServer(t *testing.T) *server {
	t.Helper()
	m, err := newHTTPMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return &server{opts: Options{KeepAlive: time.Hour}, metrics: m}
}

func deltaItem(seq int64, payload []byte) streamItem {
	return streamItem{ev: protocol.Frame{Seq: seq, Type: "response.output_text.delta", Payload: payload}}
}

// syncWriter is a countingWriter safe to read while the pump writes.
type syncWriter struct {
	mu sync.Mutex
	countingWriter
}

func (w *syncWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.countingWriter.Write(b)
}

func (w *syncWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.countingWriter.Flush()
}

func (w *syncWriter) state() (body string, flushes int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.Body.String(), w.flushes
}

// A burst of frames queued together is written in order with one flush,
// not one per frame (a committed superstep's events, W3's 1,203).
func TestPump_BurstOneFlush(t *testing.T) {
	t.Parallel()
	s := pumpServer(t)
	cw := &countingWriter{ResponseRecorder: httptest.NewRecorder()}
	sw, err := newSSEWriter(cw, 0)
	if err != nil {
		t.Fatal(err)
	}
	q := newStreamQueue()
	var want bytes.Buffer
	const n = 40
	for i := range int64(n) {
		p := fmt.Appendf(nil, `{"sequence_number":%d,"delta":"x"}`, i+1)
		fmt.Fprintf(&want, "event: response.output_text.delta\ndata: %s\n\n", p)
		if !q.put(context.Background(), deltaItem(i+1, p)) {
			t.Fatal("put refused")
		}
	}
	close(q.items)
	flushes0 := cw.flushes
	last, ended := s.pump(context.Background(), sw, q, 0)
	if !ended || last.err != nil || last.ev.Seq != n {
		t.Fatalf("pump: ended %v, last seq %d, err %v; want ended after seq %d", ended, last.ev.Seq, last.err, n)
	}
	if got := cw.Body.String(); got != want.String() {
		t.Fatalf("stream =\n%q\nwant\n%q", got, want.String())
	}
	if f := cw.flushes - flushes0; f != 1 {
		t.Errorf("%d frames queued together took %d flushes, want 1", n, f)
	}
	if p := q.pending.Load(); p != 0 {
		t.Errorf("%d bytes still counted as queued after the pump wrote everything", p)
	}
}

// A frame is flushed as soon as nothing more is queued: the pump does not
// hold it back waiting for the next.
func TestPump_FlushesBeforeWaiting(t *testing.T) {
	t.Parallel()
	s := pumpServer(t)
	w := &syncWriter{countingWriter: countingWriter{ResponseRecorder: httptest.NewRecorder()}}
	sw, err := newSSEWriter(w, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := newStreamQueue()
	done := make(chan bool)
	go func() {
		_, ended := s.pump(ctx, sw, q, 0)
		done <- ended
	}()
	_, flushes0 := w.state()
	q.put(ctx, deltaItem(1, []byte(`{"delta":"a"}`)))
	deadline := time.Now().Add(10 * time.Second)
	for {
		body, flushes := w.state()
		if flushes > flushes0 && bytes.Contains([]byte(body), []byte(`{"delta":"a"}`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the frame was not flushed while the pump waited for more (flushes %d, body %q)", flushes, body)
		}
		time.Sleep(time.Millisecond)
	}
	q.put(ctx, streamItem{ev: protocol.Frame{Seq: 2, Type: "response.completed", Payload: []byte(`{}`)}})
	if ended := <-done; !ended {
		t.Fatal("pump did not end at the terminal event")
	}
}

// The follower queues many small frames but, past the first, no more
// than streamQueueBytes: long frames (a long reply's, made whole one at a
// time) wait in the follower one at a time, as with no queue.
func TestStreamQueue_LongFramesOneAtATime(t *testing.T) {
	t.Parallel()
	s := pumpServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	big := bytes.Repeat([]byte("x"), 1<<20)
	var made atomic.Int64
	events := iter.Seq2[protocol.Frame, error](func(yield func(protocol.Frame, error) bool) {
		for i := range int64(3) {
			made.Add(1)
			if !yield(protocol.Frame{Seq: i + 1, Type: "response.output_text.done", Payload: big}, nil) {
				return
			}
		}
	})
	q := newStreamQueue()
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		s.follow(ctx, events, q)
	}()
	waitMade := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for made.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("the follower made %d events, want %d", made.Load(), n)
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond) // room for a wrong follower to queue more
	}
	for i := range 3 {
		waitMade(int64(min(i+2, 3)))
		if got := len(q.items); got != 1 {
			t.Fatalf("%d long frames queued at once, want 1", got)
		}
		it := <-q.items
		if it.ev.Seq != int64(i+1) {
			t.Fatalf("got seq %d, want %d", it.ev.Seq, i+1)
		}
		q.written(it)
	}
	<-followed
	if _, open := <-q.items; open {
		t.Fatal("the queue holds more than the three events")
	}
}
