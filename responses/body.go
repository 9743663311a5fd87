package responses

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// readBody reads the whole request body, at most maxBytes of it. A larger
// body fails with an *http.MaxBytesError (413 via writeError), one that
// does not arrive within BodyTimeout with an *bodyTimeoutError (408).
func readBody(w http.ResponseWriter, r *http.Request, maxBytes int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	rd := http.MaxBytesReader(w, r.Body, maxBytes)
	if n := r.ContentLength; n > 0 && n <= maxBytes {
		// The length is known: one buffer of that size (then a read to
		// see the end), where io.ReadAll grows by doubling, allocating
		// about twice the body and returning it with up to that much
		// spare capacity, which lives as long as the request (it is the
		// stored request).
		body := make([]byte, n)
		if _, err := io.ReadFull(rd, body); err != nil {
			return nil, fmt.Errorf("responses: read body: %w", err)
		}
		var one [1]byte
		if m, err := rd.Read(one[:]); m > 0 || (err != nil && err != io.EOF) {
			if err == nil {
				err = errors.New("the body is longer than its Content-Length")
			}
			return nil, fmt.Errorf("responses: read body: %w", err)
		}
		return body, nil
	}
	body, err := io.ReadAll(rd)
	if err != nil {
		return nil, fmt.Errorf("responses: read body: %w", err)
	}
	return body, nil
}

// bodyTimeoutError is the error of a body read that BodyTimeout ended.
type bodyTimeoutError struct{ limit time.Duration }

func (e *bodyTimeoutError) Error() string {
	return fmt.Sprintf("responses: the request body did not arrive within %v", e.limit)
}

// limitBodyTime bounds the time a request's body may take to arrive: a
// read deadline BodyTimeout after the handler starts, on the connection,
// cleared once the body was read to its end. A client that trickles a body
// (a byte every few seconds) is cut off then, with a 408 when the handler
// reads the body, and a closed connection when it does not (net/http's
// read of the unread rest fails at the deadline); either way its
// connection is freed.
//
// It is not http.Server.ReadTimeout: that deadline stays on the
// connection after the body, so net/http's background read of an SSE
// stream's connection hits it and cancels the stream's context.
// Requests without a body (most GETs) get no deadline: the server's
// ReadHeaderTimeout covered their headers.
func (s *server) limitBodyTime(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout)); err != nil {
			next.ServeHTTP(w, r) // a writer without deadlines (tests): nothing to bound
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, limit: s.opts.BodyTimeout}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody clears the connection's read deadline when the body ends,
// and turns the deadline's error into a *bodyTimeoutError.
type deadlineBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	limit time.Duration
	ended bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF && !b.ended:
		// Read to the end: what follows on the connection (net/http's
		// background read while a stream is written, the next request)
		// is not the body's.
		b.ended = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case err != nil && errors.Is(err, os.ErrDeadlineExceeded):
		err = &bodyTimeoutError{limit: b.limit}
	}
	return n, err
}
