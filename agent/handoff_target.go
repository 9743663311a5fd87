package agent

// HandoffTarget is an agent a ChatAgent may hand the conversation to: the
// model sees a tool "handoff_to_<ID>" and calling it ends the turn with an
// UpdateHandoff naming ID.
type HandoffTarget struct {
	// ID is the target's executor id in the handoff workflow.
	ID string
	// Description says when to hand off to it.
	Description string
}

// handoffPrefix prefixes the names of handoff tools.
const handoffPrefix = "handoff_to_"

// tool is the function the model calls to hand off to h.
func (h HandoffTarget) tool() toolDef {
	desc := h.Description
	if desc == "" {
		desc = "Hand the conversation to " + h.ID + "."
	}
	return toolDef{Name: handoffPrefix + h.ID, Description: desc, Parameters: map[string]any{
		"type": "object", "properties": map[string]any{}, "required": []string{}, "additionalProperties": false,
	}}
}

// handoffCalled returns the target of the first handoff call among calls.
func handoffCalled(calls []toolCall, targets []HandoffTarget) string {
	for _, c := range calls {
		for _, t := range targets {
			if c.Name == handoffPrefix+t.ID {
				return t.ID
			}
		}
	}
	return ""
}
