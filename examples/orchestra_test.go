package examples_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/examples"
)

// TestOrchestra runs demo.orchestra's four agents on the local model: each
// calls its own calculate tool as many times as its tool_calls says, and
// the one output joins their replies in participant order.
func TestOrchestra(t *testing.T) {
	m := newModelServer(t)
	journal := filepath.Join(t.TempDir(), "journal")
	wf, err := examples.OrchestraWorkflow(m.options("", journal))
	if err != nil {
		t.Fatal(err)
	}
	md := map[string]string{"token_delay_ms": "0", "tool_calls": "2", "critic.tool_calls": "1"}
	got, err := runLLM(t, agent.FromWorkflow(wf), nil, md, []agent.Message{{Role: agent.RoleUser, Text: `calculate {"a":9,"op":"-","b":2.5}`}})
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, id := range examples.OrchestraIDs {
		parts = append(parts, id+": Tool calculate returned: 6.5")
	}
	if want := strings.Join(parts, "\n\n"); len(got) == 0 || got[len(got)-1] != want {
		t.Fatalf("outputs %q, want the last %q", got, want)
	}
	// One journal line per tool call, the agent's executor id at the end
	// of its idempotency key: two calls of each agent but the critic's one.
	var lines []string
	for _, l := range readJournal(t, journal) {
		f := strings.Fields(l)
		if len(f) != 5 || f[2] != "tool:calculate" {
			t.Fatalf("journal line %q, want a tool line", l)
		}
		lines = append(lines, f[3][strings.LastIndexByte(f[3], ':')+1:]+" "+f[4])
	}
	slices.Sort(lines)
	want := []string{"analyst call_1", "analyst call_2", "critic call_1", "planner call_1", "planner call_2", "scribe call_1", "scribe call_2"}
	if !slices.Equal(lines, want) {
		t.Fatalf("tool calls journaled %q, want %q", lines, want)
	}
}
