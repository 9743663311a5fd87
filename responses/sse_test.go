package responses

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestSSEWriter_Frames(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	sw, err := newSSEWriter(rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	steps := []func() error{
		func() error {
			return sw.event("response.created", []byte(`{"type":"response.created","sequence_number":0}`))
		},
		func() error { return sw.comment("keep-alive") },
		func() error { return sw.event("x", []byte("a\nb\r\nc")) },
		sw.done,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	want := "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0}\n\n" +
		": keep-alive\n\n" +
		"event: x\ndata: a\ndata: b\ndata: c\n\n" +
		"data: [DONE]\n\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("stream =\n%q\nwant\n%q", got, want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if !rec.Flushed {
		t.Error("frames were not flushed")
	}
}

func TestSSEWriter_OneWritePerFrame(t *testing.T) {
	t.Parallel()
	cw := &countingWriter{ResponseRecorder: httptest.NewRecorder()}
	sw, err := newSSEWriter(cw, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := sw.event("e", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if cw.writes != 3 || cw.flushes < 4 {
		t.Errorf("writes=%d flushes=%d, want 3 writes and a flush after each (plus the headers)", cw.writes, cw.flushes)
	}
}

type countingWriter struct {
	*httptest.ResponseRecorder
	writes, flushes int
}

func (c *countingWriter) Write(b []byte) (int, error) { c.writes++; return c.ResponseRecorder.Write(b) }
func (c *countingWriter) Flush()                      { c.flushes++; c.ResponseRecorder.Flush() }

// A long one-line event is written as a short one is, byte for byte,
// without passing through the writer's buffer: the buffer kept the size
// of the largest event for the rest of the stream.
func TestSSEWriter_LongLineNotBuffered(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	sw, err := newSSEWriter(rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"text":"` + strings.Repeat("x", 1<<20) + `"}` + "\r")
	if err := sw.event("response.completed", data); err != nil {
		t.Fatal(err)
	}
	if err := sw.event("e", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	want := "event: response.completed\ndata: " + string(data[:len(data)-1]) + "\n\n" + "event: e\ndata: {}\n\n"
	if got := rec.Body.String(); got != want {
		t.Fatalf("stream of %d bytes differs from the %d wanted", len(got), len(want))
	}
	if c := sw.buf.Cap(); c >= directData {
		t.Fatalf("the buffer grew to %d bytes", c)
	}
}
