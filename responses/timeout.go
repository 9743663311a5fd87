package responses

import (
	"context"
	"errors"
	"net/http"
)

// errStoreTimeout is the cause of a request context that
// Options.StoreTimeout ended: the request still gets its reply (a 503 with
// Retry-After), unlike one whose client went away.
var errStoreTimeout = errors.New("responses: the store did not answer within the request's store timeout")

// storeContext bounds the store calls a handler makes before it streams or
// waits (create's writes, a GET's read, cancel, delete, input_items,
// /v1/hosts): during an outage they end after StoreTimeout with a 503,
// instead of hanging the request for the whole outage.
func (s *server) storeContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(r.Context(), s.opts.StoreTimeout, errStoreTimeout)
}

// withStoreTimeout runs next with its request context bounded by
// StoreTimeout: for handlers that neither stream nor wait.
func (s *server) withStoreTimeout(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := s.storeContext(r)
		defer cancel()
		next(w, r.WithContext(ctx))
	}
}
