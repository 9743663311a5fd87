package protocol_test

import (
	"testing"

	"github.com/superstep/superstep/protocol"
)

func TestWebhookEventType(t *testing.T) {
	t.Parallel()
	msg := protocol.Item{Type: protocol.ItemMessage}
	call := protocol.Item{Type: protocol.ItemFunctionCall}
	tool := protocol.Item{Type: protocol.ItemToolCall}
	for _, c := range []struct {
		status string
		output []protocol.Item
		want   string
	}{
		{protocol.StatusCompleted, []protocol.Item{msg}, protocol.WebhookCompleted},
		{protocol.StatusCompleted, []protocol.Item{tool, msg}, protocol.WebhookCompleted},
		{protocol.StatusCompleted, []protocol.Item{msg, call}, protocol.WebhookRequiresAction},
		{protocol.StatusFailed, []protocol.Item{call}, protocol.WebhookFailed},
		{protocol.StatusCancelled, nil, protocol.WebhookCancelled},
		{protocol.StatusIncomplete, []protocol.Item{msg}, protocol.WebhookIncomplete},
		{protocol.StatusInProgress, nil, ""},
		{protocol.StatusQueued, nil, ""},
	} {
		got, ok := protocol.WebhookEventType(&protocol.Response{Status: c.status, Output: c.output})
		if got != c.want || ok != (c.want != "") {
			t.Errorf("%s with %d items: %q %v, want %q", c.status, len(c.output), got, ok, c.want)
		}
	}
}

// TestWebhookEvent_Marshal: the body OpenAI's webhooks send.
func TestWebhookEvent_Marshal(t *testing.T) {
	t.Parallel()
	b, err := protocol.NewWebhookEvent("evt_1", protocol.WebhookCompleted, 1700000000, "resp_1").Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"object":"event","id":"evt_1","type":"response.completed","created_at":1700000000,"data":{"id":"resp_1"}}`
	if string(b) != want {
		t.Fatalf("body %s, want %s", b, want)
	}
}
