package fault_test

import (
	"context"
	"errors"
	"testing"

	"github.com/superstep/superstep/internal/fault"
)

func TestPoint(t *testing.T) {
	t.Parallel()
	in := fault.NewInjector(1)
	ctx := fault.WithInjector(context.Background(), in)
	errs := []error{fault.Point(ctx, "a"), fault.Point(ctx, "b"), fault.Point(ctx, "c")}
	if !fault.Enabled {
		for i, err := range errs {
			if err != nil {
				t.Fatalf("point %d: %v in a build without faults", i, err)
			}
		}
		if in.Calls() != 0 {
			t.Fatalf("calls = %d without faults", in.Calls())
		}
		return
	}
	if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], fault.ErrInjected) {
		t.Fatalf("errs = %v, want only the second to fail", errs)
	}
	if got := in.Failed(); got != "b" {
		t.Fatalf("Failed = %q", got)
	}
	if got := in.Passed(); len(got) != 2 || got[0] != "a" || got[1] != "c" {
		t.Fatalf("Passed = %v", got)
	}
	if err := fault.Point(context.Background(), "x"); err != nil {
		t.Fatalf("unarmed ctx: %v", err)
	}
}
