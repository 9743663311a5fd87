package workflow_test

import (
	"testing"

	"github.com/superstep/superstep/workflow"
)

func TestMetadata_Typed(t *testing.T) {
	inv := workflow.Invocation{Metadata: map[string]string{"n": "4", "on": "true", "name": "x y", "bad": "four",
		"obj": `{"A":2}`}}
	n, err := workflow.Metadata(inv, "n", 1)
	if n != 4 || err != nil {
		t.Fatalf("n: %v, %v", n, err)
	}
	if on, err := workflow.Metadata(inv, "on", false); !on || err != nil {
		t.Fatalf("on: %v, %v", on, err)
	}
	type name string
	if s, err := workflow.Metadata[name](inv, "name", ""); s != "x y" || err != nil {
		t.Fatalf("name: %q, %v", s, err)
	}
	if o, err := workflow.Metadata(inv, "obj", struct{ A int }{}); o.A != 2 || err != nil {
		t.Fatalf("obj: %v, %v", o, err)
	}
	if d, err := workflow.Metadata(inv, "absent", 7); d != 7 || err != nil {
		t.Fatalf("absent: %v, %v", d, err)
	}
	if d, err := workflow.Metadata(inv, "bad", 7); d != 7 || err == nil {
		t.Fatalf("bad: %v, %v", d, err)
	}
}
