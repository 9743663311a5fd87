package postgres

import (
	"context"
	"time"

	"github.com/superstep/superstep/store"
)

var _ store.ResponseCancelReader = (*Store)(nil)

// ResponseCancelRequested reports whether the response's cancel is
// recorded (store.ErrNotFound), reading that column alone.
func (s *Store) ResponseCancelRequested(ctx context.Context, id string) (bool, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return false, err
	}
	var requested bool
	err := s.pool.QueryRow(ctx, "SELECT cancel_requested FROM responses WHERE id = $1", id).Scan(&requested)
	return requested, mapError("response cancel requested "+id, "", 0, err)
}
