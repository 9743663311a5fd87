package protocol

import "encoding/json"

// Webhook event types: one event per finished response, as OpenAI's
// webhooks name them, and WebhookRequiresAction for a response that ended
// waiting for the client's answers to its function_call items.
const (
	WebhookCompleted  = "response.completed"
	WebhookFailed     = "response.failed"
	WebhookCancelled  = "response.cancelled"
	WebhookIncomplete = "response.incomplete"
	// WebhookRequiresAction: the response is completed (its status, as
	// OpenAI's is when a model calls a function) and its output holds
	// function_call items: a workflow's requests for input (human in the
	// loop) or an agent's client tool calls. The run goes on only when a
	// follow-up request (previous_response_id) carries their
	// function_call_output items. OpenAI has no such event; the name is
	// the run status its Assistants API gave this state.
	WebhookRequiresAction = "response.requires_action"
)

// WebhookEventType returns the type of the webhook event of a response
// that finished as r shows it, and false for a response that is not
// finished (no event).
func WebhookEventType(r *Response) (string, bool) {
	switch r.Status {
	case StatusCompleted:
		for i := range r.Output {
			if r.Output[i].Type == ItemFunctionCall {
				return WebhookRequiresAction, true
			}
		}
		return WebhookCompleted, true
	case StatusFailed:
		return WebhookFailed, true
	case StatusCancelled:
		return WebhookCancelled, true
	case StatusIncomplete:
		return WebhookIncomplete, true
	}
	return "", false
}

// WebhookEvent is the body of a webhook request (object "event"), as
// OpenAI's webhooks send it: the event's id (also the webhook-id header),
// its type, when it happened (Unix seconds) and the response it is about.
// Receivers fetch the response by Data.ID.
type WebhookEvent struct {
	Object    string           `json:"object"`
	ID        string           `json:"id"`
	Type      string           `json:"type"`
	CreatedAt int64            `json:"created_at"`
	Data      WebhookEventData `json:"data"`
}

// WebhookEventData names the response a webhook event is about.
type WebhookEventData struct {
	ID string `json:"id"`
}

// NewWebhookEvent returns the event body for an event about responseID.
func NewWebhookEvent(id, typ string, createdAt int64, responseID string) WebhookEvent {
	return WebhookEvent{Object: "event", ID: id, Type: typ, CreatedAt: createdAt, Data: WebhookEventData{ID: responseID}}
}

// Marshal encodes the event: the same bytes for the same event, on every
// attempt.
func (e WebhookEvent) Marshal() ([]byte, error) { return json.Marshal(e) }
