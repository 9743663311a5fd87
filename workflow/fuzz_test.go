package workflow_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/superstep/superstep/workflow"
)

// FuzzRestore feeds arbitrary bytes to SplitParts and Restore: they must
// return a run or an error wrapping ErrCheckpoint, never panic.
func FuzzRestore(f *testing.F) {
	wf := fuzzWorkflow(f)
	run, err := wf.NewRun("fuzz", Order{ID: 1, Items: []string{"a"}})
	if err != nil {
		f.Fatal(err)
	}
	rec := &recorder{}
	if err := run.Run(f.Context(), rec.commit, nil); err != nil || run.Status() != workflow.Idle {
		f.Fatalf("seed run: %v, status %s", err, run.Status())
	}
	for _, s := range rec.steps {
		f.Add(workflow.JoinParts(s.Checkpoint))
	}
	f.Add([]byte("SSCKPT1\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, blob []byte) {
		parts, err := workflow.SplitParts(blob)
		if err != nil {
			if !errors.Is(err, workflow.ErrCheckpoint) {
				t.Fatalf("SplitParts error does not wrap ErrCheckpoint: %v", err)
			}
			return
		}
		r, err := wf.Restore("fuzz", parts)
		if err != nil {
			if !errors.Is(err, workflow.ErrCheckpoint) {
				t.Fatalf("Restore error does not wrap ErrCheckpoint: %v", err)
			}
			return
		}
		// A restorable checkpoint re-encodes and runs without panicking.
		if _, err := r.Checkpoint(); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		_ = r.Run(t.Context(), (&recorder{}).commit, &workflow.RunOptions{MaxSupersteps: 20})
	})
}

// fuzzWorkflow has a Snapshotter, a fan-in and a requester, so the header
// has every section.
func fuzzWorkflow(t testing.TB) *workflow.Workflow {
	c := &counter{id: "count"}
	ask := workflow.Handlers("ask", []workflow.Handler{
		workflow.On(func(ctx *workflow.Context, n int) error {
			_, err := workflow.RequestInput[Approval](ctx, "", n)
			return err
		}),
		workflow.On(func(ctx *workflow.Context, a workflow.Answer[any]) error { return nil }),
	})
	join := workflow.Func("join", func(ctx *workflow.Context, vs []any) error { return ctx.Send(len(vs)) })
	fan := workflow.Func("fan", func(ctx *workflow.Context, o Order) error { return ctx.Send(o.ID) })
	small := func(o Order) bool { return o.ID < 2 }
	return mustBuild(t, workflow.NewBuilder("fuzz").SetStart(c).
		AddSwitch(c, []workflow.Case{workflow.CaseType(c, small)}, fan).
		AddFanIn([]workflow.Executor{c, fan}, join).AddEdge(join, ask).Outputs(c))
}

// TestFuzzCorpusRestores keeps the checked-in seed corpus useful: its
// checkpoints must restore (a changed fingerprint would make every seed a
// shallow rejection). Regenerate the files from fuzzWorkflow's run if the
// graph or the encoding changes.
func TestFuzzCorpusRestores(t *testing.T) {
	files, err := filepath.Glob("testdata/fuzz/FuzzRestore/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no seed corpus: %v", err)
	}
	wf := fuzzWorkflow(t)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, lit, _ := strings.Cut(string(data), "\n[]byte(")
		blob, err := strconv.Unquote(strings.TrimSuffix(strings.TrimSpace(lit), ")"))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		parts, err := workflow.SplitParts([]byte(blob))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := wf.Restore("fuzz", parts); err != nil {
			t.Errorf("%s does not restore: %v", f, err)
		}
	}
}
