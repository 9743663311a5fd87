package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/superstep/superstep/workflow"
)

// The property: running a random workflow straight through gives the same
// outputs in the same order, the same checkpoints and the same executor
// invocation counts as running it one superstep at a time with checkpoint
// -> bytes -> fresh workflow instance -> restore at every boundary.

// Group kinds of a node's outgoing edges.
const (
	gDirect = iota
	gCond
	gFanOutAll
	gFanOutSel
	gSwitch
	gKinds
)

type pspec struct {
	n        int
	targets  [][]int // per node
	kind     []int   // per node
	flaky    []bool
	asks     []bool
	stateful []bool
	inter    []bool // yields are intermediate
	sub      int    // node that is a sub-workflow, -1 for none
	subAsks  bool
	fanIns   []pfanIn
	input    int
}

type pfanIn struct {
	sources []int
	target  int
}

func genSpec(t *rapid.T) *pspec {
	n := rapid.IntRange(1, 5).Draw(t, "n")
	s := &pspec{n: n, targets: make([][]int, n), kind: make([]int, n), sub: -1}
	for i := 1; i < n; i++ { // a spanning tree keeps every node reachable
		p := rapid.IntRange(0, i-1).Draw(t, "parent")
		s.targets[p] = append(s.targets[p], i)
	}
	for i := range n {
		if rapid.Bool().Draw(t, "extra") {
			s.targets[i] = append(s.targets[i], rapid.IntRange(0, n-1).Draw(t, "extraTarget"))
		}
		s.kind[i] = rapid.IntRange(0, gKinds-1).Draw(t, "kind")
		s.flaky = append(s.flaky, rapid.Float64Range(0, 1).Draw(t, "flaky") < 0.3)
		s.asks = append(s.asks, rapid.Float64Range(0, 1).Draw(t, "asks") < 0.3)
		s.stateful = append(s.stateful, rapid.Bool().Draw(t, "stateful"))
		s.inter = append(s.inter, rapid.Float64Range(0, 1).Draw(t, "inter") < 0.25)
	}
	if n > 1 && rapid.Bool().Draw(t, "hasSub") {
		s.sub = rapid.IntRange(1, n-1).Draw(t, "sub")
		s.subAsks = rapid.Bool().Draw(t, "subAsks")
	}
	for range rapid.IntRange(0, 2).Draw(t, "fanIns") {
		target := rapid.IntRange(0, n-1).Draw(t, "fanInTarget")
		if target == s.sub {
			continue
		}
		srcs := rapid.SliceOfNDistinct(rapid.IntRange(0, n-1), 1, 3, rapid.ID[int]).Draw(t, "fanInSources")
		s.fanIns = append(s.fanIns, pfanIn{sources: srcs, target: target})
	}
	s.input = rapid.IntRange(1, 4).Draw(t, "input")
	return s
}

// world counts invocations across workflow instances.
type world struct {
	mu     sync.Mutex
	counts map[string]int
}

func (w *world) inc(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts[id]++
}

// pnode is the executor of every generated node.
type pnode struct {
	id       string
	hasOut   bool
	flaky    bool
	asks     bool
	stateful bool
	other    string
	w        *world
	seen     int // per-run state when stateful
}

func (p *pnode) ID() string { return p.id }
func (p *pnode) InputTypes() []reflect.Type {
	return []reflect.Type{reflect.TypeFor[int](), reflect.TypeFor[[]any](), reflect.TypeFor[workflow.Answer[any]]()}
}
func (p *pnode) Retry() workflow.RetryPolicy { return workflow.RetryPolicy{Retries: 1} }
func (p *pnode) NewInstance() workflow.Executor {
	cp := *p
	cp.seen = 0
	return &cp
}
func (p *pnode) Snapshot() ([]byte, error) {
	if !p.stateful {
		return []byte{}, nil
	}
	return []byte(strconv.Itoa(p.seen)), nil
}
func (p *pnode) Restore(b []byte) (err error) {
	if !p.stateful {
		return nil
	}
	p.seen, err = strconv.Atoi(string(b))
	return err
}

// interrupted counts supersteps cancelled from inside by the property.
var interrupted atomic.Int64

// cancelKey carries a func that cancels the run when called with the
// current step, to interrupt a superstep from inside.
type cancelKey struct{}

func (p *pnode) Handle(c *workflow.Context, msg any) error {
	p.w.inc(p.id)
	if cancel, ok := c.Context().Value(cancelKey{}).(func(int64)); ok {
		cancel(c.Step())
	}
	prev, _, _ := workflow.GetState[int](c, "c/"+p.id)
	other, _, _ := workflow.GetState[int](c, "c/"+p.other)
	if err := c.Set("c/"+p.id, prev+1); err != nil {
		return err
	}
	if p.flaky && c.Attempt() == 1 && c.Step()%2 == 0 {
		return fmt.Errorf("flaky %s", p.id)
	}
	switch m := msg.(type) {
	case int:
		if p.stateful {
			p.seen += m
		}
		if p.asks && m%3 == 1 {
			_, err := workflow.RequestInput[int](c, "", m)
			return err
		}
		if m <= 0 || !p.hasOut {
			return c.Yield(fmt.Sprintf("%s n=%d prev=%d other=%d seen=%d", p.id, m, prev, other, p.seen))
		}
		return c.Send(m - 1)
	case []any:
		top := 0
		for _, v := range m {
			top = max(top, v.(int))
		}
		if err := c.Yield(fmt.Sprintf("%s batch=%v seen=%d", p.id, m, p.seen)); err != nil || !p.hasOut || top <= 0 {
			return err
		}
		return c.Send(top - 1)
	case workflow.Answer[any]:
		v := m.Value.(int)
		if err := c.Yield(fmt.Sprintf("%s answer=%d", p.id, v)); err != nil || !p.hasOut {
			return err
		}
		return c.Send(v - 1)
	}
	return fmt.Errorf("unexpected %T", msg)
}

// buildInner returns the sub-workflow: in -> out, in may ask for input.
func buildInner(asks bool, w *world) (*workflow.Workflow, error) {
	in := workflow.Handlers("in", []workflow.Handler{
		workflow.On(func(c *workflow.Context, n int) error {
			w.inc("sub/in")
			if n <= 0 {
				return nil // ends the chain
			}
			if asks && n%2 == 0 {
				_, err := workflow.RequestInput[int](c, "", n)
				return err
			}
			return c.Send(n)
		}),
		workflow.On(func(c *workflow.Context, a workflow.Answer[any]) error {
			w.inc("sub/in")
			return c.Send(a.Value.(int))
		}),
	})
	out := workflow.Func("out", func(c *workflow.Context, n int) error {
		w.inc("sub/out")
		return c.Yield(n - 1)
	})
	return workflow.NewBuilder("inner").SetStart(in).AddEdge(in, out).Outputs(out).Build()
}

func buildSpec(s *pspec, w *world) (*workflow.Workflow, error) {
	ids := make([]string, s.n)
	for i := range ids {
		ids[i] = fmt.Sprintf("n%d", i)
	}
	hasOut := make([]bool, s.n)
	for i := range s.n {
		hasOut[i] = len(s.targets[i]) > 0
	}
	for _, f := range s.fanIns {
		for _, src := range f.sources {
			hasOut[src] = true
		}
	}
	execs := make([]workflow.Executor, s.n)
	for i := range s.n {
		if i == s.sub {
			inner, err := buildInner(s.subAsks, w)
			if err != nil {
				return nil, err
			}
			execs[i] = inner.AsExecutor(ids[i])
			continue
		}
		execs[i] = &pnode{id: ids[i], hasOut: hasOut[i], flaky: s.flaky[i], asks: s.asks[i],
			stateful: s.stateful[i], other: ids[(i+1)%s.n], w: w}
	}
	b := workflow.NewBuilder("prop").SetStart(execs[0])
	for i := range s.n {
		addGroup(b, s.kind[i], execs[i], pick(execs, s.targets[i]))
		if s.inter[i] {
			b.Intermediate(execs[i])
		} else {
			b.Outputs(execs[i])
		}
	}
	for _, f := range s.fanIns {
		b.AddFanIn(pick(execs, f.sources), execs[f.target])
	}
	return b.Build()
}

func pick(execs []workflow.Executor, idx []int) []workflow.Executor {
	out := make([]workflow.Executor, len(idx))
	for i, j := range idx {
		out[i] = execs[j]
	}
	return out
}

func mod(msg any, k int) int {
	n, _ := msg.(int)
	return ((n % k) + k) % k
}

func addGroup(b *workflow.Builder, kind int, from workflow.Executor, ts []workflow.Executor) {
	k := len(ts)
	if k == 0 {
		return
	}
	switch kind {
	case gDirect:
		for _, t := range ts {
			b.AddEdge(from, t)
		}
	case gCond:
		for j, t := range ts {
			b.AddEdge(from, t, workflow.When(func(m any) bool { return mod(m, k) == j }))
		}
	case gFanOutAll:
		b.AddFanOut(from, ts)
	case gFanOutSel:
		b.AddFanOut(from, ts, workflow.Select(func(m any, ts []workflow.Executor) []workflow.Executor { return ts[mod(m, k) : mod(m, k)+1] }))
	case gSwitch:
		var cases []workflow.Case
		for j, t := range ts[:k-1] {
			cases = append(cases, workflow.CaseType(t, func(m any) bool { return mod(m, k) == j }))
		}
		b.AddSwitch(from, cases, ts[k-1])
	}
}

// trace is what a run published, step by step.
type trace struct {
	lines       []string
	checkpoints [][]workflow.Part
}

func (tr *trace) commit(_ context.Context, s *workflow.Step) error {
	for _, e := range s.Events {
		switch e := e.(type) {
		case workflow.Output:
			tr.lines = append(tr.lines, fmt.Sprintf("%d out %s %v", s.Number, e.ExecutorID, e.Value))
		case workflow.Intermediate:
			tr.lines = append(tr.lines, fmt.Sprintf("%d mid %s %v", s.Number, e.ExecutorID, e.Value))
		case workflow.RequestInfo:
			tr.lines = append(tr.lines, fmt.Sprintf("%d ask %s %s %v", s.Number, e.Request.ExecutorID, e.Request.ID, e.Request.Payload))
		}
	}
	tr.lines = append(tr.lines, fmt.Sprintf("%d %s %v", s.Number, s.Status, s.Err))
	tr.checkpoints = append(tr.checkpoints, s.Checkpoint)
	return nil
}

// answerAll answers every pending request with its payload.
func answerAll(t *rapid.T, run *workflow.Run) {
	for _, p := range run.Pending() {
		if err := run.Respond(p.ID, p.Payload); err != nil {
			t.Fatalf("respond %s: %v", p.ID, err)
		}
	}
}

func runStraight(t *rapid.T, s *pspec) (*trace, map[string]int) {
	w := &world{counts: map[string]int{}}
	wf, err := buildSpec(s, w)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	run, err := wf.NewRun("prop-run", s.input)
	if err != nil {
		t.Fatal(err)
	}
	tr := &trace{}
	for round := 0; ; round++ {
		if err := run.Run(context.Background(), tr.commit, nil); err != nil {
			t.Fatalf("run: %v", err)
		}
		if run.Status() != workflow.Idle || round > 50 {
			break
		}
		answerAll(t, run)
	}
	return tr, w.counts
}

func runRestoring(t *rapid.T, s *pspec) (*trace, map[string]int) {
	w := &world{counts: map[string]int{}}
	wf, err := buildSpec(s, w)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	run, err := wf.NewRun("prop-run", s.input)
	if err != nil {
		t.Fatal(err)
	}
	tr := &trace{}
	for range 2000 {
		parts, err := run.Checkpoint()
		if err != nil {
			t.Fatal(err)
		}
		blob := workflow.JoinParts(parts)
		fresh, err := buildSpec(s, w)
		if err != nil {
			t.Fatal(err)
		}
		split, err := workflow.SplitParts(blob)
		if err != nil {
			t.Fatal(err)
		}
		if run, err = fresh.Restore("prop-run", split); err != nil {
			t.Fatalf("restore at step %d: %v", run.StepNumber(), err)
		}
		switch run.Status() {
		case workflow.Idle:
			answerAll(t, run)
			continue
		case workflow.Completed, workflow.Failed:
			return tr, w.counts
		}
		for ev, err := range run.Events(context.Background(), tr.commit, nil) {
			if err != nil {
				t.Fatalf("step: %v", err)
			}
			if _, ok := ev.(workflow.Status); ok {
				break // one superstep, then checkpoint and restore again
			}
		}
	}
	t.Fatal("restoring run did not finish")
	return nil, nil
}

// runFailingCommits runs straight through, but the commit of each step in
// fail is refused once and the superstep cancel names is cancelled once
// from inside an executor; the run must rewind and redo those steps.
func runFailingCommits(t *rapid.T, s *pspec, fail map[int64]bool, cancelAt int64) *trace {
	wf, err := buildSpec(s, &world{counts: map[string]int{}})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	run, err := wf.NewRun("prop-run", s.input)
	if err != nil {
		t.Fatal(err)
	}
	tr := &trace{}
	refused := errors.New("refused")
	commit := func(ctx context.Context, st *workflow.Step) error {
		if fail[st.Number] {
			delete(fail, st.Number)
			return refused
		}
		return tr.commit(ctx, st)
	}
	var pending atomic.Int64 // the step still to cancel, -1 once done
	pending.Store(cancelAt)
	for range 1000 {
		ctx, cancel := context.WithCancel(context.Background())
		ctx = context.WithValue(ctx, cancelKey{}, func(step int64) {
			if pending.CompareAndSwap(step, -1) {
				cancel()
			}
		})
		err := run.Run(ctx, commit, nil)
		cancel()
		switch {
		case errors.Is(err, context.Canceled):
			interrupted.Add(1)
			continue
		case errors.Is(err, refused):
			continue
		case err != nil:
			t.Fatalf("run: %v", err)
		case run.Status() == workflow.Idle:
			answerAll(t, run)
		default:
			return tr
		}
	}
	t.Fatal("run with failing commits did not finish")
	return nil
}

func TestProperty_RestoreAtEveryBoundary(t *testing.T) {
	features := map[string]int{}
	defer func() {
		t.Logf("cases exercising each feature: %v; supersteps cancelled: %d", features, interrupted.Load())
	}()
	rapid.Check(t, func(t *rapid.T) {
		s := genSpec(t)
		straight, c1 := runStraight(t, s)
		for _, f := range []string{"batch=", " ask ", "answer=", "sub/", " mid "} {
			for _, l := range straight.lines {
				if strings.Contains(l, f) {
					features[f]++
					break
				}
			}
		}
		if s.sub >= 0 && c1["sub/in"] > 0 {
			features["sub-workflow"]++
		}
		restored, c2 := runRestoring(t, s)
		if !reflect.DeepEqual(straight.lines, restored.lines) {
			t.Fatalf("traces differ:\nstraight: %q\nrestored: %q", straight.lines, restored.lines)
		}
		if !reflect.DeepEqual(c1, c2) {
			t.Fatalf("invocation counts differ: %v vs %v", c1, c2)
		}
		if !reflect.DeepEqual(straight.checkpoints, restored.checkpoints) {
			t.Fatalf("checkpoints differ")
		}
		fail := map[int64]bool{}
		for _, n := range rapid.SliceOfN(rapid.Int64Range(1, int64(len(straight.checkpoints))), 0, 3).Draw(t, "failCommits") {
			fail[n] = true
		}
		cancelAt := rapid.Int64Range(0, int64(len(straight.checkpoints))).Draw(t, "cancelAt")
		rewound := runFailingCommits(t, s, fail, cancelAt)
		if !reflect.DeepEqual(straight.lines, rewound.lines) || !reflect.DeepEqual(straight.checkpoints, rewound.checkpoints) {
			t.Fatalf("refused commits changed the run:\nstraight: %q\nrewound:  %q", straight.lines, rewound.lines)
		}
	})
}
