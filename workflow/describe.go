package workflow

import (
	"encoding/json"
	"fmt"
)

// Graph is a read-only description of a workflow's shape, for inspection
// tools: its executors in the order they were added and its edges, one per
// (source, target) pair of each edge group.
type Graph struct {
	Start     string
	Executors []GraphExecutor
	Edges     []GraphEdge
}

// GraphExecutor is one executor of a Graph.
type GraphExecutor struct {
	ID string
	// Output and Intermediate say what its yielded values are.
	Output       bool
	Intermediate bool
}

// GraphEdge is one source-target pair of an edge group.
type GraphEdge struct {
	From, To string
	// Kind is "direct", "fan-out", "switch" or "fan-in".
	Kind string
}

// Graph returns the description of w's shape.
func (w *Workflow) Graph() Graph {
	g := Graph{Start: w.start, Executors: make([]GraphExecutor, 0, len(w.order)), Edges: []GraphEdge{}}
	for _, id := range w.order {
		g.Executors = append(g.Executors, GraphExecutor{ID: id, Output: w.yields[id] == yieldOutput,
			Intermediate: w.yields[id] == yieldIntermediate})
	}
	for _, e := range w.edges {
		to := e.to
		if e.def != "" {
			to = append(append([]string(nil), to...), e.def)
		}
		for _, f := range e.from {
			for _, t := range to {
				g.Edges = append(g.Edges, GraphEdge{From: f, To: t, Kind: e.kind.String()})
			}
		}
	}
	return g
}

// CheckpointSummary is what a checkpoint's header says, read without
// restoring the run (no workflow needed).
type CheckpointSummary struct {
	Step   int64
	Status RunStatus
	// Queued are the executors with messages waiting: those the next
	// superstep runs (fan-in buffers not yet complete are not counted).
	Queued []string
	// Pending are the ids and requesters of the pending requests.
	Pending []PendingSummary
}

// PendingSummary names one pending request of a checkpoint.
type PendingSummary struct {
	ID       string
	Executor string
}

// SummarizeCheckpoint reads the header part of parts (made by Checkpoint
// or given to a CommitFunc). It checks nothing against a workflow; a
// missing or unreadable header wraps ErrCheckpoint.
func SummarizeCheckpoint(parts []Part) (*CheckpointSummary, error) {
	var data []byte
	for _, p := range parts {
		if p.Name == partHeader {
			data = p.Data
		}
	}
	if data == nil {
		return nil, fmt.Errorf("%w: no header part", ErrCheckpoint)
	}
	var h header
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrCheckpoint, err)
	}
	s := &CheckpointSummary{Step: h.Step, Status: h.Status, Queued: []string{}, Pending: []PendingSummary{}}
	for _, q := range h.Queues {
		if len(q.Messages) > 0 {
			s.Queued = append(s.Queued, q.Target)
		}
	}
	for _, p := range h.Pending {
		s.Pending = append(s.Pending, PendingSummary{ID: p.ID, Executor: p.ExecutorID})
	}
	return s, nil
}
