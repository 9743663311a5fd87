package sqlite

import (
	"context"

	"github.com/superstep/superstep/store"
)

var _ store.ResponseCancelReader = (*Store)(nil)

// ResponseCancelRequested reports whether the response's cancel is
// recorded (store.ErrNotFound), reading that column alone.
func (s *Store) ResponseCancelRequested(ctx context.Context, id string) (bool, error) {
	if err := s.checkOpen("response cancel requested"); err != nil {
		return false, err
	}
	var requested bool
	err := s.rdb.QueryRowContext(ctx, "SELECT cancel_requested FROM responses WHERE id = ?", id).Scan(&requested)
	return requested, mapError("response cancel requested "+id, err)
}
