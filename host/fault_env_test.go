package host

import (
	"context"
	"testing"

	"github.com/superstep/superstep/internal/fault"
)

func TestParseEnvFault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		point FaultPoint
		nth   int64
		crash bool
	}{
		{"commit.before", FaultCommitBefore, 1, false},
		{"commit.after@3", FaultCommitAfter, 3, false},
		{"lease.renew@2:crash", FaultLeaseRenew, 2, true},
		{"publish.event:fail", FaultPublish, 1, false},
	} {
		f, err := fault.ParseSpec(tc.in, FaultPoints())
		if err != nil || f.Point != tc.point || f.Nth != tc.nth || f.Crash != tc.crash {
			t.Fatalf("%q: %+v %v", tc.in, f, err)
		}
	}
	for _, bad := range []string{"", "nope", "commit.before@0", "commit.before@x", "commit.before:explode"} {
		if _, err := fault.ParseSpec(bad, FaultPoints()); err == nil {
			t.Fatalf("%q parsed", bad)
		}
	}
}

func TestEnvFault_FiresAtNthArrival(t *testing.T) {
	t.Parallel()
	f, err := fault.ParseSpec("commit.before@2:crash", FaultPoints())
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	hook := f.Func(func() { killed++ })
	ctx := context.Background()
	results := []error{
		hook(ctx, &Fault{Point: FaultCommitAfter}),
		hook(ctx, &Fault{Point: FaultCommitBefore}),
		hook(ctx, &Fault{Point: FaultCommitBefore}),
		hook(ctx, &Fault{Point: FaultCommitBefore}),
	}
	if results[0] != nil || results[1] != nil || results[2] == nil || results[3] != nil || killed != 1 {
		t.Fatalf("results %v, killed %d", results, killed)
	}
}
