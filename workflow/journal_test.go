package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/superstep/superstep/workflow"
)

// memJournal is a workflow.Journal in memory with the semantics the
// interface asks for (a host keeps it in its store).
type memJournal struct {
	mu       sync.Mutex
	entries  map[string]memEntry // by JournalCall.Key
	diverged int
	calls    []workflow.JournalCall // recorded, in order
}

type memEntry struct {
	call workflow.JournalCall
	data []byte
}

func (j *memJournal) Replay(_ context.Context, c workflow.JournalCall) ([]byte, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.entries[c.Key()]
	if !ok {
		return nil, false
	}
	if e.call.Hash != c.Hash {
		j.diverged++
		for k, o := range j.entries {
			if o.call.Scope == c.Scope && o.call.Pos >= c.Pos {
				delete(j.entries, k)
			}
		}
		return nil, false
	}
	return e.data, true
}

func (j *memJournal) Record(_ context.Context, c workflow.JournalCall, data []byte) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.entries == nil {
		j.entries = map[string]memEntry{}
	}
	j.entries[c.Key()] = memEntry{call: c, data: data}
	j.calls = append(j.calls, c)
	return nil
}

// TestRunStep: steps that finished are answered from the journal when
// the superstep runs again (a new Run from the same state, as after a
// crash); a step whose name changed at its position is run and the
// journal discards what followed; a failed step is not recorded;
// without a journal steps just run.
func TestRunStep(t *testing.T) {
	var mu sync.Mutex
	runs := map[string]int{}
	names := []string{"a", "b", "c"}
	failC := true
	ex := workflow.Func("ex", func(c *workflow.Context, in string) error {
		var got []int
		for i, name := range names {
			v, err := workflow.RunStep(c.Context(), name, func(context.Context) (int, error) {
				mu.Lock()
				defer mu.Unlock()
				runs[name]++
				if name == "c" && failC {
					return 0, errors.New("c failed")
				}
				return 10*i + runs[name], nil
			})
			if err != nil {
				return err
			}
			got = append(got, v)
		}
		return c.Yield(fmt.Sprint(got))
	})
	wf, err := workflow.NewBuilder("steps").SetStart(ex).Outputs(ex).Build()
	if err != nil {
		t.Fatal(err)
	}
	j := &memJournal{}
	run := func(ctx context.Context) (string, error) {
		r, err := wf.NewRun("run-1", "go")
		if err != nil {
			t.Fatal(err)
		}
		var out string
		err = r.Run(ctx, func(_ context.Context, s *workflow.Step) error {
			for _, e := range s.Events {
				if o, ok := e.(workflow.Output); ok {
					out = o.Value.(string)
				}
			}
			return nil
		}, nil)
		return out, err
	}
	ctx := workflow.WithJournal(t.Context(), j)
	if _, err := run(ctx); err == nil {
		t.Fatal("the first run succeeded; c should have failed it")
	}
	failC = false
	out, err := run(ctx) // the superstep again: a and b from the journal
	if err != nil {
		t.Fatal(err)
	}
	if out != "[1 11 22]" || runs["a"] != 1 || runs["b"] != 1 || runs["c"] != 2 {
		t.Fatalf("output %s, runs %v; want [1 11 22] with a and b run once, c twice (its failure unrecorded)", out, runs)
	}
	if len(j.calls) != 3 || j.calls[0].Scope != "ex@1" || j.calls[2].Pos != 2 || j.calls[0].Step != 1 || j.calls[1].Kind != "step" {
		t.Fatalf("recorded calls %+v", j.calls)
	}
	// b renamed: a is replayed, b2 runs, c's entry (after the divergence)
	// is discarded and c runs again.
	names = []string{"a", "b2", "c"}
	out, err = run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out != "[1 11 23]" || runs["a"] != 1 || runs["b2"] != 1 || runs["c"] != 3 || j.diverged != 1 {
		t.Fatalf("after a rename: output %s, runs %v, %d divergences; want [1 11 23], a once, b2 once, c three times, 1 divergence",
			out, runs, j.diverged)
	}
	// Without a journal every step runs.
	if _, err := run(t.Context()); err != nil || runs["a"] != 2 {
		t.Fatalf("without a journal: err %v, a ran %d times, want 2", err, runs["a"])
	}
	if workflow.Journaling(t.Context()) || workflow.Journaling(ctx) {
		t.Fatal("Journaling is true outside an executor")
	}
}

// TestCompletionJournal: in a superstep of two executors, the one that
// finished (and journals its completion) is not run again when the
// superstep re-runs after the other one failed it; what it sent, yielded,
// wrote and annotated is re-applied. The other executor, without the
// option, runs again.
func TestCompletionJournal(t *testing.T) {
	var mu sync.Mutex
	runs := map[string]int{}
	count := func(id string) int {
		mu.Lock()
		defer mu.Unlock()
		runs[id]++
		return runs[id]
	}
	split := workflow.Func("split", func(c *workflow.Context, in string) error { return c.Send(in) })
	a := workflow.Func("a", func(c *workflow.Context, in string) error {
		n := count("a")
		if err := c.Set("a-key", fmt.Sprintf("a%d", n)); err != nil {
			return err
		}
		c.Annotate(n)
		if err := c.Yield(fmt.Sprintf("a saw %s (%d)", in, n)); err != nil {
			return err
		}
		return c.Send(fmt.Sprintf("from a %d", n))
	}, workflow.WithCompletionJournal())
	b := workflow.Func("b", func(c *workflow.Context, in string) error {
		if count("b") == 1 {
			return errors.New("b crashed")
		}
		return c.Send("from b")
	})
	join := workflow.Func("join", func(c *workflow.Context, parts []any) error {
		v, _, err := workflow.GetState[string](c, "a-key")
		if err != nil {
			return err
		}
		return c.Yield(fmt.Sprint(parts, " ", v))
	})
	wf, err := workflow.NewBuilder("completion").SetStart(split).
		AddFanOut(split, []workflow.Executor{a, b}).
		AddFanIn([]workflow.Executor{a, b}, join).
		Outputs(a, join).Build()
	if err != nil {
		t.Fatal(err)
	}
	j := &memJournal{}
	ctx := workflow.WithJournal(t.Context(), j)
	run := func() ([]string, []any, error) {
		r, err := wf.NewRun("run-1", "go")
		if err != nil {
			t.Fatal(err)
		}
		var outs []string
		var notes []any
		err = r.Run(ctx, func(_ context.Context, s *workflow.Step) error {
			for _, e := range s.Events {
				if o, ok := e.(workflow.Output); ok {
					outs = append(outs, o.Value.(string))
				}
			}
			for _, a := range s.Annotations {
				notes = append(notes, a.Value)
			}
			return nil
		}, nil)
		return outs, notes, err
	}
	if _, _, err := run(); err == nil {
		t.Fatal("the first run succeeded; b should have failed it")
	}
	outs, notes, err := run()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a saw go (1)", "[from a 1 from b] a1"}
	if fmt.Sprint(outs) != fmt.Sprint(want) || runs["a"] != 1 || runs["b"] != 2 {
		t.Fatalf("outputs %q, runs %v; want %q with a run once and b twice", outs, runs, want)
	}
	if len(notes) != 1 || fmt.Sprint(notes[0]) != "1" {
		t.Fatalf("annotations %v, want a's [1] replayed", notes)
	}
	if len(j.calls) != 1 || j.calls[0].Kind != "executor" || j.calls[0].Name != "a" || j.calls[0].Step != 2 {
		t.Fatalf("journaled %+v, want a's completion in step 2 only", j.calls)
	}
}

// soloSkipper is an executor that asks for its completion to be
// journaled only in a superstep it shares (workflow.SoloCompletionJournaler).
type soloSkipper struct{ workflow.Executor }

func (soloSkipper) JournalCompletion() bool      { return true }
func (soloSkipper) JournalCompletionAlone() bool { return false }

// TestCompletionJournal_Alone: an executor that asks for no completion
// record when alone gets none in a superstep it runs alone, and one in a
// superstep it shares; an executor that asked with WithCompletionJournal
// gets one alone too.
func TestCompletionJournal_Alone(t *testing.T) {
	first := soloSkipper{workflow.Func("first", func(c *workflow.Context, in string) error { return c.Send(in) })}
	a := soloSkipper{workflow.Func("a", func(c *workflow.Context, in string) error { return c.Send("a " + in) })}
	b := workflow.Func("b", func(c *workflow.Context, in string) error { return c.Send("b " + in) })
	last := workflow.Func("last", func(c *workflow.Context, parts []any) error { return c.Yield(fmt.Sprint(parts)) },
		workflow.WithCompletionJournal())
	wf, err := workflow.NewBuilder("alone").SetStart(first).
		AddFanOut(first, []workflow.Executor{a, b}).
		AddFanIn([]workflow.Executor{a, b}, last).
		Outputs(last).Build()
	if err != nil {
		t.Fatal(err)
	}
	j := &memJournal{}
	r, err := wf.NewRun("run-1", "go")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(workflow.WithJournal(t.Context(), j), func(context.Context, *workflow.Step) error { return nil }, nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range j.calls {
		got = append(got, fmt.Sprintf("%s %s@%d", c.Kind, c.Name, c.Step))
	}
	if want := []string{"executor a@2", "executor last@3"}; !slices.Equal(got, want) {
		t.Fatalf("journaled %q, want %q", got, want)
	}
}

// encodeCounted is a state value that counts its JSON encodings.
type encodeCounted struct{ Text string }

var encodeCount atomic.Int64

func (e encodeCounted) MarshalJSON() ([]byte, error) {
	encodeCount.Add(1)
	return json.Marshal(map[string]string{"text": e.Text})
}

func (e *encodeCounted) UnmarshalJSON(b []byte) error {
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	e.Text = m["text"]
	return nil
}

func init() { workflow.RegisterType[encodeCounted]("workflow_test.encodeCounted") }

// TestCompletionJournal_StateEncodedOnce: a state value an executor writes
// is encoded once, for its completion's journal record, and the
// checkpoint's part is those bytes (a hosted agent's conversation was
// encoded twice per turn). A re-run that replays the record encodes it
// not at all, and checkpoints the same bytes.
func TestCompletionJournal_StateEncodedOnce(t *testing.T) {
	failB := true
	a := workflow.Func("a", func(c *workflow.Context, in string) error {
		return c.Set("memory", encodeCounted{Text: "all " + in + " said so far"})
	}, workflow.WithCompletionJournal())
	b := workflow.Func("b", func(c *workflow.Context, in string) error {
		if failB {
			return errors.New("b crashed")
		}
		return nil
	})
	split := workflow.Func("split", func(c *workflow.Context, in string) error { return c.Send(in) })
	wf, err := workflow.NewBuilder("encode-once").SetStart(split).AddFanOut(split, []workflow.Executor{a, b}).Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := workflow.WithJournal(t.Context(), &memJournal{})
	run := func() (memory []byte, err error) {
		r, err := wf.NewRun("run-1", "go")
		if err != nil {
			t.Fatal(err)
		}
		err = r.Run(ctx, func(_ context.Context, s *workflow.Step) error {
			for _, p := range s.Checkpoint {
				if p.Name == "state/memory" {
					memory = p.Data
				}
			}
			return nil
		}, nil)
		return memory, err
	}
	encodeCount.Store(0)
	if _, err := run(); err == nil {
		t.Fatal("the first run succeeded; b should have failed it")
	}
	if n := encodeCount.Load(); n != 1 {
		t.Fatalf("a's write encoded %d times for its journal record, want 1", n)
	}
	failB = false
	memory, err := run()
	if err != nil {
		t.Fatal(err)
	}
	if n := encodeCount.Load(); n != 1 {
		t.Fatalf("the value was encoded %d times in all, want once: the replay and the checkpoint use the record's bytes", n)
	}
	if want := `workflow_test.encodeCounted` + "\n" + `{"text":"all go said so far"}`; string(memory) != want {
		t.Fatalf("checkpointed %q, want %q", memory, want)
	}

	// Without a replay: one encoding serves the record and the checkpoint.
	encodeCount.Store(0)
	ctx = workflow.WithJournal(t.Context(), &memJournal{})
	if _, err := run(); err != nil {
		t.Fatal(err)
	}
	if n := encodeCount.Load(); n != 1 {
		t.Fatalf("a run without a crash encoded the value %d times, want 1", n)
	}
}
