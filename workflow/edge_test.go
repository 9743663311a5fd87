package workflow_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/superstep/superstep/workflow"
)

func TestEdges(t *testing.T) {
	isShort := func(s string) bool { return len(s) < 4 }
	tests := []struct {
		name    string
		build   func() *workflow.Builder
		input   string
		want    []any
		wantErr error
	}{
		{
			name: "direct",
			build: func() *workflow.Builder {
				a, b := pass[string]("a"), tagged("b")
				return workflow.NewBuilder("t").SetStart(a).AddEdge(a, b).Outputs(b)
			},
			input: "x", want: []any{"b:x"},
		},
		{
			name: "direct condition true and false",
			build: func() *workflow.Builder {
				a, s, l := pass[string]("a"), tagged("short"), tagged("long")
				return workflow.NewBuilder("t").SetStart(a).
					AddEdge(a, s, workflow.When(isShort)).
					AddEdge(a, l, workflow.When(func(m string) bool { return !isShort(m) })).Outputs(s, l)
			},
			input: "hello", want: []any{"long:hello"},
		},
		{
			name: "condition rejecting everything is a visible error",
			build: func() *workflow.Builder {
				a, s := pass[string]("a"), tagged("short")
				return workflow.NewBuilder("t").SetStart(a).AddEdge(a, s, workflow.When(isShort)).Outputs(s)
			},
			input: "hello", wantErr: workflow.ErrNoRoute,
		},
		{
			name: "fan-out all",
			build: func() *workflow.Builder {
				a, b, c := pass[string]("a"), tagged("b"), tagged("c")
				return workflow.NewBuilder("t").SetStart(a).AddFanOut(a, []workflow.Executor{c, b}).Outputs(b, c)
			},
			input: "x", want: []any{"c:x", "b:x"},
		},
		{
			name: "fan-out selector",
			build: func() *workflow.Builder {
				a, b, c, d := pass[string]("a"), tagged("b"), tagged("c"), tagged("d")
				sel := workflow.Select(func(_ string, ts []workflow.Executor) []workflow.Executor { return []workflow.Executor{ts[2], ts[0]} })
				return workflow.NewBuilder("t").SetStart(a).AddFanOut(a, []workflow.Executor{b, c, d}, sel).Outputs(b, c, d)
			},
			input: "x", want: []any{"b:x", "d:x"},
		},
		{
			name: "fan-out with a condition and a typed selector",
			build: func() *workflow.Builder {
				a, b, c, d := pass[string]("a"), tagged("b"), tagged("c"), tagged("d")
				last := workflow.Select(func(m string, ts []workflow.Executor) []workflow.Executor { return ts[len(ts)-1:] })
				return workflow.NewBuilder("t").SetStart(a).AddFanOut(a, []workflow.Executor{b, c}, last,
					workflow.When(func(m string) bool { return m == "y" })).AddEdge(a, d).Outputs(b, c, d)
			},
			input: "x", want: []any{"d:x"},
		},
		{
			name: "Map sends its result on and yields it",
			build: func() *workflow.Builder {
				a := workflow.Map("a", func(_ *workflow.Context, s string) (string, error) { return s + s, nil })
				b := tagged("b")
				return workflow.NewBuilder("t").SetStart(a).AddEdge(a, b).Outputs(a, b)
			},
			input: "x", want: []any{"xx", "b:xx"},
		},
		{
			name: "fan-out selector choosing a stranger",
			build: func() *workflow.Builder {
				a, b := pass[string]("a"), tagged("b")
				sel := workflow.Select(func(string, []workflow.Executor) []workflow.Executor { return []workflow.Executor{tagged("zzz")} })
				return workflow.NewBuilder("t").SetStart(a).AddFanOut(a, []workflow.Executor{b}, sel).Outputs(b)
			},
			input: "x", wantErr: workflow.ErrExecutorFailed,
		},
		{
			name: "switch first matching case",
			build: func() *workflow.Builder {
				a, s, m, d := pass[string]("a"), tagged("s"), tagged("m"), tagged("d")
				return workflow.NewBuilder("t").SetStart(a).AddSwitch(a, []workflow.Case{
					workflow.CaseType(s, func(v string) bool { return len(v) < 3 }),
					workflow.CaseType(m, func(v string) bool { return len(v) < 6 }),
				}, d).Outputs(s, m, d)
			},
			input: "four", want: []any{"m:four"},
		},
		{
			name: "switch default",
			build: func() *workflow.Builder {
				a, s, d := pass[string]("a"), tagged("s"), tagged("d")
				return workflow.NewBuilder("t").SetStart(a).AddSwitch(a, []workflow.Case{
					workflow.CaseType(s, func(v string) bool { return len(v) < 3 }),
				}, d).Outputs(s, d)
			},
			input: "longer", want: []any{"d:longer"},
		},
		{
			name: "switch without default and no match",
			build: func() *workflow.Builder {
				a, s := pass[string]("a"), tagged("s")
				return workflow.NewBuilder("t").SetStart(a).AddSwitch(a, []workflow.Case{
					workflow.CaseType(s, func(v string) bool { return false }),
				}, nil).Outputs(s)
			},
			input: "x", wantErr: workflow.ErrNoRoute,
		},
		{
			name: "chain",
			build: func() *workflow.Builder {
				a := workflow.Func("a", func(c *workflow.Context, v string) error { return c.Send(v + "a") })
				b := workflow.Func("b", func(c *workflow.Context, v string) error { return c.Send(v + "b") })
				c := tagged("c")
				return workflow.NewBuilder("t").SetStart(a).AddChain(a, b, c).Outputs(c)
			},
			input: "", want: []any{"c:ab"},
		},
		{
			name: "fan-in waits for every source and keeps source order",
			build: func() *workflow.Builder {
				a := workflow.Func("a", func(c *workflow.Context, v string) error { return c.Send(v) })
				slow := workflow.Func("slow", func(c *workflow.Context, v string) error { return c.Send(v + "-slow") })
				fast := workflow.Func("fast", func(c *workflow.Context, v string) error { return c.Send(v + "-fast") })
				delay := pass[string]("delay")
				join := workflow.Func("join", func(c *workflow.Context, vs []any) error { return c.Yield(fmt.Sprint(vs...)) })
				return workflow.NewBuilder("t").SetStart(a).
					AddFanOut(a, []workflow.Executor{delay, fast}).
					AddEdge(delay, slow).
					AddFanIn([]workflow.Executor{slow, fast}, join).Outputs(join)
			},
			input: "x", want: []any{"x-slowx-fast"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wf := mustBuild(t, tt.build())
			_, rec, err := runAll(t, wf, tt.input)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := rec.outputs(); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("outputs = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEdges_FanInBufferIsCheckpointed(t *testing.T) {
	build := func() *workflow.Workflow {
		a := pass[string]("a")
		d1, d2 := pass[string]("d1"), pass[string]("d2")
		slow := workflow.Func("slow", func(c *workflow.Context, v string) error { return c.Send(v + "-slow") })
		fast := workflow.Func("fast", func(c *workflow.Context, v string) error { return c.Send(v + "-fast") })
		join := workflow.Func("join", func(c *workflow.Context, vs []any) error { return c.Yield(vs) })
		return mustBuild(t, workflow.NewBuilder("t").SetStart(a).
			AddFanOut(a, []workflow.Executor{d1, fast}).AddChain(d1, d2, slow).
			AddFanIn([]workflow.Executor{slow, fast}, join).Outputs(join))
	}
	run, err := build().NewRun("r", "x")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	// Run two supersteps: fast has sent, slow not yet.
	for range run.Events(t.Context(), rec.commit, nil) {
		if len(rec.steps) == 2 {
			break
		}
	}
	parts, err := run.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(parts[0].Data), "x-fast") {
		t.Fatalf("fan-in buffer not in header: %s", parts[0].Data)
	}
	restored, err := build().Restore("r", parts)
	if err != nil {
		t.Fatal(err)
	}
	rec2 := &recorder{}
	if err := restored.Run(t.Context(), rec2.commit, nil); err != nil {
		t.Fatal(err)
	}
	want := []any{[]any{"x-slow", "x-fast"}}
	if got := rec2.outputs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("outputs after restore = %#v, want %#v", got, want)
	}
}
