package store

import "context"

// ResponseCancelReader is implemented by stores that read whether a
// response's cancel is recorded without reading its whole row: hosts ask
// it for every run they drive, every poll, and a row holds the request
// and may hold the snapshot, megabytes each for a long text.
type ResponseCancelReader interface {
	// ResponseCancelRequested reports Response.CancelRequested of the
	// response (ErrNotFound).
	ResponseCancelRequested(ctx context.Context, id string) (bool, error)
}
