package sqlite

import (
	"context"

	"github.com/superstep/superstep/store"
)

var _ store.ResponseViewReader = (*Store)(nil)

// ResponseView is ResponseGet without the request and the recorded input
// (store.ResponseViewReader): a long request (in response_bodies) is not
// read.
func (s *Store) ResponseView(ctx context.Context, id string) (*store.Response, error) {
	return s.readResponse(ctx, "response view", responseViewSelect, id)
}
