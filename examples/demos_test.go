package examples_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/workflow"
)

// runDemo runs a demo in memory (standalone agent, no store) and returns its
// updates as text / name(arguments).
func runDemo(t *testing.T, wf *agent.WorkflowAgent, s *agent.Session, md map[string]string, in []agent.Message) ([]string, error) {
	t.Helper()
	ctx := workflow.WithInvocation(context.Background(), workflow.Invocation{ID: "resp_t", Metadata: md})
	var out []string
	for u, err := range wf.Run(ctx, s, in) {
		if err != nil {
			return out, err
		}
		if u.Kind == agent.UpdateFunctionCall {
			out = append(out, u.Name+"("+u.Arguments+")")
			continue
		}
		out = append(out, u.Text)
	}
	return out, nil
}

func TestDemos_Standalone(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "journal")
	wfs, err := examples.Workflows(&examples.Options{Journal: journal})
	if err != nil {
		t.Fatal(err)
	}
	if len(wfs) != len(examples.Names()) {
		t.Fatalf("%d workflows", len(wfs))
	}
	user := []agent.Message{{Role: agent.RoleUser, Text: "a"}, {Role: agent.RoleUser, Text: "b"}}
	for _, tc := range []struct {
		model string
		md    map[string]string
		want  []string
	}{
		{examples.Echo, nil, []string{"a\nb"}},
		{examples.TwoOutputs, nil, []string{"first-2", "second-2", "done"}},
		{examples.Silent, map[string]string{"steps": "2"}, []string{"done after 2"}},
		{examples.Silent, map[string]string{"steps": "0"}, []string{"done after 0"}},
		{examples.Approval, nil, []string{`approve({"question":"a\nb"})`}},
		{examples.Fanout, map[string]string{"workers": "2", "step_delay_ms": "1"}, []string{"worker-0,worker-1"}},
		{examples.Stream, nil, []string{"a\nb one two three", "done"}},
	} {
		got, err := runDemo(t, agent.FromWorkflow(wfs[tc.model]), nil, tc.md, user)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s %v: %q, %v; want %q", tc.model, tc.md, got, err, tc.want)
		}
	}
	data, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	// echo 1 + two-outputs 3 + silent 3 + silent 1 + approval 1 + fanout 1+2+2 + stream 2.
	if len(lines) != 16 || lines[0] != "resp_t 1 echo" || !slices.Contains(lines, "resp_t 2 worker-1") ||
		!slices.Contains(lines, "resp_t 3 join") {
		t.Fatalf("journal:\n%s", data)
	}
}

func TestApproval_Answers(t *testing.T) {
	wfs, err := examples.Workflows(nil)
	if err != nil {
		t.Fatal(err)
	}
	for answer, want := range map[string]string{"approve": "approved", "reject": "rejected", "maybe": ""} {
		a := agent.FromWorkflow(wfs[examples.Approval])
		s := agent.NewSession("s-" + answer)
		if _, err := runDemo(t, a, s, nil, []agent.Message{{Role: agent.RoleUser, Text: "go?"}}); err != nil {
			t.Fatal(err)
		}
		callID := pendingID(t, s)
		got, err := runDemo(t, a, s, nil, []agent.Message{{Role: agent.RoleTool, CallID: callID, Text: answer}})
		if want == "" {
			if err == nil || !strings.Contains(err.Error(), "approve") {
				t.Fatalf("answer %q: %q %v", answer, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, []string{want}) {
			t.Fatalf("answer %q: %q %v", answer, got, err)
		}
	}
}

// pendingID returns the id of the session run's single pending request.
func pendingID(t *testing.T, s *agent.Session) string {
	t.Helper()
	run, ok := s.State().(*workflow.Run)
	if !ok || len(run.Pending()) != 1 {
		t.Fatalf("session state %T", s.State())
	}
	return run.Pending()[0].ID
}

func TestSilent_CappedAtLimit(t *testing.T) {
	wfs, err := examples.Workflows(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The limit reaches the executors from RunOptions, the metadata from ctx.
	ctx := workflow.WithInvocation(context.Background(), workflow.Invocation{ID: "resp_t",
		Metadata: map[string]string{"steps": "50"}})
	var got []string
	for u, err := range agent.FromWorkflow(wfs[examples.Silent], agent.WithRunOptions(&workflow.RunOptions{MaxSupersteps: 10})).Run(ctx, nil,
		[]agent.Message{{Role: agent.RoleUser, Text: "x"}}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, u.Text)
	}
	if !slices.Equal(got, []string{"done after 9"}) {
		t.Fatalf("outputs %q", got)
	}
}
