package workflow_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"testing"

	"github.com/superstep/superstep/workflow"
)

// Order is a registered message and state type.
type Order struct {
	ID    int               `json:"id"`
	Items []string          `json:"items"`
	Tags  map[string]string `json:"tags"`
}

func init() { workflow.RegisterType[Order]("workflow_test.Order") }

// counter is a per-run, checkpointed executor (Instancer + Snapshotter).
type counter struct {
	id    string
	total int
}

func (c *counter) ID() string                     { return c.id }
func (c *counter) NewInstance() workflow.Executor { return &counter{id: c.id} }
func (c *counter) Snapshot() ([]byte, error)      { return []byte(strconv.Itoa(c.total)), nil }
func (c *counter) Restore(data []byte) (err error) {
	c.total, err = strconv.Atoi(string(data))
	return err
}
func (c *counter) Handle(ctx *workflow.Context, msg any) error {
	o := msg.(Order)
	c.total += len(o.Items)
	if err := ctx.Set("last", o); err != nil {
		return err
	}
	if o.ID < 3 {
		return ctx.Send(Order{ID: o.ID + 1, Items: append(o.Items, "x"), Tags: o.Tags})
	}
	return ctx.Yield(c.total)
}

func buildCounter(t testing.TB) *workflow.Workflow {
	c := &counter{id: "count"}
	return mustBuild(t, workflow.NewBuilder("counter").SetStart(c).AddEdge(c, c).Outputs(c))
}

func TestCheckpoint_DeterministicAndTyped(t *testing.T) {
	in := Order{ID: 1, Items: []string{"a"}, Tags: map[string]string{"z": "1", "a": "2"}}
	runA, recA, err := runAll(t, buildCounter(t), in)
	if err != nil {
		t.Fatal(err)
	}
	_, recB, _ := runAll(t, buildCounter(t), in)
	for i := range recA.steps {
		if !reflect.DeepEqual(recA.steps[i].Checkpoint, recB.steps[i].Checkpoint) {
			t.Fatalf("step %d checkpoints differ", i+1)
		}
	}
	// 1 + 2 + 3 items over three steps.
	if got := recA.outputs(); !reflect.DeepEqual(got, []any{6}) {
		t.Fatalf("outputs %v", got)
	}
	// Restore mid-run in a "fresh process": a new workflow instance, types intact.
	mid := recA.steps[0].Checkpoint
	restored, err := buildCounter(t).Restore("run-1", mid)
	if err != nil {
		t.Fatal(err)
	}
	again, err := restored.Checkpoint()
	if err != nil || !reflect.DeepEqual(again, mid) {
		t.Fatalf("re-encoded checkpoint differs: %v", err)
	}
	rec := &recorder{}
	if err := restored.Run(t.Context(), rec.commit, nil); err != nil {
		t.Fatal(err)
	}
	if got := rec.outputs(); !reflect.DeepEqual(got, []any{6}) {
		t.Fatalf("outputs after restore %v (executor snapshot lost?)", got)
	}
	final, _ := runA.Checkpoint()
	if got, _ := restored.Checkpoint(); !reflect.DeepEqual(got, final) {
		t.Fatal("final checkpoints differ between straight and restored runs")
	}
	name, value, _ := bytes.Cut(final[1].Data, []byte("\n"))
	var o Order
	if final[1].Name != "state/last" || string(name) != "workflow_test.Order" || json.Unmarshal(value, &o) != nil || o.ID != 3 {
		t.Fatalf("state part %s %s", final[1].Name, final[1].Data)
	}
}

func TestCheckpoint_RestoreErrors(t *testing.T) {
	wf := buildCounter(t)
	run, _ := wf.NewRun("r", Order{ID: 1})
	parts, _ := run.Checkpoint()
	a := pass[string]("a")
	b := tagged("b")
	other := mustBuild(t, workflow.NewBuilder("other").SetStart(a).AddEdge(a, b).Outputs(b))
	if _, err := other.Restore("r", parts); !errors.Is(err, workflow.ErrFingerprint) || !errors.Is(err, workflow.ErrCheckpoint) {
		t.Fatalf("other graph: %v", err)
	}
	corrupt := func(mut func([]workflow.Part) []workflow.Part) error {
		cp := make([]workflow.Part, len(parts))
		for i, p := range parts {
			cp[i] = workflow.Part{Name: p.Name, Data: bytes.Clone(p.Data)}
		}
		_, err := wf.Restore("r", mut(cp))
		return err
	}
	cases := map[string]func([]workflow.Part) []workflow.Part{
		"no parts":     func([]workflow.Part) []workflow.Part { return nil },
		"truncated":    func(p []workflow.Part) []workflow.Part { p[0].Data = p[0].Data[:len(p[0].Data)/2]; return p },
		"missing snap": func(p []workflow.Part) []workflow.Part { return p[:1] },
		"duplicate":    func(p []workflow.Part) []workflow.Part { return append(p, p[0]) },
		"bad snapshot": func(p []workflow.Part) []workflow.Part { p[len(p)-1].Data = []byte("x"); return p },
		"unknown type": func(p []workflow.Part) []workflow.Part {
			p[0].Data = bytes.Replace(p[0].Data, []byte("workflow_test.Order"), []byte("nope.Nope"), 1)
			return p
		},
		"bad version": func(p []workflow.Part) []workflow.Part {
			p[0].Data = bytes.Replace(p[0].Data, []byte(`"version":1`), []byte(`"version":9`), 1)
			return p
		},
		"unknown target": func(p []workflow.Part) []workflow.Part {
			p[0].Data = bytes.Replace(p[0].Data, []byte(`"target":"count"`), []byte(`"target":"ghost"`), 1)
			return p
		},
		"extra part": func(p []workflow.Part) []workflow.Part {
			return append(p, workflow.Part{Name: "state/x", Data: []byte("int\n1")})
		},
	}
	for name, mut := range cases {
		if err := corrupt(mut); !errors.Is(err, workflow.ErrCheckpoint) {
			t.Errorf("%s: err = %v, want ErrCheckpoint", name, err)
		}
	}
	if _, err := workflow.SplitParts([]byte("garbage")); !errors.Is(err, workflow.ErrCheckpoint) {
		t.Errorf("SplitParts(garbage) = %v", err)
	}
	blob := workflow.JoinParts(parts)
	if _, err := workflow.SplitParts(blob[:len(blob)-1]); !errors.Is(err, workflow.ErrCheckpoint) {
		t.Errorf("SplitParts(truncated) = %v", err)
	}
}

func TestCheckpoint_UnchangedPartsKeepTheirBytes(t *testing.T) {
	a := workflow.Func("a", func(c *workflow.Context, n int) error {
		if n == 1 {
			if err := c.Set("big", bytes.Repeat([]byte("z"), 1000)); err != nil {
				return err
			}
		}
		if err := c.Set("n", n); err != nil {
			return err
		}
		if n < 3 {
			return c.Send(n + 1)
		}
		return nil
	})
	wf := mustBuild(t, workflow.NewBuilder("t").SetStart(a).AddEdge(a, a))
	_, rec, err := runAll(t, wf, 1)
	if err != nil {
		t.Fatal(err)
	}
	s1, s2 := rec.steps[0].Checkpoint, rec.steps[1].Checkpoint
	if s1[1].Name != "state/big" || !bytes.Equal(s1[1].Data, s2[1].Data) || bytes.Equal(s1[2].Data, s2[2].Data) {
		t.Fatalf("parts: %v / %v", s1, s2)
	}
}

// CheckpointState decodes the state entries under a key prefix, and only
// those: a corrupt part under another key is not read.
func TestCheckpointState(t *testing.T) {
	parts := []workflow.Part{
		{Name: "state/usage/a", Data: []byte("int\n1")},
		{Name: "state/usage/b", Data: []byte("int\n2")},
		{Name: "state/other", Data: []byte("no newline: corrupt")},
		{Name: "exec/usage/c", Data: []byte("int\n3")},
	}
	got, err := workflow.CheckpointState(parts, "usage/")
	if err != nil || len(got) != 2 || got["usage/a"] != 1 || got["usage/b"] != 2 {
		t.Fatalf("CheckpointState(usage/) = %v, %v", got, err)
	}
	if _, err := workflow.CheckpointState(parts, "other"); !errors.Is(err, workflow.ErrCheckpoint) {
		t.Fatalf("a corrupt part under the prefix: %v, want ErrCheckpoint", err)
	}
	if got, err := workflow.CheckpointState(nil, ""); err != nil || got != nil {
		t.Fatalf("no parts: %v %v", got, err)
	}
}
