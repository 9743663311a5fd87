package host

import (
	"errors"

	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
)

// Webhooks. The commit that finishes a response (completed, failed,
// cancelled, incomplete; see protocol.WebhookEventType) carries one
// delivery of its event per Config.WebhookURLs entry, written by the
// store in the commit's transaction (the outbox, store.WebhookOutbox).
// Sending them is not the host's: package webhook claims and sends what
// the outbox holds, on any host. A commit that is not terminal carries
// nothing and costs nothing.

// checkWebhooks refuses webhook URLs over a store without an outbox.
func checkWebhooks(s store.Store, c *Config) error {
	if len(c.WebhookURLs) == 0 {
		return nil
	}
	if _, ok := s.(store.WebhookOutbox); !ok {
		return errors.New("host: Config.WebhookURLs needs a store implementing store.WebhookOutbox")
	}
	for _, u := range c.WebhookURLs {
		if u == "" {
			return errors.New("host: Config.WebhookURLs holds an empty URL")
		}
	}
	return nil
}

// webhooks returns the deliveries of the event of resp, which the commit
// being made finishes: one event (one id, the webhook-id every attempt
// carries) to each endpoint. nil when webhooks are off.
func (h *Host) webhooks(resp *protocol.Response) []store.WebhookInput {
	if len(h.cfg.WebhookURLs) == 0 {
		return nil
	}
	typ, ok := protocol.WebhookEventType(resp)
	if !ok {
		return nil
	}
	id := newID("evt_")
	out := make([]store.WebhookInput, len(h.cfg.WebhookURLs))
	for i, u := range h.cfg.WebhookURLs {
		out[i] = store.WebhookInput{EventID: id, Type: typ, Endpoint: u}
	}
	return out
}

// webhooksEnqueued tells the sender, if any, that a commit wrote
// deliveries, so that it claims them now rather than at its next poll.
func (h *Host) webhooksEnqueued(p *store.CommitParams) {
	if len(p.Webhooks) > 0 && h.cfg.WebhookEnqueued != nil {
		h.cfg.WebhookEnqueued()
	}
}
