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
	wf *workflow.Workflow
	// conversation: the workflow hosts a plain agent (one executor with
	// agent.WithMemory), so a completed response is continued by sending
	// the new input to its run, not by answering pending requests.
	conversation bool
	// publication is the mode of requests that name none in their
	// metadata ("" means PublicationCommitted).
	publication string
	// params, for a plain agent that honours the request's model settings
	// (agent.ParamsChecker), checks them; nil: the model takes none.
	params agent.ParamsChecker
}

// ModelOption configures a model at registration.
type ModelOption func(*model) error

// WithPublication sets the publication mode (PublicationLive or
// PublicationCommitted) of the model's requests whose metadata names none;
// metadata.publication still overrides it per request. Every host sharing a
// store must register the model with the same mode, since a run recovered
// elsewhere takes the recovering host's default.
func WithPublication(mode string) ModelOption {
	return func(m *model) error {
		if mode != PublicationLive && mode != PublicationCommitted {
			return fmt.Errorf("publication mode must be %q or %q, got %q", PublicationLive, PublicationCommitted, mode)
		}
		m.publication = mode
		return nil
	}
}

func (h *Host) registerWorkflow(name string, wf *workflow.Workflow, opts []ModelOption) error {
	if wf == nil {
		return fmt.Errorf("host: register %q: nil workflow", name)
	}
	return h.register(&model{Model: Model{ID: name, Kind: KindWorkflow}, wf: wf}, opts)
}

func (h *Host) registerAgent(name string, a agent.Agent, opts []ModelOption) error {
	if a == nil {
		return fmt.Errorf("host: register %q: nil agent", name)
	}
	m := &model{Model: Model{ID: name, Kind: KindAgent}}
	if _, ok := a.(*agent.WorkflowAgent); ok {
		// Hosting it as an agent would run its workflow in memory, inside
		// one durable step: its supersteps would not be durable.
		return fmt.Errorf("host: register %q: a workflow-backed agent is hosted as its workflow (RegisterWorkflow)", name)
	}
	wf, err := conversationWorkflow(name, a)
	if err != nil {
		return fmt.Errorf("host: register %q: %w", name, err)
	}
	m.wf, m.conversation = wf, true
	m.params, _ = a.(agent.ParamsChecker)
	return h.register(m, opts)
}

func (h *Host) register(m *model, opts []ModelOption) error {
	if m.ID == "" {
		return fmt.Errorf("host: register: empty model name")
	}
	for _, o := range opts {
		if err := o(m); err != nil {
			return fmt.Errorf("host: register %q: %w", m.ID, err)
		}
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

// conversationExecutor is the id of the one executor of a plain agent's
// workflow.
const conversationExecutor = "agent"

// conversationWorkflow hosts a plain agent as a one-executor workflow: each
// turn is one superstep of the executor, which keeps the conversation in
// the run's state (agent.WithMemory). There is one run path: a plain agent
// is committed, recovered, published live and cancelled as any workflow.
func conversationWorkflow(name string, a agent.Agent) (*workflow.Workflow, error) {
	ex := agent.Executor(conversationExecutor, a, agent.WithMemory())
	return workflow.NewBuilder(name).SetStart(ex).Outputs(ex).Build()
}
