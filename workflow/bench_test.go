package workflow_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/superstep/superstep/workflow"
)

// BenchmarkSuperstep_FanOutFanIn10 measures the engine's overhead per
// superstep for a loop of one dispatcher, a fan-out to 10 executors and a
// fan-in back to the dispatcher (2 supersteps per round; executors do
// nothing but forward). The commit hook discards the step.
func BenchmarkSuperstep_FanOutFanIn10(b *testing.B) {
	rounds := b.N/2 + 1 // two supersteps per round: dispatcher, then workers
	disp := workflow.Handlers("disp", []workflow.Handler{
		workflow.On(func(c *workflow.Context, n int) error { return c.Send(n) }),
		workflow.On(func(c *workflow.Context, vs []any) error {
			n := vs[0].(int)
			if n >= rounds {
				return nil
			}
			return c.Send(n + 1)
		}),
	})
	var workers []workflow.Executor
	for i := range 10 {
		workers = append(workers, pass[int](fmt.Sprintf("w%d", i)))
	}
	wf := mustBuild(b, workflow.NewBuilder("bench").SetStart(disp).
		AddFanOut(disp, workers).AddFanIn(workers, disp))
	run, err := wf.NewRun("bench", 0)
	if err != nil {
		b.Fatal(err)
	}
	steps := 0
	commit := func(context.Context, *workflow.Step) error { steps++; return nil }
	b.ReportAllocs()
	b.ResetTimer()
	if err := run.Run(context.Background(), commit, &workflow.RunOptions{MaxSupersteps: 1 << 40}); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(steps), "ns/superstep")
	b.ReportMetric(float64(steps)/float64(b.N), "supersteps/op")
}

// stateBlob is 1 MB of shared state in 64 keys of 16 KB.
func stateBlob() map[string]string {
	m := map[string]string{}
	for i := range 64 {
		m[fmt.Sprintf("key-%02d", i)] = strings.Repeat(string(rune('a'+i%26)), 16<<10)
	}
	return m
}

func stateRun(b *testing.B) (*workflow.Workflow, *workflow.Run) {
	set := workflow.Func("set", func(c *workflow.Context, _ string) error {
		for k, v := range stateBlob() {
			if err := c.Set(k, v); err != nil {
				return err
			}
		}
		return nil
	})
	wf := mustBuild(b, workflow.NewBuilder("state").SetStart(set))
	run, err := wf.NewRun("s", "go")
	if err != nil {
		b.Fatal(err)
	}
	if err := run.Run(context.Background(), func(context.Context, *workflow.Step) error { return nil }, nil); err != nil {
		b.Fatal(err)
	}
	return wf, run
}

// BenchmarkCheckpoint_Encode1MB encodes a checkpoint holding 1 MB of state
// from scratch (no cached part encodings).
func BenchmarkCheckpoint_Encode1MB(b *testing.B) {
	_, run := stateRun(b)
	b.SetBytes(1 << 20)
	b.ReportAllocs()
	for b.Loop() {
		run.DropEncodingCache()
		if _, err := run.Checkpoint(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpoint_Encode1MBUnchanged encodes the same checkpoint when
// no state changed since the last one: the per-step cost in a run whose big
// state stays put.
func BenchmarkCheckpoint_Encode1MBUnchanged(b *testing.B) {
	_, run := stateRun(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := run.Checkpoint(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpoint_Decode1MB restores a checkpoint holding 1 MB of state.
func BenchmarkCheckpoint_Decode1MB(b *testing.B) {
	wf, run := stateRun(b)
	parts, err := run.Checkpoint()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(1 << 20)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wf.Restore("s", parts); err != nil {
			b.Fatal(err)
		}
	}
}
