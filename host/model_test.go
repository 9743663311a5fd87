package host_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
)

// A model registered with WithPublication(PublicationLive) streams live
// when the request names no mode, and metadata.publication overrides it.
func TestHost_ModelDefaultPublication(t *testing.T) {
	t.Parallel()
	wfs, err := examples.Workflows(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, &setupOpts{noReg: true})
	if err := b.host.RegisterWorkflow("live-stream", wfs[examples.Stream], host.WithPublication(host.PublicationLive)); err != nil {
		t.Fatal(err)
	}
	// A workflow-backed agent is hosted one way only: as its workflow.
	if err := b.host.RegisterAgent("agent:live-stream", agent.FromWorkflow(wfs[examples.Stream])); err == nil {
		t.Fatal("RegisterAgent of a workflow-backed agent succeeded")
	}
	for _, model := range []string{"live-stream"} {
		byDefault := create(t, b.host, model, "x", nil)
		overridden := create(t, b.host, model, "x", map[string]string{"publication": "committed"})
		wait(t, b.host, byDefault.ID)
		wait(t, b.host, overridden.ID)
		if got := deltas(collect(t, b.host, byDefault.ID, -1)); !slices.Equal(got, []string{"x ", "one ", "two ", "three", "done"}) {
			t.Errorf("%s: default (live) deltas %q", model, got)
		}
		if got := deltas(collect(t, b.host, overridden.ID, -1)); !slices.Equal(got, []string{"x one two three", "done"}) {
			t.Errorf("%s: committed deltas %q", model, got)
		}
	}
}

func TestHost_ModelBadPublication(t *testing.T) {
	t.Parallel()
	wfs, err := examples.Workflows(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, &setupOpts{noReg: true})
	err = b.host.RegisterWorkflow("m", wfs[examples.Stream], host.WithPublication("sometimes"))
	if err == nil || !strings.Contains(err.Error(), "sometimes") {
		t.Fatalf("RegisterWorkflow with a bad mode: %v", err)
	}
	if slices.ContainsFunc(b.host.Models(), func(m host.Model) bool { return m.ID == "m" }) {
		t.Fatal("a model with a bad option was registered")
	}
}
