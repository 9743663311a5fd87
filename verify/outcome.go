package verify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/superstep/superstep/protocol"
)

// Outcome is what a finished response amounts to: its final status and one
// string per output item, in order. A message item contributes the
// concatenation of its output_text parts; a function_call item contributes
// "function_call <name> <arguments>", a server-run tool call
// "tool_call <name> <arguments> -> <output>"; any other item its type.
type Outcome struct {
	Status string
	Output []string
}

// Equal reports whether o and p have the same status and output.
func (o Outcome) Equal(p Outcome) bool {
	return o.Status == p.Status && slices.Equal(o.Output, p.Output)
}

// String formats the outcome for messages.
func (o Outcome) String() string {
	return fmt.Sprintf("%s %q", o.Status, o.Output)
}

// wireContent is one content part of a message item.
type wireContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// wireItem is the part of an output item the checker reads.
type wireItem struct {
	ID        string        `json:"id"`
	Type      string        `json:"type"`
	Content   []wireContent `json:"content"`
	Name      string        `json:"name"`
	Arguments string        `json:"arguments"`
	Output    *string       `json:"output"`
}

// text returns the item's contribution to an Outcome.
func (it *wireItem) text() string {
	switch it.Type {
	case "message":
		var b strings.Builder
		for _, c := range it.Content {
			if c.Type == "output_text" {
				b.WriteString(c.Text)
			}
		}
		return b.String()
	case "function_call":
		return "function_call " + it.Name + " " + it.Arguments
	case protocol.ItemToolCall:
		out := "tool_call " + it.Name + " " + it.Arguments
		if it.Output != nil {
			out += " -> " + *it.Output
		}
		return out
	}
	return it.Type
}

// wireResponse is the part of a Response object the checker reads.
type wireResponse struct {
	ID     string     `json:"id"`
	Status string     `json:"status"`
	Output []wireItem `json:"output"`
}

// outcome converts the response to an Outcome.
func (r *wireResponse) outcome() Outcome {
	o := Outcome{Status: r.Status, Output: make([]string, len(r.Output))}
	for i := range r.Output {
		o.Output[i] = r.Output[i].text()
	}
	return o
}

// wireEvent is the part of a stream event payload the checker reads.
type wireEvent struct {
	Type           string        `json:"type"`
	SequenceNumber *int64        `json:"sequence_number"`
	Response       *wireResponse `json:"response"`
	OutputIndex    *int          `json:"output_index"`
	Item           *wireItem     `json:"item"`
}

// parseEvent decodes an event payload.
func parseEvent(data []byte) (*wireEvent, error) {
	var ev wireEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, fmt.Errorf("verify: event payload is not JSON: %w", err)
	}
	return &ev, nil
}

// OutcomeOf returns the outcome carried by a lifecycle event payload (such
// as a terminal event's data), which must hold a response object.
func OutcomeOf(payload []byte) (Outcome, error) {
	ev, err := parseEvent(payload)
	if err != nil {
		return Outcome{}, err
	}
	if ev.Response == nil {
		return Outcome{}, fmt.Errorf("verify: event %q carries no response", ev.Type)
	}
	return ev.Response.outcome(), nil
}

// SnapshotOutcome returns the outcome of a Response object (such as
// store.Response.Snapshot or the body of GET /v1/responses/{id}).
func SnapshotOutcome(snapshot []byte) (Outcome, error) {
	var r wireResponse
	if err := json.Unmarshal(snapshot, &r); err != nil {
		return Outcome{}, fmt.Errorf("verify: response snapshot is not JSON: %w", err)
	}
	return r.outcome(), nil
}

// ItemOutcome returns how Outcome shows one output item (the "item" of an
// output_item event): a message's text, "function_call NAME ARGS", or the
// item's type; and the item's type.
func ItemOutcome(item []byte) (text, itemType string, err error) {
	var it wireItem
	if err := json.Unmarshal(item, &it); err != nil {
		return "", "", fmt.Errorf("verify: output item is not JSON: %w", err)
	}
	return it.text(), it.Type, nil
}

// IsTerminal reports whether an event type ends a response's stream: the
// one set, protocol.IsTerminal.
func IsTerminal(eventType string) bool { return protocol.IsTerminal(eventType) }

// jsonEqual reports whether a and b are the same JSON text up to
// insignificant whitespace.
func jsonEqual(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
