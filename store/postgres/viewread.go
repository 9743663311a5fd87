package postgres

import (
	"context"
	"time"

	"github.com/superstep/superstep/store"
)

var _ store.ResponseViewReader = (*Store)(nil)

// ResponseView is ResponseGet without the request and the recorded input
// (store.ResponseViewReader): a long request is neither read from its
// TOAST relation nor sent.
func (s *Store) ResponseView(ctx context.Context, id string) (*store.Response, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	r, err := scanResponse(s.pool.QueryRow(ctx, "SELECT "+responseViewColumns+" FROM responses WHERE id = $1", id))
	if err == nil {
		err = s.readSnapshot(ctx, r)
	}
	return r, mapError("view response "+id, "", 0, err)
}
