package store

import (
	"context"
	"fmt"
	"time"
)

// IdempotencyWindow is how long an idempotency key counts after the create
// that recorded it (ResponseCreateParams.IdempotencyKey): within it, a
// create with the same owner and key is refused with an *IdempotencyError
// naming the first response; after it, the key is free again and its old
// record is replaced. Expired records are also deleted a few at a time by
// every create that records a key, so the table stays bounded without a
// background job.
const IdempotencyWindow = 24 * time.Hour

// IdempotencyKeyMax is the longest idempotency key, in bytes.
const IdempotencyKeyMax = 256

// IdempotencyRecord is what the store keeps of an idempotency key: which
// response its first create made, and a hash of that create's request.
type IdempotencyRecord struct {
	Owner       string
	Key         string
	RequestHash string
	ResponseID  string
	CreatedAt   time.Time
}

// IdempotencyError is returned by ResponseCreate when its IdempotencyKey is
// recorded for the same owner within IdempotencyWindow, by an earlier
// create or a concurrent one that committed first: nothing of the call is
// written. Record is the existing record. It matches ErrConflict.
type IdempotencyError struct {
	Record IdempotencyRecord
}

func (e *IdempotencyError) Error() string {
	return fmt.Sprintf("store: conflict: idempotency key %q of owner %q is recorded for response %s",
		e.Record.Key, e.Record.Owner, e.Record.ResponseID)
}

// Is reports whether target is ErrConflict.
func (e *IdempotencyError) Is(target error) bool { return target == ErrConflict }

// IdempotencyKeyGetParams are the arguments of IdempotencyKeyGet.
type IdempotencyKeyGetParams struct {
	Owner string
	Key   string
	// Now judges the record's age; zero means the store's clock (see
	// Clock).
	Now time.Time
}

// IdempotencyKeyReader is implemented by stores that record idempotency
// keys (ResponseCreateParams.IdempotencyKey); both backends do. It is
// optional: callers find it with a type assertion. The host reads a key
// before it does the work of a create (restoring a run to continue it),
// and relies on ResponseCreate's *IdempotencyError for creates that race.
type IdempotencyKeyReader interface {
	// IdempotencyKeyGet returns the record of the owner's key when it was
	// recorded less than IdempotencyWindow before p.Now (ErrNotFound
	// otherwise).
	IdempotencyKeyGet(ctx context.Context, p *IdempotencyKeyGetParams) (*IdempotencyRecord, error)
}
