package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/superstep/superstep/store"
)

// ForkParams are the arguments of Fork.
type ForkParams struct {
	RunID string
	// Step is the checkpoint to start from; it must be kept.
	Step  int64
	Owner string
	// Input, when not empty, is delivered to the restored state as a
	// continuation's would be: the answers to its pending requests, or a
	// new turn's input.
	Input      []InputItem
	Stream     bool
	Background bool
	Metadata   map[string]string
}

// Fork starts a new run, and its first response, from the checkpoint of
// p.Step of run p.RunID, which is left untouched. The new run is numbered
// on from p.Step (its first commit is step p.Step+1) and records where it
// came from (store.RunInfo.ForkedFrom). Its first checkpoint is the state
// it starts from, with p.Input delivered: recovery, on any host, resumes
// from it without re-delivering anything. A step that is not kept is an
// *InputError with Param "step" and Code "checkpoint_not_found"; an
// unknown or foreign run is not found.
func (h *Host) Fork(ctx context.Context, p *ForkParams) (*store.Response, error) {
	if err := h.acceptNew(); err != nil {
		return nil, err
	}
	info, err := h.Run(ctx, p.RunID, p.Owner)
	if err != nil {
		return nil, err
	}
	m, err := h.lookupModel(info.Model)
	if err != nil {
		return nil, err
	}
	cp, err := h.store.CheckpointGet(ctx, p.RunID, p.Step)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &InputError{Param: "step", Code: "checkpoint_not_found", Message: fmt.Sprintf(
			"run %s has no checkpoint of step %d (it does not exist, or retention removed it)", p.RunID, p.Step)}
	}
	if err != nil {
		return nil, fmt.Errorf("host: fork run %s: checkpoint %d: %w", p.RunID, p.Step, err)
	}
	mode, err := publicationMode(p.Metadata, m.publication)
	if err != nil {
		return nil, err
	}
	cp2, err := withStoredRequest(&CreateParams{Model: m.ID, Owner: p.Owner, Input: p.Input, Metadata: p.Metadata,
		Stream: p.Stream, Background: p.Background, Store: true})
	if err != nil {
		return nil, err
	}
	if cp2.params, err = modelParams(m, cp2.Request); err != nil {
		return nil, err
	}
	cp2.publication = mode
	if cp2.Input, err = h.resolveReferences(ctx, p.Owner, cp2.Input); err != nil {
		return nil, err
	}
	runID := newID("run_")
	wparts, err := toWorkflowParts(cp.Parts)
	if err != nil {
		return nil, fmt.Errorf("host: fork run %s: step %d: %w", p.RunID, p.Step, err)
	}
	wr, err := m.wf.Restore(runID, wparts)
	if err != nil {
		return nil, fmt.Errorf("host: fork run %s: restore step %d: %w", p.RunID, p.Step, err)
	}
	parts := cp.Parts // unchanged: the same bytes as the original's
	if len(cp2.Input) > 0 {
		if err := h.deliverInput(ctx, m, info.HeadResponseID, runID, wr, cp2.Input); err != nil {
			return nil, err
		}
		wparts, err := wr.Checkpoint()
		if err != nil {
			return nil, fmt.Errorf("host: fork run %s: checkpoint with the input: %w", p.RunID, err)
		}
		parts = toStoreParts(wparts)
	}
	sp := &startSpec{runID: runID, checkpoint: parts, lastStep: cp.Step, lastParts: parts,
		fork:  &store.ForkPoint{RunID: p.RunID, Step: cp.Step},
		drive: func(r *run) func(context.Context) error { return h.driveWorkflow(r, wr) }}
	h.metrics.branches.Inc()
	return h.createAndStart(ctx, m, cp2, sp)
}
