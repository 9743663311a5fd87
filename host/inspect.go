package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/workflow"
)

// ErrInspectUnsupported is returned by the inspection reads when the store
// does not implement store.RunInspector.
var ErrInspectUnsupported = errors.New("host: the store cannot list runs for inspection")

// runNotFound is the error for an unknown or invisible run.
func runNotFound(id string) error {
	return fmt.Errorf("%w: run with id '%s' not found", store.ErrNotFound, id)
}

func (h *Host) inspector() (store.RunInspector, error) {
	ri, ok := h.store.(store.RunInspector)
	if !ok {
		return nil, ErrInspectUnsupported
	}
	return ri, nil
}

// Runs lists runs for inspection (see store.RunQueryParams; the caller
// sets Owner to the requester's identity).
func (h *Host) Runs(ctx context.Context, p *store.RunQueryParams) ([]*store.RunInfo, error) {
	ri, err := h.inspector()
	if err != nil {
		return nil, err
	}
	runs, err := ri.RunQuery(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("host: list runs: %w", err)
	}
	return runs, nil
}

// Run returns run id as owner sees it: another owner's run is not found.
func (h *Host) Run(ctx context.Context, id, owner string) (*store.RunInfo, error) {
	ri, err := h.inspector()
	if err != nil {
		return nil, err
	}
	info, err := ri.RunInfo(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && info.Owner != owner {
		return nil, runNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("host: run %s: %w", id, err)
	}
	return info, nil
}

// RunDetail is one run with everything an inspection shows of it.
type RunDetail struct {
	Info      *store.RunInfo
	Responses []*store.Response
	// Supersteps are the run's committed steps, oldest first (those after
	// the fork point, for a fork).
	Supersteps []Superstep
	// Pending are the requests the run's last checkpoint waits on.
	Pending []PendingRequest
	// Graph is the workflow's shape; nil when the model is not registered
	// on this host.
	Graph *workflow.Graph
	// Claims are the claims of the run's lease, oldest first: its owners
	// and takeovers.
	Claims []store.LeaseClaimRecord
}

// Superstep is what is known of one committed step. It is derived from
// what the store keeps: the step's checkpoint (its time, while retention
// keeps it), the event records its commit wrote, and the header of the
// checkpoint before it (its queued executors ran in this step), and the
// lease claims (the epoch, and its owner, claimed last before the step:
// commits are fenced by epoch).
type Superstep struct {
	Step       int64
	ResponseID string
	// CommittedAt is the creation time of the step's checkpoint; nil when
	// retention removed it.
	CommittedAt *time.Time
	// FirstSeq and LastSeq bound the events its commit wrote to
	// ResponseID's log; -1 when it wrote none (a silent step, or events
	// published live before the commit).
	FirstSeq, LastSeq int64
	// Executors ran in the step, from the previous checkpoint's queues;
	// empty when that checkpoint is not kept.
	Executors []string
	// Epoch and Host are the lease the step was committed under; 0 and ""
	// when no claim is recorded (a run from before the store kept them).
	Epoch int64
	Host  string
}

// PendingRequest is a request of the workflow waiting for an answer, as
// the Responses API shows it: a function call.
type PendingRequest struct {
	CallID, Name, Arguments string
}

// executorStepsMax bounds the steps whose executors are derived (a
// checkpoint read each); older steps show none.
const executorStepsMax = 200

// RunDetail returns run id with its responses, supersteps, pending
// requests and workflow graph, as owner sees it.
func (h *Host) RunDetail(ctx context.Context, id, owner string) (*RunDetail, error) {
	info, err := h.Run(ctx, id, owner)
	if err != nil {
		return nil, err
	}
	d := &RunDetail{Info: info, Supersteps: []Superstep{}, Pending: []PendingRequest{}}
	if d.Responses, err = h.store.ResponseListByRun(ctx, id); err != nil {
		return nil, fmt.Errorf("host: responses of run %s: %w", id, err)
	}
	cps, err := h.store.CheckpointList(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("host: checkpoints of run %s: %w", id, err)
	}
	kept := make(map[int64]store.CheckpointInfo, len(cps))
	for _, c := range cps {
		kept[c.Step] = c
	}
	m, _ := h.lookupModel(info.Model)
	if m != nil {
		g := m.wf.Graph()
		d.Graph = &g
	}
	ri, _ := h.inspector()
	if d.Claims, err = ri.RunClaims(ctx, id); err != nil {
		return nil, fmt.Errorf("host: lease claims of run %s: %w", id, err)
	}
	if err := h.addSupersteps(ctx, d, kept); err != nil {
		return nil, err
	}
	if err := h.addPending(ctx, d, m); err != nil {
		return nil, err
	}
	return d, nil
}

// addSupersteps fills d.Supersteps from the responses' step ranges, their
// event records and the kept checkpoints.
func (h *Host) addSupersteps(ctx context.Context, d *RunDetail, kept map[int64]store.CheckpointInfo) error {
	type span struct{ first, last int64 }
	events := map[int64]span{}
	lister, _ := h.store.(store.EventRecordLister)
	for _, r := range d.Responses {
		if lister == nil {
			break
		}
		recs, err := lister.EventRecords(ctx, r.ID)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return fmt.Errorf("host: event records of response %s: %w", r.ID, err)
		}
		for _, rec := range recs {
			if rec.Step <= r.StartStep || rec.Step > r.CommitStep {
				continue // the create's record (step StartStep), or a live append
			}
			s, ok := events[rec.Step]
			if !ok {
				s = span{rec.FirstSeq, rec.LastSeq}
			}
			s.first, s.last = min(s.first, rec.FirstSeq), max(s.last, rec.LastSeq)
			events[rec.Step] = s
		}
	}
	last := d.Info.LastStep
	for _, r := range d.Responses {
		for step := r.StartStep + 1; step <= r.CommitStep && step <= last; step++ {
			ss := Superstep{Step: step, ResponseID: r.ID, FirstSeq: -1, LastSeq: -1, Executors: []string{}}
			for _, c := range d.Claims { // by epoch: the last claimed before step wins
				if c.LastStep < step {
					ss.Epoch, ss.Host = c.Epoch, c.Owner
				}
			}
			if c, ok := kept[step]; ok {
				t := c.CreatedAt
				ss.CommittedAt = &t
			}
			if s, ok := events[step]; ok {
				ss.FirstSeq, ss.LastSeq = s.first, s.last
			}
			if _, ok := kept[step-1]; ok && last-step < executorStepsMax {
				cp, err := h.store.CheckpointGet(ctx, d.Info.ID, step-1)
				if err == nil {
					if parts, err := toWorkflowParts(cp.Parts); err == nil {
						if sum, err := workflow.SummarizeCheckpoint(parts); err == nil {
							ss.Executors = sum.Queued
						}
					}
				} else if !errors.Is(err, store.ErrNotFound) { // pruned meanwhile: none
					return fmt.Errorf("host: checkpoint %d of run %s: %w", step-1, d.Info.ID, err)
				}
			}
			d.Supersteps = append(d.Supersteps, ss)
		}
	}
	return nil
}

// addPending fills d.Pending from the run's last checkpoint: with the
// model registered here, the calls as a response shows them; without it,
// the ids and requesters the header names.
func (h *Host) addPending(ctx context.Context, d *RunDetail, m *model) error {
	cp, err := h.store.CheckpointGetLast(ctx, d.Info.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("host: last checkpoint of run %s: %w", d.Info.ID, err)
	}
	parts, err := toWorkflowParts(cp.Parts)
	if err != nil {
		return fmt.Errorf("host: last checkpoint of run %s: %w", d.Info.ID, err)
	}
	if m != nil {
		if wr, err := m.wf.Restore(d.Info.ID, parts); err == nil {
			for _, req := range wr.Pending() {
				u := agent.RequestUpdate(req)
				d.Pending = append(d.Pending, PendingRequest{CallID: u.CallID, Name: u.Name, Arguments: u.Arguments})
			}
			return nil
		}
	}
	sum, err := workflow.SummarizeCheckpoint(parts)
	if err != nil {
		return nil // unreadable here: nothing to show
	}
	for _, p := range sum.Pending {
		d.Pending = append(d.Pending, PendingRequest{CallID: p.ID, Name: p.Executor})
	}
	return nil
}

// CheckpointView is one checkpoint of a run's history with its parts'
// sizes and which of them changed since the parent checkpoint.
type CheckpointView struct {
	store.CheckpointInfo
	Parts []CheckpointPart
}

// CheckpointPart is one part of a CheckpointView.
type CheckpointPart struct {
	Name string
	Size int64
	// Changed: the part's bytes differ from the parent checkpoint's part
	// of that name (true when the parent is not kept or had none).
	Changed bool
	// Data is the part's bytes (RunCheckpoints with data only).
	Data []byte
}

// RunCheckpoints returns run id's checkpoint history, oldest first, as
// owner sees it; with data, each part carries its bytes.
func (h *Host) RunCheckpoints(ctx context.Context, id, owner string, data bool) ([]CheckpointView, error) {
	if _, err := h.Run(ctx, id, owner); err != nil {
		return nil, err
	}
	infos, err := h.store.CheckpointList(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("host: checkpoints of run %s: %w", id, err)
	}
	out := make([]CheckpointView, 0, len(infos))
	var prevStep int64 = -1
	var prev []workflow.Part // the parts of checkpoint prevStep, chunks joined
	for _, ci := range infos {
		cp, err := h.store.CheckpointGet(ctx, id, ci.Step)
		if errors.Is(err, store.ErrNotFound) {
			continue // pruned meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("host: checkpoint %d of run %s: %w", ci.Step, id, err)
		}
		parts, err := toWorkflowParts(cp.Parts)
		if err != nil {
			return nil, fmt.Errorf("host: checkpoint %d of run %s: %w", ci.Step, id, err)
		}
		var parent map[string][]byte
		if prev != nil && prevStep == ci.ParentStep {
			parent = make(map[string][]byte, len(prev))
			for _, p := range prev {
				parent[p.Name] = p.Data
			}
		}
		v := CheckpointView{CheckpointInfo: ci, Parts: make([]CheckpointPart, 0, len(parts))}
		for _, p := range parts {
			old, ok := parent[p.Name]
			cp := CheckpointPart{Name: p.Name, Size: int64(len(p.Data)), Changed: !ok || !bytes.Equal(old, p.Data)}
			if data {
				cp.Data = p.Data
			}
			v.Parts = append(v.Parts, cp)
		}
		out = append(out, v)
		prevStep, prev = cp.Step, parts
	}
	return out, nil
}

// EventPage returns up to limit events of response id after sequence
// number after, as owner sees it, and whether more are logged now. Unlike
// Events it does not wait, so it reads any response's log, streamed or
// not.
func (h *Host) EventPage(ctx context.Context, id, owner string, after int64, limit int) ([]store.Event, bool, error) {
	if _, err := h.get(ctx, id, owner); err != nil {
		return nil, false, err
	}
	evs, err := h.store.EventList(ctx, &store.EventListParams{ResponseID: id, After: max(after, -1), Limit: limit + 1,
		MaxBytes: eventPageBytes})
	if err != nil {
		return nil, false, fmt.Errorf("host: events of response %s: %w", id, err)
	}
	more := len(evs) > limit
	if more {
		evs = evs[:limit]
	}
	if len(evs) > 0 && !more {
		// A page cut by MaxBytes is shorter than limit but not the end.
		r, err := h.store.ResponseGet(ctx, id)
		if err != nil {
			return nil, false, fmt.Errorf("host: events of response %s: %w", id, err)
		}
		more = evs[len(evs)-1].Seq < r.NextSeq-1
	}
	return evs, more, nil
}
