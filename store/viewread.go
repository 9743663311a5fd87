package store

import "context"

// ResponseViewReader is implemented by stores that read a response
// without its request and recorded input, for readers that show the
// response (its snapshot, status and place in the log): a row's request
// may be megabytes (a long input, a conversation replayed by the client),
// which a client polling a background response would otherwise have read
// from storage at every poll.
type ResponseViewReader interface {
	// ResponseView is ResponseGet with Request and Input nil (ErrNotFound
	// for an unknown response).
	ResponseView(ctx context.Context, id string) (*Response, error)
}
