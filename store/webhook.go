package store

import (
	"context"
	"time"
)

// Webhook outbox. The commit that finishes a response (a terminal Status)
// may carry webhook deliveries (CommitParams.Webhooks); the store writes
// them in the commit's own transaction, so a response that finished always
// has its deliveries pending and one that did not never has any. A sender
// (package webhook) claims due deliveries, sends them and reports each
// attempt's outcome. Stores that keep an outbox implement WebhookOutbox.

// WebhookStatus is the state of a webhook delivery.
type WebhookStatus string

// Webhook delivery states.
const (
	// WebhookPending: not delivered yet; due at NextAttemptAt (a claimed
	// delivery's NextAttemptAt is when its claim expires).
	WebhookPending WebhookStatus = "pending"
	// WebhookDelivered: an attempt got a 2xx answer.
	WebhookDelivered WebhookStatus = "delivered"
	// WebhookFailed: the sender gave up (its retry period passed).
	WebhookFailed WebhookStatus = "failed"
)

// WebhookInput is a delivery a terminal commit enqueues: one event
// (EventID, Type) about the commit's response, to one endpoint.
type WebhookInput struct {
	// EventID is the event's id ("evt_…"), sent as the webhook-id header
	// and the body's id: the same for every endpoint of one event and for
	// every attempt, so receivers can de-duplicate. (EventID, Endpoint)
	// is unique.
	EventID string
	// Type is the event type (response.completed, …).
	Type string
	// Endpoint is the URL the event is posted to.
	Endpoint string
}

// WebhookDelivery is one delivery of the outbox.
type WebhookDelivery struct {
	ID         int64 // assigned by the store, increasing
	EventID    string
	Type       string
	ResponseID string
	Endpoint   string
	Status     WebhookStatus
	// Attempts counts the claims made so far; the claim of attempt n
	// reports with Attempt n.
	Attempts int
	// CreatedAt is the commit's time: the event's created_at.
	CreatedAt time.Time
	// NextAttemptAt is when the delivery is due: when a retry is due, or
	// when the current claim expires.
	NextAttemptAt time.Time
	// ClaimOwner names the sender holding the claim of a pending
	// delivery ("" when none holds it: before the first claim, after a
	// retry report) or that delivered it or marked it failed.
	ClaimOwner string
	// LastError is the last failed attempt's reason ("" when none).
	LastError string
	// DoneAt is when it was delivered or marked failed; nil while pending.
	DoneAt *time.Time
}

// WebhookClaimParams are the arguments of WebhookClaim.
type WebhookClaimParams struct {
	// Owner names the claiming sender (required).
	Owner string
	// Lease is how long the claim holds (> 0): a sender that dies holding
	// it leaves the delivery due again at its end.
	Lease time.Duration
	// Limit caps how many deliveries are claimed; <= 0 means 100.
	Limit int
	Now   time.Time // zero: the store's clock (see Clock)
}

// WebhookReportParams are the arguments of WebhookReport: the outcome of
// the attempt made under one claim.
type WebhookReportParams struct {
	ID      int64
	Owner   string // the claim's Owner
	Attempt int    // the delivery's Attempts as the claim returned it
	// Status is WebhookDelivered, WebhookFailed (given up), or
	// WebhookPending: retry after RetryAfter.
	Status     WebhookStatus
	RetryAfter time.Duration
	Error      string // the failed attempt's reason; replaces LastError ("" clears it)
	Now        time.Time
}

// WebhookListParams are the arguments of WebhookList.
type WebhookListParams struct {
	Status     WebhookStatus // "" lists every status
	ResponseID string        // "" lists every response's
	After      int64         // list deliveries with ID > After
	Limit      int           // <= 0 means 100
}

// WebhookCounts counts the outbox's deliveries per status.
type WebhookCounts struct {
	Pending, Delivered, Failed int64
}

// WebhookPruneParams are the arguments of WebhookPrune.
type WebhookPruneParams struct {
	// Before: delivered and failed deliveries done before it are deleted.
	Before time.Time
	// Limit caps how many one call deletes; <= 0 means 1000.
	Limit int
}

// WebhookOutbox is implemented by stores that keep webhook deliveries
// written by terminal commits (CommitParams.Webhooks): both backends. It
// is optional: callers find it with a type assertion.
//
// A delivery is claimed for a lease, attempted, and reported; a claim
// whose holder died expires and the delivery is claimed again, by any
// sender: delivery is at least once. (A store that knows its previous
// user is gone may release its claims when it opens, as SQLite does with
// leases.) Deliveries are not deleted with
// their response (ResponseDelete, ResponsePrune): the event happened, so
// a pending one is still sent, and the receiver reading the response gets
// what any reader of a deleted response gets. WebhookPrune deletes those
// done.
type WebhookOutbox interface {
	// WebhookClaim claims up to p.Limit pending deliveries due at Now,
	// oldest due first, for p.Owner until Now+p.Lease (their
	// NextAttemptAt), incrementing their Attempts, and returns them.
	// Concurrent claims (several hosts) never return one delivery twice
	// within a lease.
	WebhookClaim(ctx context.Context, p *WebhookClaimParams) ([]*WebhookDelivery, error)
	// WebhookReport records the outcome of a claimed attempt. ErrFenced
	// when the claim is no longer p.Owner's at p.Attempt (it expired and
	// was claimed again, or the delivery is done); ErrNotFound for an
	// unknown delivery.
	WebhookReport(ctx context.Context, p *WebhookReportParams) error
	// WebhookList returns deliveries in ID order.
	WebhookList(ctx context.Context, p *WebhookListParams) ([]*WebhookDelivery, error)
	// WebhookCount counts the deliveries per status.
	WebhookCount(ctx context.Context) (*WebhookCounts, error)
	// WebhookPrune deletes delivered and failed deliveries done before
	// p.Before and returns how many.
	WebhookPrune(ctx context.Context, p *WebhookPruneParams) (int, error)
}
