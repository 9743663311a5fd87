package host

import (
	"testing"

	"github.com/superstep/superstep/protocol"
)

// The request's settings reach the agent's: max_tool_calls (capped to an
// int32), reasoning.effort, service_tier, the identifiers and the
// penalties as sent.
func TestToAgentParams_ToolCapAndReasoning(t *testing.T) {
	mp, err := protocol.ReadModelParams([]byte(`{"model":"m","max_tool_calls":99999999999,"reasoning":{"effort":"minimal"},
		"service_tier":"priority","user":"u","safety_identifier":"s","prompt_cache_key":"k","prompt_cache_retention":"in-memory","presence_penalty":0.5}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := toAgentParams(mp)
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxToolCalls == nil || *p.MaxToolCalls != 1<<31-1 || p.ReasoningEffort != "minimal" ||
		p.ServiceTier != "priority" || p.User != "u" || p.SafetyIdentifier != "s" || p.PromptCacheKey != "k" || p.PromptCacheRetention != "in-memory" ||
		p.PresencePenalty == nil || *p.PresencePenalty != 0.5 || p.FrequencyPenalty != nil {
		t.Fatalf("max tool calls %v, reasoning effort %q", p.MaxToolCalls, p.ReasoningEffort)
	}
	mp, err = protocol.ReadModelParams([]byte(`{"model":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	if p, err = toAgentParams(mp); err != nil || p.MaxToolCalls != nil || p.ReasoningEffort != "" || p.ServiceTier != "" || p.User != "" {
		t.Fatalf("no settings gave %+v, %v", p, err)
	}
}
