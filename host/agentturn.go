package host

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/workflow"
)

// historyPart is the checkpoint part of a plain agent's run: the
// conversation so far, which the next turn receives before its new input.
const historyPart = "agent/history"

// createAgentTurn creates a response whose turn of a plain (non-workflow)
// agent is one durable step: the agent runs with the run's history plus the
// new input, and its whole output is committed at once. prev is the run
// continued, nil for a new one.
func (h *Host) createAgentTurn(ctx context.Context, m *model, p *CreateParams, prev *store.Run) (*store.Response, error) {
	sp := &startSpec{runID: newID("run_")}
	var history []agent.Message
	if prev != nil {
		cp, err := h.store.CheckpointGetLast(ctx, prev.ID)
		if err != nil {
			return nil, fmt.Errorf("host: load checkpoint of run %s: %w", prev.ID, err)
		}
		if history, err = decodeHistory(cp.Parts); err != nil {
			return nil, err
		}
		sp.runID, sp.lastStep, sp.lastParts = prev.ID, cp.Step, cp.Parts
	} else {
		parts, err := encodeHistory(nil)
		if err != nil {
			return nil, err
		}
		sp.checkpoint, sp.lastParts = parts, parts
	}
	input := toMessages(p.Input)
	sp.drive = func(r *run) func(context.Context) error { return h.driveAgentTurn(r, m.agent, history, input) }
	return h.createAndStart(ctx, m, p, sp)
}

// resumeAgentTurn re-runs an agent turn that no commit absorbed: the input
// comes from the head response's stored request.
func (h *Host) resumeAgentTurn(r *run, m *model, head *store.Response, cp *store.Checkpoint) (func(context.Context) error, error) {
	history, err := decodeHistory(cp.Parts)
	if err != nil {
		return nil, err
	}
	in, err := storedInput(head.Request)
	if err != nil {
		return nil, fmt.Errorf("host: input of response %s: %w", head.ID, err)
	}
	return h.driveAgentTurn(r, m.agent, history, toMessages(in)), nil
}

// driveAgentTurn runs the turn and commits its updates as one step.
func (h *Host) driveAgentTurn(r *run, a agent.Agent, history, input []agent.Message) func(context.Context) error {
	return func(ctx context.Context) error {
		msgs := append(append([]agent.Message(nil), history...), input...)
		// The turn is one step: its tools get a key stable across re-runs,
		// as an agent executor's do (run, step, "agent").
		ctx = agent.WithIdempotencyKey(ctx, fmt.Sprintf("%s:%d:agent", r.id, r.st.Step+1))
		// What the turn works for, as a workflow executor's tools see it.
		ctx = workflow.WithInvocation(ctx, workflow.Invocation{ID: r.info.ResponseID, Metadata: r.info.Metadata, MaxSupersteps: int64(h.cfg.MaxSupersteps)})
		var (
			updates []agent.Update
			turnErr error
		)
		for u, err := range a.Run(ctx, agent.NewSession(r.id), msgs) {
			if err != nil {
				turnErr = err
				break
			}
			if r.liveMode && (u.Kind == agent.UpdateTextDelta || u.Kind == agent.UpdateToolCall || u.Kind == agent.UpdateRetry) {
				// Published at once; the turn's commit closes the items.
				ev := workflow.LiveEvent{Step: r.st.Step + 1, ExecutorID: u.Source, Attempt: 1, Value: u}
				if err := h.publishLive(r, ev); err != nil {
					return err
				}
			}
			updates = append(updates, u)
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		for _, u := range updates {
			if u.Kind == agent.UpdateText {
				msgs = append(msgs, agent.Message{Role: agent.RoleAssistant, Text: u.Text})
			}
		}
		return h.commitAgentTurn(r, updates, turnErr, msgs)
	}
}

// commitAgentTurn commits a finished agent turn: its output items, usage
// (the UpdateDone usages) and the terminal event (incomplete when an
// UpdateDone gave a reason), with the new history as checkpoint.
func (h *Host) commitAgentTurn(r *run, updates []agent.Update, turnErr error, history []agent.Message) error {
	parts, err := encodeHistory(history)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.awaitLive(); err != nil { // the turn's live events come first
		return err
	}
	if r.fenced {
		return errLeaseLost
	}
	if r.cancelled.Load() {
		return errRunCancelled
	}
	in := &protocol.Step{Number: r.st.Step + 1, Status: protocol.StatusCompleted, At: time.Now()}
	var usage agent.Usage
	for _, u := range updates {
		if o, ok := output(u); ok {
			in.Outputs = append(in.Outputs, o)
		}
		if u.Kind != agent.UpdateDone {
			continue
		}
		if u.Usage != nil {
			usage.Add(*u.Usage)
		}
		if u.Reason != "" {
			// The turn's reply was cut short: its last text is incomplete.
			in.Incomplete = &protocol.Incomplete{Executor: lastTextSource(updates), Reason: u.Reason}
		}
	}
	in.Usage = protocolUsage(usage)
	if turnErr != nil {
		var hidden bool
		if in.Error, hidden = clientError(turnErr, false); hidden {
			h.log.Warn("host: agent turn failed; the response shows what failed, the cause is here", "run_id", r.id,
				"response_id", r.responseID(), "err", turnErr)
		}
		in.Status = protocol.StatusFailed
		parts = r.lastParts
	}
	c, err := protocol.ProjectStep(r.st, r.live, in)
	if err != nil {
		return err
	}
	return h.commitLocked(r, parts, c)
}

// lastTextSource returns the source of the turn's last text.
func lastTextSource(updates []agent.Update) string {
	for i := len(updates) - 1; i >= 0; i-- {
		if updates[i].Kind == agent.UpdateText {
			return updates[i].Source
		}
	}
	return ""
}

func encodeHistory(msgs []agent.Message) ([]store.Part, error) {
	if msgs == nil {
		msgs = []agent.Message{}
	}
	data, err := json.Marshal(msgs)
	if err != nil {
		return nil, fmt.Errorf("host: encode agent history: %w", err)
	}
	return []store.Part{{Name: historyPart, Data: data}}, nil
}

func decodeHistory(parts []store.Part) ([]agent.Message, error) {
	for _, p := range parts {
		if p.Name == historyPart {
			var msgs []agent.Message
			if err := json.Unmarshal(p.Data, &msgs); err != nil {
				return nil, fmt.Errorf("host: decode agent history: %w: %w", store.ErrCorrupt, err)
			}
			return msgs, nil
		}
	}
	return nil, fmt.Errorf("host: checkpoint has no %s part: %w", historyPart, store.ErrCorrupt)
}
