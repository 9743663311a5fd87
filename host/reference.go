package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
)

// resolveReferences returns input with each item_reference replaced by the
// output item it names, as if the client had sent that item whole: an
// assistant message, a function_call, or a server-run tool call (mcp_call)
// with its output. The item must belong to a stored response of owner and
// be finished. A reference the host cannot resolve (a malformed id, a
// response missing, deleted or another owner's, an index out of range, an
// item not finished) is an *InputError on input[i].id: before anything is
// stored. input is not changed; without references it is returned as it
// is. Each response is read once, however many references name it.
func (h *Host) resolveReferences(ctx context.Context, owner string, input []InputItem) ([]InputItem, error) {
	var (
		out     []InputItem
		outputs = map[string][]protocol.Item{}
	)
	for i, it := range input {
		if it.Type != protocol.InputItemReference {
			continue
		}
		if out == nil {
			out = append([]InputItem(nil), input...)
		}
		resolved, err := h.resolveReference(ctx, owner, it.ID, outputs)
		if err != nil {
			if ie, ok := errors.AsType[*InputError](err); ok {
				ie.Param = fmt.Sprintf("input[%d].id", i)
				ie.Message = fmt.Sprintf("Invalid value for 'input[%d].id': %s", i, ie.Message)
			}
			return nil, err
		}
		out[i] = resolved
	}
	if out == nil {
		return input, nil
	}
	return out, nil
}

// resolveReference returns the item id names (see resolveReferences);
// outputs caches the output items of the responses read so far.
func (h *Host) resolveReference(ctx context.Context, owner, id string, outputs map[string][]protocol.Item) (InputItem, error) {
	notFound := &InputError{Code: protocol.CodeInvalidValue,
		Message: fmt.Sprintf("no output item with id '%s' in a stored response.", truncateID(id))}
	respID, index, ok := protocol.ParseOutputItemID(id)
	if !ok {
		return InputItem{}, notFound
	}
	items, seen := outputs[respID]
	if !seen {
		resp, err := h.get(ctx, respID, owner)
		if errors.Is(err, store.ErrNotFound) {
			outputs[respID] = nil
			return InputItem{}, notFound
		}
		if err != nil {
			return InputItem{}, fmt.Errorf("host: resolve input item %s: %w", id, err)
		}
		var snap struct {
			Output []protocol.Item `json:"output"`
		}
		if err := json.Unmarshal(resp.Snapshot, &snap); err != nil {
			return InputItem{}, fmt.Errorf("host: resolve input item %s: read response %s: %w: %w", id, respID, store.ErrCorrupt, err)
		}
		items = snap.Output
		outputs[respID] = items
	}
	if index >= len(items) || items[index].ID != id {
		return InputItem{}, notFound
	}
	item := items[index]
	unfinished := &InputError{Code: protocol.CodeInvalidValue,
		Message: fmt.Sprintf("output item '%s' is not finished (status %s).", truncateID(id), item.Status)}
	if item.Status == protocol.ItemInProgress {
		return InputItem{}, unfinished
	}
	switch item.Type {
	case protocol.ItemMessage:
		var texts []string
		for _, c := range item.Content {
			texts = append(texts, c.Text)
		}
		// Joined as the reader joins the parts of a message sent whole.
		return InputItem{Type: InputMessage, Role: item.Role, Text: strings.Join(texts, "\n")}, nil
	case protocol.ItemFunctionCall:
		return InputItem{Type: protocol.InputFunctionCall, CallID: item.CallID, Name: item.Name, Arguments: item.Arguments}, nil
	case protocol.ItemToolCall:
		if item.Output == nil {
			return InputItem{}, unfinished
		}
		// Its id stands for the call id, as when the item is sent whole.
		return InputItem{Type: protocol.InputToolCall, CallID: item.ID, Name: item.Name, Arguments: item.Arguments,
			Output: *item.Output}, nil
	}
	return InputItem{}, notFound
}

// truncateID cuts a client's id for an error message.
func truncateID(id string) string {
	if len(id) > 100 {
		return id[:100] + "..."
	}
	return id
}
