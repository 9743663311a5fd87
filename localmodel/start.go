package localmodel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Server is a running local model server; see Start.
type Server struct {
	// URL is the base URL for OpenAI clients, ending in "/v1".
	URL string

	srv  *http.Server
	done chan error
}

// Start serves NewHandler(opts) on addr (e.g. "127.0.0.1:0") until Close.
// It is for offline demos that need the model on its own port; to share a
// port, mount NewHandler on an existing mux instead.
func Start(addr string, opts *Options) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("localmodel: listen %s: %w", addr, err)
	}
	s := &Server{
		URL:  "http://" + ln.Addr().String() + "/v1",
		srv:  &http.Server{Handler: NewHandler(opts), ReadHeaderTimeout: 10 * time.Second},
		done: make(chan error, 1),
	}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server, waiting for open streams until ctx is done.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.srv.Close())
	}
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("localmodel: close: %w", err)
	}
	return nil
}
