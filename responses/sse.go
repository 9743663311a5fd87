package responses

import (
	"bytes"
	"errors"
	"github.com/superstep/superstep/protocol"
	"net/http"
	"time"
)

// sseWriter writes Server-Sent Events: one frame per write and flush, so a
// frame is never split across flushes nor held back in a buffer.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	// writeTimeout bounds each write, so a reader that stopped reading
	// cannot hold the handler forever; 0 means none.
	writeTimeout time.Duration
	buf          bytes.Buffer
}

// newSSEWriter sends the SSE response headers (status 200) and flushes
// them, so the client sees the stream open before the first event.
func newSSEWriter(w http.ResponseWriter, writeTimeout time.Duration) (*sseWriter, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w), writeTimeout: writeTimeout}
	return s, s.flush()
}

// event writes one "event:"/"data:" frame (write) and flushes it.
func (s *sseWriter) event(name string, data []byte) error {
	if err := s.write(name, data); err != nil {
		return err
	}
	return s.flush()
}

// writeFrame writes f as write writes a frame of its whole payload; a
// spliced payload (a long reply's) is written piece by piece, not joined.
func (s *sseWriter) writeFrame(f *protocol.Frame) error {
	if len(f.Splices) == 0 || !oneLine(f) {
		return s.write(f.Type, f.Bytes())
	}
	s.head(f.Type)
	s.buf.WriteString("data: ")
	if err := s.put(); err != nil {
		return err
	}
	if _, err := f.WriteTo(s.w); err != nil {
		return err
	}
	_, err := s.w.Write([]byte("\n\n"))
	return err
}

// oneLine reports whether f's payload holds no newline and does not end
// in a carriage return: a frame write writes as one data line, as it is.
func oneLine(f *protocol.Frame) bool {
	var last []byte
	for p := range f.Pieces() {
		if bytes.IndexByte(p, '\n') >= 0 {
			return false
		}
		if len(p) > 0 {
			last = p
		}
	}
	return !bytes.HasSuffix(last, []byte("\r"))
}

// write writes one "event:"/"data:" frame without flushing it: a caller
// with more frames at hand writes them all and flushes once. Data that
// holds newlines is split over several data lines, as the SSE format
// requires; the JSON the host logs has none, so normally it is one line.
func (s *sseWriter) write(name string, data []byte) error {
	s.head(name)
	if len(data) >= directData && bytes.IndexByte(data, '\n') < 0 {
		// One long line: written from where it is, not copied into buf
		// (which would keep the size of the largest event, an 8 MiB
		// reply's text, for the rest of the stream).
		s.buf.WriteString("data: ")
		return s.put(bytes.TrimSuffix(data, []byte("\r")), []byte("\n\n"))
	}
	for {
		line, rest, more := bytes.Cut(data, []byte("\n"))
		s.buf.WriteString("data: ")
		s.buf.Write(bytes.TrimSuffix(line, []byte("\r")))
		s.buf.WriteByte('\n')
		if !more {
			break
		}
		data = rest
	}
	s.buf.WriteByte('\n')
	return s.put()
}

// head starts a frame in buf: its "event:" line, if it is named.
func (s *sseWriter) head(name string) {
	s.buf.Reset()
	if name != "" {
		s.buf.WriteString("event: ")
		s.buf.WriteString(name)
		s.buf.WriteByte('\n')
	}
}

// comment writes an SSE comment line (ignored by clients); used as a
// keep-alive on idle streams.
func (s *sseWriter) comment(text string) error {
	s.buf.Reset()
	s.buf.WriteString(": ")
	s.buf.WriteString(text)
	s.buf.WriteString("\n\n")
	return s.send()
}

// done writes the final "data: [DONE]" frame.
func (s *sseWriter) done() error {
	s.buf.Reset()
	s.buf.WriteString("data: [DONE]\n\n")
	return s.send()
}

// directData is the length from which event writes an event's data line
// as it is rather than through buf.
const directData = 32 << 10

// send writes buf, then more, and flushes.
func (s *sseWriter) send(more ...[]byte) error {
	if err := s.put(more...); err != nil {
		return err
	}
	return s.flush()
}

// put writes buf, then more.
func (s *sseWriter) put(more ...[]byte) error {
	if s.writeTimeout > 0 {
		err := s.rc.SetWriteDeadline(time.Now().Add(s.writeTimeout))
		if err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
	}
	if _, err := s.w.Write(s.buf.Bytes()); err != nil {
		return err
	}
	for _, b := range more {
		if _, err := s.w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

func (s *sseWriter) flush() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
