package examples

import (
	"errors"
	"fmt"
	"strings"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/workflow"
)

// Model names of the demo workflows.
const (
	Echo       = "demo.echo"
	TwoOutputs = "demo.two-outputs"
	Silent     = "demo.silent"
	Approval   = "demo.approval"
	Fanout     = "demo.fanout"
	Stream     = "demo.stream"
)

// Defaults and bounds of the demos' metadata.
const (
	SilentStepsDefault   = 5
	FanoutWorkersDefault = 4
	FanoutWorkersMax     = 64
)

// SilentTick is the message demo.silent passes from superstep to superstep.
type SilentTick struct {
	Steps int // N: silent supersteps before the output
}

// FanoutTask is the message demo.fanout's split sends to its workers.
type FanoutTask struct {
	Workers int // K
}

// FanoutResult is what worker Index sends to the join.
type FanoutResult struct {
	Index   int
	Workers int
	Name    string
}

// Decision is demo.approval's answer: "approve" or "reject". Its Validate
// makes the host refuse any other answer with a 400 while the request
// stays pending (workflow.AnswerValidator).
type Decision string

// The decisions demo.approval accepts.
const (
	Approve Decision = "approve"
	Reject  Decision = "reject"
)

// Validate accepts approve and reject.
func (d Decision) Validate() error {
	if d != Approve && d != Reject {
		return fmt.Errorf("the answer must be %q or %q, got %q", Approve, Reject, truncate(string(d), 64))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

func init() {
	workflow.RegisterType[Decision]("examples.Decision")
	workflow.RegisterType[SilentTick]("examples.SilentTick")
	workflow.RegisterType[FanoutTask]("examples.FanoutTask")
	workflow.RegisterType[FanoutResult]("examples.FanoutResult")
	workflow.RegisterType[[]FanoutResult]("examples.[]FanoutResult")
}

// Workflows returns the demo workflows by model name.
func Workflows(opts *Options) (map[string]*workflow.Workflow, error) {
	iv := invocation{}
	if opts != nil {
		iv.opts = *opts
	}
	builders := map[string]func(invocation) (*workflow.Workflow, error){
		Echo: echo, TwoOutputs: twoOutputs, Silent: silent, Approval: approval, Fanout: fanout, Stream: stream,
	}
	out := map[string]*workflow.Workflow{}
	var errs []error
	for name, build := range builders {
		wf, err := build(iv)
		if err != nil {
			errs = append(errs, fmt.Errorf("examples: %s: %w", name, err))
			continue
		}
		out[name] = wf
	}
	return out, errors.Join(errs...)
}

// Names returns the demo model names in a fixed order.
func Names() []string { return []string{Echo, TwoOutputs, Silent, Approval, Fanout, Stream} }

// echo: one superstep, yields the input text.
func echo(iv invocation) (*workflow.Workflow, error) {
	ex := workflow.Map("echo", func(c *workflow.Context, in string) (string, error) {
		return in, iv.run(c, nil)
	})
	return workflow.NewBuilder(Echo).SetStart(ex).Outputs(ex).Build()
}

// twoOutputs: superstep 1 silent; superstep 2 yields first-2 and second-2;
// superstep 3 yields done.
func twoOutputs(iv invocation) (*workflow.Workflow, error) {
	start := workflow.Map("start", func(c *workflow.Context, in string) (string, error) {
		return in, iv.run(c, nil)
	})
	pair := workflow.Func("pair", func(c *workflow.Context, in string) error {
		return iv.run(c, func() error {
			return errors.Join(c.Yield(fmt.Sprintf("first-%d", c.Step())),
				c.Yield(fmt.Sprintf("second-%d", c.Step())), c.Send(in))
		})
	})
	finish := workflow.Map("finish", func(c *workflow.Context, _ string) (string, error) {
		return "done", iv.run(c, nil)
	})
	return workflow.NewBuilder(TwoOutputs).SetStart(start).AddChain(start, pair, finish).
		Outputs(pair, finish).Build()
}

// silent: supersteps 1..N silent, superstep N+1 yields "done after N". N
// is capped so that the run fits the host's superstep limit (N+1 <= limit).
func silent(iv invocation) (*workflow.Workflow, error) {
	loop := workflow.Func("loop", func(c *workflow.Context, t SilentTick) error {
		return iv.run(c, func() error {
			if c.Step() > int64(t.Steps) {
				return c.Yield(fmt.Sprintf("done after %d", t.Steps))
			}
			return c.Send(t)
		})
	})
	start := workflow.Func("start", func(c *workflow.Context, _ string) error {
		inv := c.Invocation()
		n, err := workflow.Metadata(inv, "steps", SilentStepsDefault)
		if err != nil || n < 0 {
			n = SilentStepsDefault
		}
		if inv.MaxSupersteps > 0 && int64(n) > inv.MaxSupersteps-1 {
			n = int(inv.MaxSupersteps - 1)
		}
		return iv.run(c, func() error {
			if n == 0 {
				return c.Yield("done after 0")
			}
			return c.Send(SilentTick{Steps: n})
		})
	})
	return workflow.NewBuilder(Silent).SetStart(start).AddEdge(start, loop).AddEdge(loop, loop).
		Outputs(start, loop).Build()
}

// approval: superstep 1 asks for approval (function_call "approve" with
// arguments {"question": input}); the answer "approve" or "reject" yields
// "approved" or "rejected"; any other answer is refused (Decision).
func approval(iv invocation) (*workflow.Workflow, error) {
	ask := workflow.On(func(c *workflow.Context, in string) error {
		return iv.run(c, func() error {
			_, err := workflow.RequestInput[Decision](c, "", map[string]string{"question": in})
			return err
		})
	})
	decide := func(c *workflow.Context, d Decision) error {
		return iv.run(c, func() error {
			switch d {
			case Approve:
				return c.Yield("approved")
			case Reject:
				return c.Yield("rejected")
			}
			return fmt.Errorf("examples: demo.approval: %w", d.Validate())
		})
	}
	answer := workflow.On(func(c *workflow.Context, a workflow.Answer[Decision]) error { return decide(c, a.Value) })
	// Requests stored before Decision existed want a string.
	legacy := workflow.On(func(c *workflow.Context, a workflow.Answer[string]) error { return decide(c, Decision(a.Value)) })
	ex := workflow.Handlers("approve", []workflow.Handler{ask, answer, legacy})
	return workflow.NewBuilder(Approval).SetStart(ex).Outputs(ex).Build()
}

// fanout: split fans out to K workers (K = metadata.workers); worker i
// sends worker-i; the join yields "worker-0,worker-1,..." in worker order.
func fanout(iv invocation) (*workflow.Workflow, error) {
	split := workflow.Map("split", func(c *workflow.Context, _ string) (FanoutTask, error) {
		k, err := workflow.Metadata(c.Invocation(), "workers", FanoutWorkersDefault)
		if err == nil && (k < 1 || k > FanoutWorkersMax) {
			err = fmt.Errorf("metadata.workers must be 1..%d, got %d", FanoutWorkersMax, k)
		}
		if err != nil {
			return FanoutTask{}, fmt.Errorf("examples: demo.fanout: %w", err)
		}
		return FanoutTask{Workers: k}, iv.run(c, nil)
	})
	join := workflow.Func("join", func(c *workflow.Context, res FanoutResult) error {
		return iv.run(c, func() error { return joinResult(c, res) })
	})
	workers := make([]workflow.Executor, FanoutWorkersMax)
	b := workflow.NewBuilder(Fanout).SetStart(split)
	for i := range workers {
		name := fmt.Sprintf("worker-%d", i)
		workers[i] = workflow.Map(name, func(c *workflow.Context, t FanoutTask) (FanoutResult, error) {
			return FanoutResult{Index: i, Workers: t.Workers, Name: name}, iv.run(c, nil)
		})
		b.AddEdge(workers[i], join)
	}
	b.AddFanOut(split, workers, workflow.Select(func(t FanoutTask, ws []workflow.Executor) []workflow.Executor {
		return ws[:t.Workers]
	}))
	return b.Outputs(join).Build()
}

// joinResult collects the workers' results in shared state (they arrive in
// one superstep, in worker order) and yields them once all K are in.
func joinResult(c *workflow.Context, res FanoutResult) error {
	got, _, err := workflow.GetState[[]FanoutResult](c, "fanout.results")
	if err != nil {
		return err
	}
	got = append(got, res)
	if len(got) < res.Workers {
		return c.Set("fanout.results", got)
	}
	names := make([]string, len(got))
	for i, r := range got {
		names[i] = r.Name
	}
	c.Delete("fanout.results")
	return c.Yield(strings.Join(names, ","))
}

// stream: superstep 1 streams the words of "<input> one two three" as live
// text deltas (agent.UpdateTextDelta, published at once in
// metadata.publication=live) and yields the whole text; superstep 2
// streams and yields "done".
func stream(iv invocation) (*workflow.Workflow, error) {
	reply := workflow.Map("reply", func(c *workflow.Context, in string) (string, error) {
		text := in + " one two three"
		return text, iv.run(c, func() error { return emitWords(c, text) })
	})
	finish := workflow.Map("finish", func(c *workflow.Context, _ string) (string, error) {
		return "done", iv.run(c, func() error { return emitWords(c, "done") })
	})
	return workflow.NewBuilder(Stream).SetStart(reply).AddEdge(reply, finish).Outputs(reply, finish).Build()
}

// emitWords emits text word by word as live text deltas.
func emitWords(c *workflow.Context, text string) error {
	words := strings.SplitAfter(text, " ")
	for _, w := range words {
		if err := c.EmitLive(agent.Update{Kind: agent.UpdateTextDelta, Text: w}); err != nil {
			return err
		}
	}
	return nil
}
