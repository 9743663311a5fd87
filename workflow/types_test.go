package workflow_test

import (
	"bytes"
	"errors"
	"strings"
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

type unnamedProbe struct{ X int }

// A message type without a checkpoint name is a Build error that names it.
func TestRegisterType_MissingIsBuildError(t *testing.T) {
	probe := workflow.Func("probe", func(c *workflow.Context, p unnamedProbe) error { return nil })
	_, err := workflow.NewBuilder("t").SetStart(probe).Build()
	if !errors.Is(err, workflow.ErrBuild) || !errors.Is(err, workflow.ErrUnregisteredType) ||
		!strings.Contains(err.Error(), `executor "probe": workflow: type workflow_test.unnamedProbe has no checkpoint name`) {
		t.Fatalf("Build: %v", err)
	}
	m := workflow.Map("m", func(c *workflow.Context, s string) (unnamedProbe, error) { return unnamedProbe{}, nil })
	if _, err := workflow.NewBuilder("t").SetStart(m).Outputs(m).Build(); !errors.Is(err, workflow.ErrUnregisteredType) {
		t.Fatalf("Build of a Map returning it: %v", err)
	}
}

// Checkpoints store the registered name; those made when types were named
// by their package path still decode.
func TestRegisterType_ExplicitAndLegacyNames(t *testing.T) {
	workflow.RegisterType[aliasProbe]("workflow_test.probe")
	probe := workflow.Func("probe", func(c *workflow.Context, p aliasProbe) error { return c.Set("p", p) })
	wf := mustBuild(t, workflow.NewBuilder("alias").SetStart(probe))
	_, rec, err := runAll(t, wf, aliasProbe{X: 7})
	if err != nil {
		t.Fatal(err)
	}
	parts := rec.steps[0].Checkpoint
	if !bytes.HasPrefix(parts[1].Data, []byte("workflow_test.probe\n")) {
		t.Fatalf("state part %q", parts[1].Data)
	}
	legacy := []workflow.Part{{Name: "state/p", Data: []byte("github.com/superstep/superstep/workflow_test.aliasProbe\n{\"X\":8}")}}
	st, err := workflow.CheckpointState(legacy, "")
	if err != nil || st["p"] != (aliasProbe{X: 8}) {
		t.Fatalf("legacy name: %v, %v", st, err)
	}
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
