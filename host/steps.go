package host

import (
	"errors"
	"strconv"
	"time"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/workflow"
)

// This file turns what the workflow engine reports (a superstep, a live
// event) into what the projector (package protocol) takes. It decides no
// frame and no item: that is the projector's.

// stepInput returns the projector's view of step s: its outputs, mapped
// as agent.FromWorkflow maps them (agent.UpdateFromEvent), the response
// status after it, the reply an agent cut short in it, and usage, the
// tokens its agents used. For a plain agent (conversation), a failed turn
// shows the agent's own error, not the workflow's wrapping of it.
func stepInput(s *workflow.Step, conversation bool, usage agent.Usage, inc *protocol.Incomplete, at time.Time) protocol.Step {
	ps := protocol.Step{Number: s.Number, Incomplete: inc, Usage: protocolUsage(usage), At: at}
	for _, ev := range s.Events {
		if u, ok := agent.UpdateFromEvent(ev); ok {
			if o, ok := output(u); ok {
				ps.Outputs = append(ps.Outputs, o)
			}
		}
	}
	ps.Status, ps.Error = stepStatus(s, conversation)
	return ps
}

// output maps an agent update that is an output item.
func output(u agent.Update) (protocol.Output, bool) {
	o := protocol.Output{Executor: u.Source, Text: u.Text, CallID: u.CallID, Name: u.Name, Arguments: u.Arguments}
	switch u.Kind {
	case agent.UpdateText:
		o.Kind = protocol.OutputMessage
	case agent.UpdateFunctionCall:
		o.Kind = protocol.OutputRequest
	case agent.UpdateToolCall:
		o.Kind = protocol.OutputToolCall
	default:
		return protocol.Output{}, false
	}
	return o, true
}

// stepStatus maps a step's run status to the response status.
func stepStatus(s *workflow.Step, conversation bool) (string, *protocol.Error) {
	switch s.Status {
	case workflow.Running:
		return protocol.StatusInProgress, nil
	case workflow.Idle, workflow.Completed:
		return protocol.StatusCompleted, nil
	}
	if s.Err == nil {
		return protocol.StatusFailed, &protocol.Error{Code: "server_error", Message: "workflow failed"}
	}
	err := s.Err
	if te, ok := errors.AsType[*agent.TurnError](err); ok && conversation {
		err = te.Err
	}
	werr, _ := clientError(err, false)
	return protocol.StatusFailed, werr
}

// protocolUsage converts an agent's usage to the API's.
func protocolUsage(u agent.Usage) protocol.Usage {
	return protocol.Usage{
		InputTokens:         u.InputTokens,
		InputTokensDetails:  protocol.InputTokensDetails{CachedTokens: u.CachedInputTokens},
		OutputTokens:        u.OutputTokens,
		OutputTokensDetails: protocol.OutputTokensDetails{ReasoningTokens: u.ReasoningTokens},
		TotalTokens:         u.TotalTokens,
	}
}

// liveInput returns the projector's view of live event ev, unwrapping its
// sub-workflow nesting (the one place that does): the stream names the
// emitting attempt at every level, "exec#attempt" then
// "/step/exec#attempt" per nested level, and the executor is the hosted
// workflow's. ok is false for a value that publishes nothing: an agent
// update other than a delta, a tool call or a retry, or a value of
// another type. A string is a text delta (executors that stream text
// without an agent emit strings); a workflow.LiveDiscard voids the
// attempt's stream.
func liveInput(ev workflow.LiveEvent) (protocol.LiveEvent, bool) {
	// Once per token: appended, not formatted.
	buf := make([]byte, 0, 32)
	buf = strconv.AppendInt(append(append(buf, ev.ExecutorID...), '#'), int64(ev.Attempt), 10)
	v := ev.Value
	for {
		inner, nested := v.(workflow.LiveEvent)
		if !nested {
			break
		}
		buf = strconv.AppendInt(append(buf, '/'), inner.Step, 10)
		buf = strconv.AppendInt(append(append(append(buf, '/'), inner.ExecutorID...), '#'), int64(inner.Attempt), 10)
		v = inner.Value
	}
	le := protocol.LiveEvent{Step: ev.Step, Executor: ev.ExecutorID, Stream: string(buf)}
	switch v := v.(type) {
	case string:
		le.Kind, le.Text = protocol.LiveTextDelta, v
	case workflow.LiveDiscard:
		le.Kind = protocol.LiveDiscard
	case agent.Update:
		switch v.Kind {
		case agent.UpdateTextDelta:
			le.Kind, le.Text = protocol.LiveTextDelta, v.Text
		case agent.UpdateToolCall:
			le.Kind, le.CallID, le.Name, le.Arguments = protocol.LiveToolCall, v.CallID, v.Name, v.Arguments
		case agent.UpdateToolResult:
			le.Kind, le.CallID, le.Text = protocol.LiveToolResult, v.CallID, v.Text
		case agent.UpdateRetry:
			le.Kind = protocol.LiveRetry
		default:
			return protocol.LiveEvent{}, false // handoffs, usage and the like are not output items
		}
	default:
		return protocol.LiveEvent{}, false
	}
	return le, true
}
