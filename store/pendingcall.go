package store

import "context"

// PendingCallReader is implemented by stores that index the call ids a
// response left waiting for answers (CommitParams.PendingCalls); both
// backends do. It is optional: callers find it with a type assertion. The
// host reads it to continue a workflow's run from a function_call_output
// that names only its call_id (stateless replay without
// previous_response_id).
//
// The index is written by the commit that finishes the response, so it is
// exactly as durable as the function_call items the client saw, and costs
// one row per pending call; it goes with its response (ResponseDelete,
// ResponsePrune). An entry may outlive the call's pending state (the call
// was answered, a later response of the run made the same call id):
// readers check the response it names.
type PendingCallReader interface {
	// PendingCallGet returns the id of the response that left owner's
	// call callID pending (ErrNotFound when none did).
	PendingCallGet(ctx context.Context, owner, callID string) (string, error)
}
