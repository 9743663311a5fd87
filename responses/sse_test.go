package responses

import (
	"github.com/superstep/superstep/protocol"
	"net/http/httptest"
	"slices"
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

// A spliced frame (a long reply's) is written as its whole payload would
// be, byte for byte, with its pieces written where they are held: a long
// one is never copied into the writer's buffer or joined. A spliced frame
// whose pieces hold a newline is split over data lines as a whole one is.
func TestSSEWriter_SplicedFrame(t *testing.T) {
	t.Parallel()
	long := []byte(strings.Repeat("y", 1<<20))
	frames := []protocol.Frame{
		{Type: "response.output_text.done", Payload: []byte(`{"text":"","n":1}`), Splices: []protocol.Splice{{At: 9, Bytes: long}}},
		{Type: "response.output_item.done", Payload: []byte(`{"a":"","b":""}`), Splices: []protocol.Splice{{At: 6, Bytes: long}, {At: 13, Bytes: []byte("z")}}},
		{Type: "x", Payload: []byte(`{"t":""}`), Splices: []protocol.Splice{{At: 6, Bytes: []byte("a\nb")}}},
	}
	for _, f := range frames {
		got, want := &pieceWriter{ResponseRecorder: httptest.NewRecorder()}, httptest.NewRecorder()
		gw, err := newSSEWriter(got, 0)
		if err != nil {
			t.Fatal(err)
		}
		ww, err := newSSEWriter(want, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := gw.writeFrame(&f); err != nil {
			t.Fatal(err)
		}
		if err := ww.write(f.Type, f.Bytes()); err != nil {
			t.Fatal(err)
		}
		if g, w := got.Body.String(), want.Body.String(); g != w {
			t.Fatalf("%s: spliced frame written as %.200q, its whole payload as %.200q", f.Type, g, w)
		}
		if c := gw.buf.Cap(); c >= directData {
			t.Fatalf("%s: the buffer grew to %d bytes", f.Type, c)
		}
		if f.Splices[0].Bytes[0] == 'y' && !got.wrote(long) {
			t.Fatalf("%s: the long splice was not written from where it is held", f.Type)
		}
	}
}

// pieceWriter records the first byte's address of every slice written.
type pieceWriter struct {
	*httptest.ResponseRecorder
	starts []*byte
}

func (w *pieceWriter) Write(b []byte) (int, error) {
	if len(b) > 0 {
		w.starts = append(w.starts, &b[0])
	}
	return w.ResponseRecorder.Write(b)
}

func (w *pieceWriter) wrote(b []byte) bool { return slices.Contains(w.starts, &b[0]) }
