package host

import (
	"fmt"
	"sort"
	"time"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/workflow"
)

// Model kinds.
const (
	KindWorkflow = "workflow"
	KindAgent    = "agent"
)

// model is a registered workflow or agent.
type model struct {
	Model
	wf    *workflow.Workflow // nil for a plain agent
	agent agent.Agent        // nil for a native workflow
}

// workflowAgent is implemented by agents backed by a workflow (such as
// agent.FromWorkflow's): the host drives the workflow itself.
type workflowAgent interface {
	Workflow() *workflow.Workflow
}

func (h *Host) registerWorkflow(name string, wf *workflow.Workflow) error {
	if wf == nil {
		return fmt.Errorf("host: register %q: nil workflow", name)
	}
	return h.register(&model{Model: Model{ID: name, Kind: KindWorkflow}, wf: wf})
}

func (h *Host) registerAgent(name string, a agent.Agent) error {
	if a == nil {
		return fmt.Errorf("host: register %q: nil agent", name)
	}
	m := &model{Model: Model{ID: name, Kind: KindAgent}, agent: a}
	if wa, ok := a.(workflowAgent); ok {
		if m.wf = wa.Workflow(); m.wf == nil {
			return fmt.Errorf("host: register %q: agent returned a nil workflow", name)
		}
	}
	return h.register(m)
}

func (h *Host) register(m *model) error {
	if m.ID == "" {
		return fmt.Errorf("host: register: empty model name")
	}
	m.CreatedAt = time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.mu.models[m.ID]; ok {
		return fmt.Errorf("host: register %q: model already registered", m.ID)
	}
	h.mu.models[m.ID] = m
	return nil
}

func (h *Host) models() []Model {
	h.mu.Lock()
	out := make([]Model, 0, len(h.mu.models))
	for _, m := range h.mu.models {
		out = append(out, m.Model)
	}
	h.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// lookupModel returns the registered model called name.
func (h *Host) lookupModel(name string) (*model, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m, ok := h.mu.models[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrModelNotFound, name)
	}
	return m, nil
}
