package workflow_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/superstep/superstep/workflow"
)

func TestBuilder_Build_Errors(t *testing.T) {
	str := func(id string) workflow.Executor { return pass[string](id) }
	tests := []struct {
		name  string
		build func() *workflow.Builder
		want  []string // every fragment must be in the joined error
	}{
		{"no start", func() *workflow.Builder { return workflow.NewBuilder("t").AddExecutor(str("a")) },
			[]string{"no start executor"}},
		{"duplicate id", func() *workflow.Builder {
			a := str("a")
			return workflow.NewBuilder("t").SetStart(a).AddEdge(a, str("b")).AddEdge(a, str("b"))
		}, []string{`executor "b": duplicate id`}},
		{"dangling and nil output and intermediate", func() *workflow.Builder {
			return workflow.NewBuilder("t").SetStart(str("a")).Outputs(str("ghost"), nil).Intermediate(str("phantom"))
		}, []string{`executor "ghost": unreachable`, `executor "phantom": unreachable`, "Outputs 1: nil executor"}},
		{"unreachable", func() *workflow.Builder {
			a, b, c := str("a"), str("b"), str("c")
			return workflow.NewBuilder("t").SetStart(a).AddEdge(b, c)
		}, []string{`executor "b": unreachable`, `executor "c": unreachable`}},
		{"nil executors", func() *workflow.Builder {
			a := str("a")
			return workflow.NewBuilder("t").SetStart(a).AddEdge(a, nil).AddFanOut(nil, nil)
		}, []string{"edge#1 target: nil executor", "fanout#2 source: nil executor", "fanout#2: no targets"}},
		{"message type no target handles", func() *workflow.Builder {
			a := workflow.Map("a", func(c *workflow.Context, s string) (int, error) { return len(s), nil })
			return workflow.NewBuilder("t").SetStart(a).AddEdge(a, str("b"))
		}, []string{`target "b" handles none of [int] sent by "a"`}},
		{"fan-in target not taking a list", func() *workflow.Builder {
			a, b := str("a"), str("b")
			return workflow.NewBuilder("t").SetStart(a).AddEdge(a, b).AddFanIn([]workflow.Executor{a, b}, str("c"))
		}, []string{`target "c" does not handle []any`}},
		{"empty switch and short chain", func() *workflow.Builder {
			a := str("a")
			return workflow.NewBuilder("t").SetStart(a).AddSwitch(a, nil, nil).AddChain(a)
		}, []string{"no cases and no default", "chain: needs at least two"}},
		{"both output and intermediate, empty id", func() *workflow.Builder {
			a := str("a")
			return workflow.NewBuilder("t").SetStart(a).Outputs(a).Intermediate(a).AddExecutor(str(""))
		}, []string{`executor "a": declared both`, "empty id"}},
		{"switch case type the target cannot handle", func() *workflow.Builder {
			a := str("a")
			return workflow.NewBuilder("t").SetStart(a).AddSwitch(a, []workflow.Case{workflow.CaseType[int](str("b"), nil)}, str("c"))
		}, []string{`case 0 target "b" does not handle int`}},
		{"a Map result that goes nowhere", func() *workflow.Builder {
			a := workflow.Map("a", func(_ *workflow.Context, s string) (int, error) { return len(s), nil })
			return workflow.NewBuilder("t").SetStart(a)
		}, []string{`executor "a": its result goes nowhere`}},
		{"Select on a direct edge, two Selects", func() *workflow.Builder {
			a, b := str("a"), str("b")
			all := workflow.Select(func(_ string, ts []workflow.Executor) []workflow.Executor { return ts })
			return workflow.NewBuilder("t").SetStart(a).AddEdge(a, b, all).AddFanOut(b, []workflow.Executor{str("c")}, all, all)
		}, []string{"edge#1: Select applies to AddFanOut", "fanout#2: more than one Select"}},
		{"fan-in source twice", func() *workflow.Builder {
			a := str("a")
			j := workflow.Func("j", func(*workflow.Context, []any) error { return nil })
			return workflow.NewBuilder("t").SetStart(a).AddFanIn([]workflow.Executor{a, a}, j)
		}, []string{`source "a" listed twice`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wf, err := tt.build().Build()
			if err == nil || wf != nil {
				t.Fatalf("Build() = %v, %v; want error", wf, err)
			}
			if !errors.Is(err, workflow.ErrBuild) {
				t.Errorf("error does not wrap ErrBuild: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestBuilder_Build_Valid(t *testing.T) {
	a := pass[string]("a")
	b := tagged("b")
	wf := mustBuild(t, workflow.NewBuilder("ok").SetStart(a).AddEdge(a, b).Outputs(b))
	if wf.Name() != "ok" || wf.Graph().Start != "a" || len(wf.Fingerprint()) != 32 {
		t.Fatalf("name %q start %q fingerprint %q", wf.Name(), wf.Graph().Start, wf.Fingerprint())
	}
	// The same shape gives the same fingerprint; another shape another one.
	a2 := pass[string]("a")
	b2 := tagged("b")
	same := mustBuild(t, workflow.NewBuilder("ok").SetStart(a2).AddEdge(a2, b2).Outputs(b2))
	c := tagged("c")
	other := mustBuild(t, workflow.NewBuilder("ok").SetStart(a2).AddEdge(a2, c).Outputs(c))
	if same.Fingerprint() != wf.Fingerprint() || other.Fingerprint() == wf.Fingerprint() {
		t.Fatalf("fingerprints: %s %s %s", wf.Fingerprint(), same.Fingerprint(), other.Fingerprint())
	}
}

func TestWorkflow_NewRun_InputType(t *testing.T) {
	a := pass[string]("a")
	b := tagged("b")
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(a).AddEdge(a, b).Outputs(b))
	if _, err := wf.NewRun("r", 42); !errors.Is(err, workflow.ErrMessageType) {
		t.Fatalf("NewRun(int) err = %v, want ErrMessageType", err)
	}
	type unregistered struct{ X int }
	any1 := workflow.Func("any", func(c *workflow.Context, v any) error { return nil })
	wf2 := mustBuild(t, workflow.NewBuilder("t").SetStart(any1))
	if _, err := wf2.NewRun("r", unregistered{}); !errors.Is(err, workflow.ErrUnregisteredType) {
		t.Fatalf("NewRun(unregistered) err = %v, want ErrUnregisteredType", err)
	}
}

// shared is a Snapshotter without Instancer.
type shared struct{ counter }

func (s *shared) NewInstance() {} // not Instancer's signature

type badInstance struct{ counter }

func (b *badInstance) NewInstance() workflow.Executor { return &counter{id: "other"} }

func TestBuilder_Build_Instances(t *testing.T) {
	_, err := workflow.NewBuilder("t").SetStart(&shared{counter{id: "s"}}).Build()
	if err == nil || !strings.Contains(err.Error(), `executor "s": Snapshotter without Instancer`) {
		t.Fatalf("err = %v", err)
	}
	_, err = workflow.NewBuilder("t").SetStart(&badInstance{counter{id: "b"}}).Build()
	if err == nil || !strings.Contains(err.Error(), `executor "b": NewInstance must return`) {
		t.Fatalf("err = %v", err)
	}
}
