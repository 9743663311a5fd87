package examples_test

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/workflow"
)

// The checkpoints under testdata/checkpoints were made by the API of
// December 2026 before the checkpoint type names became explicit
// (SUPERSTEP_WRITE_CHECKPOINTS=1 go test -run TestCompat_Write ./examples
// at that commit). Stored runs of that release must still restore: the
// tests below restore each one with today's workflows and finish the run.

// compatInvocation is the invocation the checkpoints were made under.
var compatInvocation = workflow.Invocation{ID: "resp_compat", Metadata: map[string]string{"workers": "3", "steps": "3"}}

// echoAgent replies "echo: " + the last message's text.
func echoAgent() agent.Agent {
	return agent.AgentFunc(func(ctx context.Context, s *agent.Session, in []agent.Message) iter.Seq2[agent.Update, error] {
		return func(yield func(agent.Update, error) bool) {
			yield(agent.Update{Kind: agent.UpdateText, Text: "echo: " + in[len(in)-1].Text}, nil)
		}
	})
}

// compatAgentWorkflow is a plain agent hosted as a conversation (as the
// host does for RegisterAgent).
func compatAgentWorkflow(t *testing.T) *workflow.Workflow {
	t.Helper()
	agentEx := agent.Executor("agent", echoAgent(), agent.WithMemory())
	wf, err := workflow.NewBuilder("compat.agent").SetStart(agentEx).Outputs(agentEx).Build()
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// compatRun runs r until it stops, collecting its outputs.
func compatRun(t *testing.T, r *workflow.Run, maxSteps int64) []any {
	t.Helper()
	var out []any
	commit := func(_ context.Context, s *workflow.Step) error {
		for _, ev := range s.Events {
			if o, ok := ev.(workflow.Output); ok {
				out = append(out, o.Value)
			}
		}
		if maxSteps > 0 && s.Number > maxSteps {
			return errStop
		}
		return nil
	}
	if err := r.Run(context.Background(), commit, &workflow.RunOptions{Invocation: &compatInvocation}); err != nil && !errors.Is(err, errStop) {
		t.Fatal(err)
	}
	return out
}

// errStop stops a run after a given superstep (not committed).
var errStop = errors.New("stop")

func TestCompat_Write(t *testing.T) {
	if os.Getenv("SUPERSTEP_WRITE_CHECKPOINTS") == "" {
		t.Skip("set SUPERSTEP_WRITE_CHECKPOINTS=1 to rewrite testdata/checkpoints")
	}
	wfs, err := examples.Workflows(&examples.Options{Journal: filepath.Join(t.TempDir(), "j")})
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, r *workflow.Run) {
		parts, err := r.Checkpoint()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", "checkpoints", name), workflow.JoinParts(parts), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// demo.approval: the request pending, and answered but not yet handled.
	r, err := wfs[examples.Approval].NewRun("run_approval", "ship it?")
	if err != nil {
		t.Fatal(err)
	}
	compatRun(t, r, 0)
	write("approval-pending.bin", r)
	if err := r.Respond(r.Pending()[0].ID, examples.Approve); err != nil {
		t.Fatal(err)
	}
	write("approval-answered.bin", r)
	// demo.fanout after superstep 2: the workers' results queued for the join.
	r, err = wfs[examples.Fanout].NewRun("run_fanout", "go")
	if err != nil {
		t.Fatal(err)
	}
	compatRun(t, r, 2)
	write("fanout-step2.bin", r)
	// demo.silent after superstep 2: a tick queued.
	r, err = wfs[examples.Silent].NewRun("run_silent", "go")
	if err != nil {
		t.Fatal(err)
	}
	compatRun(t, r, 2)
	write("silent-step2.bin", r)
	// A plain agent's conversation after one turn: its memory in state.
	r, err = compatAgentWorkflow(t).NewRun("run_agent", []agent.Message{{Role: agent.RoleUser, Text: "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	compatRun(t, r, 0)
	write("agent-turn1.bin", r)
	// A message type named only by the executors (its package path).
	r, err = compatAutoWorkflow(t).NewRun("run_auto", "x")
	if err != nil {
		t.Fatal(err)
	}
	compatRun(t, r, 1)
	write("auto-step1.bin", r)
}

// compatMsg was registered by no one: the API of 2026-12-04 named it after
// its package path. Registered now, that name still decodes.
type compatMsg struct{ N int }

func init() { workflow.RegisterType[compatMsg]("examples_test.compatMsg") }

// compatAutoWorkflow: start sends compatMsg{len(input)}; double yields 2*N.
func compatAutoWorkflow(t *testing.T) *workflow.Workflow {
	t.Helper()
	start := workflow.Map("start", func(c *workflow.Context, in string) (compatMsg, error) {
		return compatMsg{N: len(in)}, nil
	})
	double := workflow.Func("double", func(c *workflow.Context, m compatMsg) error {
		return c.Yield(2 * m.N)
	})
	wf, err := workflow.NewBuilder("compat.auto").SetStart(start).AddEdge(start, double).Outputs(double).Build()
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// A request stored before Decision existed wants a string answer: the
// approval still takes it (the pending checkpoint, its response type
// edited to what it was then).
func TestCompat_ApprovalStringAnswer(t *testing.T) {
	wfs, err := examples.Workflows(&examples.Options{Journal: filepath.Join(t.TempDir(), "j")})
	if err != nil {
		t.Fatal(err)
	}
	blob, err := os.ReadFile(filepath.Join("testdata", "checkpoints", "approval-pending.bin"))
	if err != nil {
		t.Fatal(err)
	}
	parts, err := workflow.SplitParts(blob)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range parts {
		if p.Name == "header" {
			parts[i].Data = bytes.Replace(p.Data, []byte(`"response_type":"examples.Decision"`), []byte(`"response_type":"string"`), 1)
		}
	}
	for _, tc := range []struct{ answer, want string }{{"approve", "approved"}, {"reject", "rejected"}, {"maybe", ""}} {
		r, err := wfs[examples.Approval].Restore("run_compat", parts)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Respond(r.Pending()[0].ID, tc.answer); err != nil {
			t.Fatalf("%s: %v", tc.answer, err)
		}
		var got []any
		err = r.Run(context.Background(), func(_ context.Context, s *workflow.Step) error {
			for _, ev := range s.Events {
				if o, ok := ev.(workflow.Output); ok {
					got = append(got, o.Value)
				}
			}
			return nil
		}, &workflow.RunOptions{Invocation: &compatInvocation})
		switch {
		case tc.want == "" && !errors.Is(err, workflow.ErrExecutorFailed):
			t.Errorf("%s: %v, %v; want the run to fail", tc.answer, got, err)
		case tc.want != "" && (err != nil || !reflect.DeepEqual(got, []any{tc.want})):
			t.Errorf("%s: %v, %v; want %s", tc.answer, got, err, tc.want)
		}
	}
}

func TestCompat_Restore(t *testing.T) {
	wfs, err := examples.Workflows(&examples.Options{Journal: filepath.Join(t.TempDir(), "j")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file string
		wf   *workflow.Workflow
		// next prepares the restored run for its next turn.
		next func(*workflow.Run) error
		want []any
	}{
		{"approval-pending.bin", wfs[examples.Approval], func(r *workflow.Run) error {
			return r.Respond(r.Pending()[0].ID, examples.Approve)
		}, []any{"approved"}},
		{"approval-answered.bin", wfs[examples.Approval], nil, []any{"approved"}},
		{"fanout-step2.bin", wfs[examples.Fanout], nil, []any{"worker-0,worker-1,worker-2"}},
		{"silent-step2.bin", wfs[examples.Silent], nil, []any{"done after 3"}},
		{"agent-turn1.bin", compatAgentWorkflow(t), func(r *workflow.Run) error {
			return r.Send([]agent.Message{{Role: agent.RoleUser, Text: "again"}})
		}, []any{"echo: again"}},
		{"auto-step1.bin", compatAutoWorkflow(t), nil, []any{2}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			blob, err := os.ReadFile(filepath.Join("testdata", "checkpoints", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			parts, err := workflow.SplitParts(blob)
			if err != nil {
				t.Fatal(err)
			}
			r, err := tc.wf.Restore("run_compat", parts)
			if err != nil {
				t.Fatalf("restore: %v", err)
			}
			if tc.next != nil {
				if err := tc.next(r); err != nil {
					t.Fatal(err)
				}
			}
			got := compatRun(t, r, 0)
			if r.Status() != workflow.Completed || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("outputs %#v, status %s; want %#v, completed", got, r.Status(), tc.want)
			}
		})
	}
}
