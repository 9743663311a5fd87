package agent

import "github.com/superstep/superstep/workflow"

// LiveUpdate returns the Update an agent executor emitted as a live event,
// for a host that publishes live events (token streaming). It unwraps the
// nesting of sub-workflows (the returned Source is the innermost executor
// id), maps a string to an UpdateTextDelta (executors that stream text
// without an agent emit strings) and a workflow.LiveDiscard to an
// UpdateRetry (the deltas of that executor since its last UpdateText are
// void). ok is false for live values of other kinds.
func LiveUpdate(ev workflow.LiveEvent) (Update, bool) {
	for {
		inner, nested := ev.Value.(workflow.LiveEvent)
		if !nested {
			break
		}
		ev = inner
	}
	switch v := ev.Value.(type) {
	case Update:
		v.Source = ev.ExecutorID
		return v, true
	case string:
		return Update{Kind: UpdateTextDelta, Text: v, Source: ev.ExecutorID}, true
	case workflow.LiveDiscard:
		return Update{Kind: UpdateRetry, Source: ev.ExecutorID}, true
	}
	return Update{}, false
}
