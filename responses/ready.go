package responses

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/superstep/superstep/host"
)

// readyCacheFor is how long a readiness result is reused: probes from
// several load balancers cost the store at most one check per interval.
const readyCacheFor = time.Second

// readiness checks host.Ready for GET /readyz, at most once per
// readyCacheFor, and logs each change of state once.
type readiness struct {
	mu      sync.Mutex
	checked time.Time
	err     error
	known   bool // err is the result of a check (the first one logs only a failure)
}

// handleReadyz serves GET /readyz: 200 "ok" while the host can serve
// requests that need the store (host.Ready: the store accepts a write
// within ReadyTimeout), 503 otherwise: store unreachable, full, read-only
// or locked, or the server shutting down. A load balancer takes the host
// out of rotation on 503 and back on 200. /healthz stays the cheap
// liveness check: it touches nothing.
func (s *server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	err := s.checkReady(r.Context())
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	if err == nil {
		_, _ = io.WriteString(w, "ok\n")
		return
	}
	// The reason without internals: /readyz needs no key.
	msg := "not ready: the store is unavailable\n"
	if errors.Is(err, host.ErrHostClosed) {
		msg = "not ready: the server is shutting down\n"
	}
	h.Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = io.WriteString(w, msg)
}

// checkReady returns the host's readiness, from a check at most
// readyCacheFor old. Concurrent probes wait for one check.
func (s *server) checkReady(ctx context.Context) error {
	rd := &s.ready
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if rd.known && time.Since(rd.checked) < readyCacheFor {
		return rd.err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ReadyTimeout)
	err := s.host.Ready(cctx)
	cancel()
	switch {
	case err != nil && (!rd.known || rd.err == nil):
		s.log.LogAttrs(ctx, slog.LevelWarn, "responses: not ready", slog.Any("err", err))
	case err == nil && rd.known && rd.err != nil:
		s.log.LogAttrs(ctx, slog.LevelInfo, "responses: ready again")
	}
	rd.checked, rd.err, rd.known = time.Now(), err, true
	return err
}
