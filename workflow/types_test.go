package workflow_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/superstep/superstep/workflow"
)

type aliasProbe struct{ X int }

type conflictA struct{}
type conflictB struct{}

func TestRegisterType_ConflictPanics(t *testing.T) {
	workflow.RegisterType[conflictA]("workflow_test.conflict")
	workflow.RegisterType[conflictA]("workflow_test.conflict") // same pair: no-op
	defer func() {
		if recover() == nil {
			t.Fatal("registering one name for two types did not panic")
		}
	}()
	workflow.RegisterType[conflictB]("workflow_test.conflict")
}

func TestRegisterType_AutoThenExplicitName(t *testing.T) {
	probe := workflow.Func("probe", func(c *workflow.Context, p aliasProbe) error { return c.Set("p", p) })
	wf := mustBuild(t, workflow.NewBuilder("alias").SetStart(probe))
	run, rec, err := runAll(t, wf, aliasProbe{X: 7})
	if err != nil {
		t.Fatal(err)
	}
	old := rec.steps[0].Checkpoint
	want := "github.com/superstep/superstep/workflow_test.aliasProbe"
	if n, _ := workflow.TypeName(reflect.TypeFor[aliasProbe]()); n == "probe" {
		want = "probe" // -count > 1: registered by an earlier run of this test
	}
	if name, _, _ := bytes.Cut(old[1].Data, []byte("\n")); string(name) != want {
		t.Fatalf("auto name %q", name)
	}
	workflow.RegisterType[aliasProbe]("probe")
	if n, _ := workflow.TypeName(reflect.TypeFor[aliasProbe]()); n != "probe" {
		t.Fatalf("explicit name not preferred: %q", n)
	}
	// Both the old (canonical) and the new name decode to the same type.
	restored, err := wf.Restore("r", old)
	if err != nil {
		t.Fatal(err)
	}
	parts, _ := restored.Checkpoint()
	if !bytes.HasPrefix(parts[1].Data, []byte("probe\n")) {
		t.Fatalf("re-encoded with %q", parts[1].Data)
	}
	if _, err := wf.Restore("r", parts); err != nil {
		t.Fatal(err)
	}
	_ = run
}

func TestRequestInput_UnregisteredResponseType(t *testing.T) {
	type unknown struct{ A int }
	ask := workflow.Handlers("ask", []workflow.Handler{
		workflow.On(func(c *workflow.Context, s string) error {
			_, err := workflow.RequestInput[unknown](c, "", s)
			return err
		}),
		workflow.On(func(*workflow.Context, workflow.Answer[any]) error { return nil }),
	})
	_, _, err := runAll(t, mustBuild(t, workflow.NewBuilder("t").SetStart(ask)), "x")
	if !errors.Is(err, workflow.ErrUnregisteredType) {
		t.Fatalf("err = %v", err)
	}
}
