package postgres

import (
	"context"

	"github.com/superstep/superstep/store"
)

var _ store.ResponseViewReader = (*Store)(nil)

// ResponseView is ResponseGet without the request and the recorded input
// (store.ResponseViewReader): a long request is neither read from its
// TOAST relation nor sent.
func (s *Store) ResponseView(ctx context.Context, id string) (*store.Response, error) {
	return s.readResponse(ctx, "view response", responseViewColumns, id)
}
