// Package webhook sends the webhook events of finished responses and
// verifies their signatures.
//
// The events are not made here: the commit that finishes a response
// writes its deliveries into the store's outbox in the commit's own
// transaction (host.Config.WebhookURLs, store.CommitParams.Webhooks), so a
// response that finished always has its event pending and one that did
// not never has one. A Sender claims due deliveries from the outbox
// (store.WebhookOutbox), posts them and reports each attempt: at least
// once, by whichever host is alive (a claim is a lease; a host that dies
// holding it leaves the delivery to the next claim), retried with
// exponential backoff and jitter for Options.RetryFor, then marked failed
// (logged, counted, listed by `superstep check`).
//
// Requests follow the Standard Webhooks specification as OpenAI's
// webhooks use it: a JSON body {"object":"event","id","type",
// "created_at","data":{"id"}} (protocol.WebhookEvent) and the headers
// webhook-id (the event's id, the same on every attempt and every
// endpoint, for de-duplication), webhook-timestamp (Unix seconds of the
// attempt) and webhook-signature ("v1," and the base64 HMAC-SHA256 of
// "id.timestamp.body" keyed with the secret's bytes). Verifier checks
// them.
package webhook
