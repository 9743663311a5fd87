package fault_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/superstep/superstep/internal/fault"
)

var points = []fault.Name{"commit.before", "commit.after", "lease.renew", "publish.event"}

func TestReach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if err := fault.Reach(ctx, nil, &fault.At{Point: "commit.before"}); err != nil {
		t.Fatalf("nil Func: %v", err)
	}
	cause := errors.New("disk on fire")
	var got *fault.At
	fn := func(_ context.Context, at *fault.At) error {
		got = at
		if at.Step == 2 {
			return cause
		}
		return nil
	}
	if err := fault.Reach(ctx, fn, &fault.At{Point: "commit.before", Step: 1}); err != nil {
		t.Fatalf("passing arrival: %v", err)
	}
	at := &fault.At{Point: "commit.before", RunID: "run_1", Step: 2}
	err := fault.Reach(ctx, fn, at)
	if got != at || !errors.Is(err, fault.ErrInjected) || !errors.Is(err, cause) ||
		!strings.Contains(err.Error(), "injected fault at commit.before") {
		t.Fatalf("failing arrival: %v (fn saw %+v)", err, got)
	}
}

func TestParseSpec(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		point fault.Name
		nth   int64
		crash bool
	}{
		{"commit.before", "commit.before", 1, false},
		{"commit.after@3", "commit.after", 3, false},
		{"lease.renew@2:crash", "lease.renew", 2, true},
		{"publish.event:fail", "publish.event", 1, false},
	} {
		s, err := fault.ParseSpec(tc.in, points)
		if err != nil || s.Point != tc.point || s.Nth != tc.nth || s.Crash != tc.crash {
			t.Fatalf("%q: %+v %v", tc.in, s, err)
		}
	}
	for _, bad := range []string{"", "nope", "commit.before@0", "commit.before@x", "commit.before:explode"} {
		if _, err := fault.ParseSpec(bad, points); err == nil {
			t.Fatalf("%q parsed", bad)
		}
	}
}

func TestSpec_FiresAtNthArrival(t *testing.T) {
	t.Parallel()
	for _, crash := range []bool{false, true} {
		v := "commit.before@2"
		if crash {
			v += ":crash"
		}
		s, err := fault.ParseSpec(v, points)
		if err != nil {
			t.Fatal(err)
		}
		crashed := 0
		fn := s.Func(func() { crashed++ })
		ctx := context.Background()
		results := []error{
			fn(ctx, &fault.At{Point: "commit.after"}),
			fn(ctx, &fault.At{Point: "commit.before"}),
			fn(ctx, &fault.At{Point: "commit.before"}),
			fn(ctx, &fault.At{Point: "commit.before"}),
		}
		want := 0
		if crash {
			want = 1
		}
		if results[0] != nil || results[1] != nil || !errors.Is(results[2], fault.ErrSpec) || results[3] != nil || crashed != want {
			t.Fatalf("%s: results %v, crashed %d", v, results, crashed)
		}
	}
}

func TestFromEnv(t *testing.T) {
	const env = "SUPERSTEP_TEST_FAULT_SPEC"
	t.Setenv(env, "")
	if fault.FromEnv(env, points) != nil {
		t.Fatal("unset variable gave a Func")
	}
	t.Setenv(env, "nope@1")
	if fault.FromEnv(env, points) != nil {
		t.Fatal("bad value gave a Func")
	}
	t.Setenv(env, "lease.renew@2")
	fn := fault.FromEnv(env, points)
	if !fault.Enabled {
		if fn != nil {
			t.Fatal("FromEnv read the environment in a build without faults")
		}
		return
	}
	if fn == nil {
		t.Skip("the environment is read on Unix only")
	}
	ctx := context.Background()
	at := &fault.At{Point: "lease.renew"}
	if err := fault.Reach(ctx, fn, at); err != nil {
		t.Fatalf("first arrival: %v", err)
	}
	if err := fault.Reach(ctx, fn, at); !errors.Is(err, fault.ErrInjected) || !errors.Is(err, fault.ErrSpec) {
		t.Fatalf("second arrival: %v", err)
	}
}
