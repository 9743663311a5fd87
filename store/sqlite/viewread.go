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
	if err := s.checkOpen("response view"); err != nil {
		return nil, err
	}
	r, err := scanResponse(s.rdb.QueryRowContext(ctx, "SELECT "+responseViewSelect+" FROM responses WHERE id = ?", id))
	if err == nil {
		err = s.readSnapshot(ctx, r)
	}
	return r, mapError("response view "+id, err)
}
