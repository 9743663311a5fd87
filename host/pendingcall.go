package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
)

// Answers by call id alone. A client that keeps no response ids (a
// stateless tool loop) may answer a pending function call — a workflow's
// request for input, or a client tool call — with a function_call_output
// naming only its call_id, without previous_response_id and without the
// function_call in its input. The host finds the response that left the
// call pending through the store's index of pending calls
// (store.PendingCallReader), written by that response's terminal commit
// (store.CommitParams.PendingCalls): one row per pending call, as durable
// as the function_call item the client saw, and no scan of responses. The
// create then continues that response, exactly as naming it in
// previous_response_id would (the new response shows it so). A call id
// the index does not hold for the caller (unknown, another owner's) is a
// 400 naming input[i].call_id, nothing stored.

// pendingCalls returns the call ids resp, finished with status, leaves
// waiting for answers: its function_call items, when it completed and
// the store indexes them.
func (h *Host) pendingCalls(status store.Status, resp *protocol.Response) []string {
	if status != store.StatusCompleted {
		return nil
	}
	if _, ok := h.store.(store.PendingCallReader); !ok {
		return nil
	}
	var calls []string
	for _, it := range resp.Output {
		if it.Type == protocol.ItemFunctionCall && it.CallID != "" {
			calls = append(calls, it.CallID)
		}
	}
	return calls
}

// answeredResponse returns the response whose pending calls the
// function_call_output items of p answer when they name only call ids
// (no function_call earlier in the input answers them), or "" when none
// does so. All such answers must be of one response of p.Owner's.
func (h *Host) answeredResponse(ctx context.Context, p *CreateParams) (string, error) {
	pr, ok := h.store.(store.PendingCallReader)
	if !ok {
		return "", nil // replayedCalls refuses such answers
	}
	calls := map[string]bool{}
	prev := ""
	for i, it := range p.Input {
		switch it.Type {
		case protocol.InputFunctionCall:
			calls[it.CallID] = true
		case InputFunctionCallOutput:
			if calls[it.CallID] {
				continue
			}
			param := fmt.Sprintf("input[%d].call_id", i)
			id, err := pr.PendingCallGet(ctx, p.Owner, it.CallID)
			if errors.Is(err, store.ErrNotFound) {
				return "", &InputError{Param: param, Code: protocol.CodeInvalidValue, Message: fmt.Sprintf(
					"No pending function call with call_id '%s' was found. Send the function_call with its output, "+
						"or continue the response that made it with previous_response_id.", truncateID(it.CallID))}
			}
			if err != nil {
				return "", fmt.Errorf("host: find the response of call %s: %w", it.CallID, err)
			}
			if prev != "" && id != prev {
				return "", &InputError{Param: param, Code: protocol.CodeInvalidValue, Message: fmt.Sprintf(
					"call_id '%s' is a call of response %s, and an earlier output answers response %s: answer one response at a time.",
					truncateID(it.CallID), id, prev)}
			}
			prev = id
		}
	}
	if prev != "" && len(calls) > 0 {
		return "", &InputError{Param: "input", Code: protocol.CodeInvalidValue, Message: fmt.Sprintf(
			"the input replays function calls and also answers calls pending in response %s; send one or the other", prev)}
	}
	return prev, nil
}
