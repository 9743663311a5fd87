package workflow

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
)

// Builder assembles a Workflow. Its methods never panic on mistakes: they
// record them, and Build reports every problem at once. A Builder is not
// safe for concurrent use.
type Builder struct {
	name         string
	start        Executor
	execs        []Executor
	byID         map[string]Executor
	edges        []*edge
	outputs      []string
	intermediate []string
	errs         []error
	seq          int // edge groups added, for ids in messages
}

// nextID returns the id of the next edge group of kind.
func (b *Builder) nextID(kind string) string {
	b.seq++
	return fmt.Sprintf("%s#%d", kind, b.seq)
}

// NewBuilder returns a Builder for a workflow called name.
func NewBuilder(name string) *Builder {
	return &Builder{name: name, byID: map[string]Executor{}}
}

// AddExecutor adds ex to the graph. Executors named in edges and SetStart
// are added implicitly; adding the same executor twice is harmless, adding
// two executors with one id is an error.
func (b *Builder) AddExecutor(ex Executor) *Builder {
	b.add(ex, "AddExecutor")
	return b
}

// add registers ex and returns its id, or "" after recording a problem.
func (b *Builder) add(ex Executor, where string) string {
	if ex == nil || (reflect.ValueOf(ex).Kind() == reflect.Pointer && reflect.ValueOf(ex).IsNil()) {
		b.errs = append(b.errs, fmt.Errorf("%s: nil executor", where))
		return ""
	}
	id := ex.ID()
	if id == "" {
		b.errs = append(b.errs, fmt.Errorf("%s: executor with empty id (%T)", where, ex))
		return ""
	}
	if old, ok := b.byID[id]; ok {
		if old != ex {
			b.errs = append(b.errs, fmt.Errorf("executor %q: duplicate id (%T and %T)", id, old, ex))
		}
		return id
	}
	b.byID[id] = ex
	b.execs = append(b.execs, ex)
	return id
}

// SetStart makes ex the executor that receives the run's input in superstep 1.
func (b *Builder) SetStart(ex Executor) *Builder {
	if b.add(ex, "SetStart") != "" {
		b.start = ex
	}
	return b
}

// AddEdge adds a direct edge: messages sent by from go to to (with When,
// only those it accepts).
func (b *Builder) AddEdge(from, to Executor, opts ...EdgeOption) *Builder {
	id := b.nextID("edge")
	f, t := b.add(from, id+" source"), b.add(to, id+" target")
	cond, sel := b.edgeOptions(id, opts)
	if sel != nil {
		b.errs = append(b.errs, fmt.Errorf("%s: Select applies to AddFanOut, not AddEdge", id))
	}
	if f != "" && t != "" {
		id = fmt.Sprintf("%s(%s->%s)", id, f, t)
		b.edges = append(b.edges, &edge{kind: edgeDirect, id: id, from: []string{f}, to: []string{t}, cond: cond})
	}
	return b
}

// edgeOptions combines opts: the conjunction of their conditions, and
// their selector (at most one).
func (b *Builder) edgeOptions(id string, opts []EdgeOption) (cond func(any) bool, sel func(targets []Executor) func(any, []string) []string) {
	var conds []func(any) bool
	for _, o := range opts {
		if o.cond != nil {
			conds = append(conds, o.cond)
		}
		if o.selFor != nil {
			if sel != nil {
				b.errs = append(b.errs, fmt.Errorf("%s: more than one Select", id))
			}
			sel = o.selFor
		}
	}
	switch len(conds) {
	case 0:
	case 1:
		cond = conds[0]
	default:
		cond = func(msg any) bool {
			for _, c := range conds {
				if !c(msg) {
					return false
				}
			}
			return true
		}
	}
	return cond, sel
}

// AddChain adds direct edges from each executor to the next.
func (b *Builder) AddChain(execs ...Executor) *Builder {
	if len(execs) < 2 {
		b.errs = append(b.errs, fmt.Errorf("chain: needs at least two executors, got %d", len(execs)))
	}
	for i := 0; i+1 < len(execs); i++ {
		b.AddEdge(execs[i], execs[i+1])
	}
	return b
}

// AddFanOut sends each message from from to every target (with Select, to
// those it picks; with When, only the messages it accepts).
func (b *Builder) AddFanOut(from Executor, targets []Executor, opts ...EdgeOption) *Builder {
	id := b.nextID("fanout")
	f := b.add(from, id+" source")
	ts := b.addAll(targets, id+" target")
	if len(targets) == 0 {
		b.errs = append(b.errs, fmt.Errorf("%s: no targets", id))
	}
	cond, sel := b.edgeOptions(id, opts)
	if f != "" && ts != nil {
		id = fmt.Sprintf("%s(%s)", id, f)
		e := &edge{kind: edgeFanOut, id: id, from: []string{f}, to: ts, cond: cond}
		if sel != nil {
			e.selector = sel(slices.Clone(targets))
		}
		b.edges = append(b.edges, e)
	}
	return b
}

// AddSwitch sends each message from from to the first case it matches, or
// to def when none does. A nil def makes an unmatched message a run error.
func (b *Builder) AddSwitch(from Executor, cases []Case, def Executor) *Builder {
	id := b.nextID("switch")
	f := b.add(from, id+" source")
	e := &edge{kind: edgeSwitch, from: []string{f}}
	ok := f != ""
	for i, c := range cases {
		t := b.add(c.to, fmt.Sprintf("%s case %d", id, i))
		ok = ok && t != "" && c.when != nil
		if c.when == nil {
			b.errs = append(b.errs, fmt.Errorf("%s case %d: not made by CaseType", id, i))
		}
		e.to = append(e.to, t)
		e.cases = append(e.cases, c.when)
		e.caseType = append(e.caseType, c.typ)
	}
	if def != nil {
		e.def = b.add(def, id+" default")
		ok = ok && e.def != ""
	}
	if len(cases) == 0 && def == nil {
		b.errs = append(b.errs, fmt.Errorf("%s: no cases and no default", id))
		ok = false
	}
	if ok {
		e.id = fmt.Sprintf("%s(%s)", id, f)
		b.edges = append(b.edges, e)
	}
	return b
}

// AddFanIn adds a barrier: messages from sources are buffered (in the
// checkpoint) until every source has sent at least one since the last
// delivery; then target receives all of them as one []any, ordered by
// source (in the order given) and, per source, in send order.
func (b *Builder) AddFanIn(sources []Executor, target Executor) *Builder {
	id := b.nextID("fanin")
	fs := b.addAll(sources, id+" source")
	t := b.add(target, id+" target")
	if len(sources) == 0 {
		b.errs = append(b.errs, fmt.Errorf("%s: no sources", id))
	}
	for i, s := range fs {
		if slices.Index(fs, s) != i {
			b.errs = append(b.errs, fmt.Errorf("%s: source %q listed twice", id, s))
			fs = nil
			break
		}
	}
	if fs != nil && t != "" {
		id = fmt.Sprintf("%s(->%s)", id, t)
		b.edges = append(b.edges, &edge{kind: edgeFanIn, id: id, from: fs, to: []string{t}})
	}
	return b
}

// addAll adds execs and returns their ids, or nil if any was invalid.
func (b *Builder) addAll(execs []Executor, where string) []string {
	ids := make([]string, 0, len(execs))
	ok := true
	for i, ex := range execs {
		id := b.add(ex, fmt.Sprintf("%s %d", where, i))
		ok = ok && id != ""
		ids = append(ids, id)
	}
	if !ok || len(ids) == 0 {
		return nil
	}
	return ids
}

// Outputs declares the executors whose yielded values are the workflow's
// outputs (Output events). Like edges, it takes the executors themselves
// (and adds them to the graph when they are not yet).
func (b *Builder) Outputs(execs ...Executor) *Builder {
	for i, ex := range execs {
		if id := b.add(ex, fmt.Sprintf("Outputs %d", i)); id != "" {
			b.outputs = append(b.outputs, id)
		}
	}
	return b
}

// Intermediate declares the executors whose yielded values are intermediate
// results (Intermediate events): progress, not part of the answer.
func (b *Builder) Intermediate(execs ...Executor) *Builder {
	for i, ex := range execs {
		if id := b.add(ex, fmt.Sprintf("Intermediate %d", i)); id != "" {
			b.intermediate = append(b.intermediate, id)
		}
	}
	return b
}

// Build validates the graph and returns the immutable Workflow. Every
// problem found is reported, joined with errors.Join; each wraps ErrBuild
// and names the executor or edge at fault.
func (b *Builder) Build() (*Workflow, error) {
	errs := slices.Clone(b.errs)
	if b.start == nil {
		errs = append(errs, errors.New("no start executor (call SetStart)"))
	}
	errs = append(errs, b.checkDeclared()...)
	w := b.assemble()
	if b.start != nil {
		errs = append(errs, w.checkReachable()...)
	}
	errs = append(errs, w.checkTypes()...)
	errs = append(errs, w.checkResults()...)
	errs = append(errs, w.checkRegistered()...)
	errs = append(errs, w.checkInstances()...)
	if len(errs) > 0 {
		for i, e := range errs {
			errs[i] = fmt.Errorf("%w: %w", ErrBuild, e)
		}
		return nil, errors.Join(errs...)
	}
	w.fingerprint, w.legacyFingerprint = w.computeFingerprint(false), w.computeFingerprint(true)
	return w, nil
}

// checkDeclared validates the Outputs and Intermediate declarations.
func (b *Builder) checkDeclared() []error {
	var errs []error
	for _, id := range b.outputs {
		if slices.Contains(b.intermediate, id) {
			errs = append(errs, fmt.Errorf("executor %q: declared both output and intermediate", id))
		}
	}
	return errs
}

// assemble builds the Workflow value from the builder's parts.
func (b *Builder) assemble() *Workflow {
	w := &Workflow{
		name: b.name, execs: map[string]Executor{}, index: map[string]int{},
		out: map[string][]*edge{}, yields: map[string]yieldKind{},
	}
	if b.start != nil {
		w.start = b.start.ID()
	}
	for i, ex := range b.execs {
		w.order = append(w.order, ex.ID())
		w.index[ex.ID()] = i
		w.execs[ex.ID()] = ex
	}
	for _, e := range b.edges {
		if e.kind == edgeFanIn {
			e.fanIn = len(w.fanIns)
			w.fanIns = append(w.fanIns, e)
		}
		w.edges = append(w.edges, e)
		for _, f := range e.from {
			w.out[f] = append(w.out[f], e)
		}
	}
	for _, id := range b.outputs {
		w.yields[id] = yieldOutput
	}
	for _, id := range b.intermediate {
		w.yields[id] = yieldIntermediate
	}
	return w
}

// checkReachable reports executors no path from the start reaches.
func (w *Workflow) checkReachable() []error {
	seen := map[string]bool{w.start: true}
	stack := []string{w.start}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, e := range w.out[id] {
			for _, t := range e.allTargets() {
				if !seen[t] {
					seen[t] = true
					stack = append(stack, t)
				}
			}
		}
	}
	var errs []error
	for _, id := range w.order {
		if !seen[id] {
			errs = append(errs, fmt.Errorf("executor %q: unreachable from start %q", id, w.start))
		}
	}
	return errs
}

// checkTypes reports edges whose source declares message types that no
// target can handle, and fan-in targets that cannot take a []any.
func (w *Workflow) checkTypes() []error {
	var errs []error
	for _, e := range w.edges {
		if e.kind == edgeFanIn {
			if !executorAccepts(w.execs[e.to[0]], reflect.TypeFor[[]any]()) {
				errs = append(errs, fmt.Errorf("edge %s: target %q does not handle []any", e.id, e.to[0]))
			}
			continue
		}
		for i, t := range e.caseType {
			if t != nil && !executorAccepts(w.execs[e.to[i]], t) {
				errs = append(errs, fmt.Errorf("edge %s: case %d target %q does not handle %v", e.id, i, e.to[i], t))
			}
		}
		ot, ok := w.execs[e.from[0]].(outputTyper)
		if !ok || len(ot.OutputTypes()) == 0 {
			continue
		}
		for _, t := range e.allTargets() {
			if !acceptsAny(w.execs[t], ot.OutputTypes()) {
				errs = append(errs, fmt.Errorf("edge %s: target %q handles none of %v sent by %q", e.id, t, ot.OutputTypes(), e.from[0]))
			}
		}
	}
	return errs
}

// checkResults reports Map executors whose result would go nowhere: no
// edge to send it on, and not declared to yield it.
func (w *Workflow) checkResults() []error {
	var errs []error
	for _, id := range w.order {
		if fe, ok := w.execs[id].(*funcExecutor); ok && fe.result && len(w.out[id]) == 0 && w.yields[id] == yieldNone {
			errs = append(errs, fmt.Errorf("executor %q: its result goes nowhere (no edge from it, not in Outputs or Intermediate)", id))
		}
	}
	return errs
}

// checkRegistered reports message types of executors (what they handle,
// what Map returns) that have no checkpoint name: their values could not
// be checkpointed. Interface types hold values of other types, checked
// when they are sent.
func (w *Workflow) checkRegistered() []error {
	var errs []error
	for _, id := range w.order {
		var types []reflect.Type
		if it, ok := w.execs[id].(InputTyper); ok {
			types = append(types, it.InputTypes()...)
		}
		if ot, ok := w.execs[id].(outputTyper); ok {
			types = append(types, ot.OutputTypes()...)
		}
		for _, t := range types {
			if t == nil || t.Kind() == reflect.Interface {
				continue
			}
			if _, ok := registeredName(t); !ok {
				errs = append(errs, fmt.Errorf("executor %q: %w", id, errUnregistered(t)))
			}
		}
	}
	return errs
}

// acceptsAny reports whether ex handles at least one of types.
func acceptsAny(ex Executor, types []reflect.Type) bool {
	for _, t := range types {
		if executorAccepts(ex, t) {
			return true
		}
	}
	return false
}

// checkInstances rejects Snapshotter executors without Instancer: their
// state would be shared by every run of the workflow.
func (w *Workflow) checkInstances() []error {
	var errs []error
	for _, id := range w.order {
		ex := w.execs[id]
		_, snap := ex.(Snapshotter)
		in, inst := ex.(Instancer)
		switch {
		case snap && !inst:
			errs = append(errs, fmt.Errorf("executor %q: Snapshotter without Instancer would share its state across runs", id))
		case inst:
			if got := in.NewInstance(); got == nil || got.ID() != id {
				errs = append(errs, fmt.Errorf("executor %q: NewInstance must return an executor with the same id", id))
			}
		}
	}
	return errs
}
