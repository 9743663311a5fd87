package workflow

import (
	"fmt"
	"reflect"
	"slices"
)

// edgeKind distinguishes the routing rules of an edge group.
type edgeKind int

const (
	edgeDirect edgeKind = iota + 1
	edgeFanOut
	edgeSwitch
	edgeFanIn
)

// String names the kind for messages and the fingerprint.
func (k edgeKind) String() string {
	switch k {
	case edgeDirect:
		return "direct"
	case edgeFanOut:
		return "fan-out"
	case edgeSwitch:
		return "switch"
	case edgeFanIn:
		return "fan-in"
	}
	return "unknown"
}

// Case is one branch of a switch edge (AddSwitch); make one with CaseType.
type Case struct {
	when func(msg any) bool
	to   Executor
	typ  reflect.Type // the case only matches this type
}

// CaseType returns a Case sending messages of type T for which pred returns
// true to to (a nil pred matches every T; T any matches every message).
func CaseType[T any](to Executor, pred func(T) bool) Case {
	c := Case{to: to, typ: reflect.TypeFor[T](), when: func(msg any) bool {
		v, ok := msg.(T)
		return ok && (pred == nil || pred(v))
	}}
	if c.typ == reflect.TypeFor[any]() {
		c.typ = nil // matches every message: nothing to check, as before CaseType[any] existed
	}
	return c
}

// EdgeOption refines an edge of AddEdge or AddFanOut: When and Select.
type EdgeOption struct {
	cond   func(msg any) bool
	selFor func(targets []Executor) func(msg any, ids []string) []string
}

// When makes an edge deliver only the messages of type T for which pred
// returns true (a nil pred: every T). Messages of other types do not take
// the edge.
func When[T any](pred func(T) bool) EdgeOption {
	return EdgeOption{cond: func(msg any) bool {
		v, ok := msg.(T)
		return ok && (pred == nil || pred(v))
	}}
}

// Select makes a fan-out deliver each message of type T to the targets fn
// picks among targets (the fan-out's, in the order given to AddFanOut);
// messages of other types go to none. It is an error to pick an executor
// that is not a target.
func Select[T any](fn func(msg T, targets []Executor) []Executor) EdgeOption {
	return EdgeOption{selFor: func(targets []Executor) func(msg any, ids []string) []string {
		return func(msg any, _ []string) []string {
			v, ok := msg.(T)
			if !ok {
				return nil
			}
			picked := fn(v, slices.Clone(targets))
			ids := make([]string, len(picked))
			for i, ex := range picked {
				if ex != nil {
					ids[i] = ex.ID()
				}
			}
			return ids
		}
	}}
}

// edge is one edge group as added to the builder.
type edge struct {
	kind     edgeKind
	id       string   // for error messages and the fingerprint
	from     []string // one source, or the fan-in sources
	to       []string // targets; for a switch the case targets in order
	def      string   // switch default target, "" for none
	cond     func(msg any) bool
	selector func(msg any, targets []string) []string
	cases    []func(msg any) bool
	caseType []reflect.Type // per case: the type CaseType matches, or nil
	fanIn    int            // index among the workflow's fan-in edges
}

// delivery is where a sent message goes: an executor's queue, or a fan-in
// buffer slot.
type delivery struct {
	target string
	fanIn  int // -1 for a queue delivery
	slot   int // source index within the fan-in
}

// route resolves the deliveries of msg sent by from. A message no edge
// delivers, or one a target cannot handle, is an error.
func (w *Workflow) route(from string, msg any) ([]delivery, error) {
	var ds []delivery
	mt := reflect.TypeOf(msg)
	for _, e := range w.out[from] {
		targets, err := e.targets(from, msg)
		if err != nil {
			return nil, err
		}
		if e.kind == edgeFanIn {
			slot := slices.Index(e.from, from)
			ds = append(ds, delivery{target: e.to[0], fanIn: e.fanIn, slot: slot})
			continue
		}
		for _, t := range targets {
			if !executorAccepts(w.execs[t], mt) {
				return nil, fmt.Errorf("%w: edge %s delivers %v to executor %q", ErrMessageType, e.id, mt, t)
			}
			ds = append(ds, delivery{target: t, fanIn: -1})
		}
	}
	if len(ds) == 0 {
		return nil, fmt.Errorf("%w: executor %q sent %v", ErrNoRoute, from, mt)
	}
	return ds, nil
}

// targets returns the targets e selects for msg.
func (e *edge) targets(from string, msg any) ([]string, error) {
	switch e.kind {
	case edgeDirect:
		if e.cond == nil || e.cond(msg) {
			return e.to, nil
		}
		return nil, nil
	case edgeFanOut:
		if e.cond != nil && !e.cond(msg) {
			return nil, nil
		}
		if e.selector == nil {
			return e.to, nil
		}
		sel := e.selector(msg, slices.Clone(e.to))
		for _, t := range sel {
			if !slices.Contains(e.to, t) {
				return nil, fmt.Errorf("workflow: edge %s: selector chose %q, not a target of %q", e.id, t, from)
			}
		}
		return sel, nil
	case edgeSwitch:
		for i, c := range e.cases {
			if c == nil || c(msg) {
				return e.to[i : i+1], nil
			}
		}
		if e.def != "" {
			return []string{e.def}, nil
		}
		return nil, fmt.Errorf("%w: switch %s has no case for %T and no default", ErrNoRoute, e.id, msg)
	}
	return nil, nil // fan-in: handled by the caller
}

// allTargets lists every executor e can deliver to.
func (e *edge) allTargets() []string {
	ts := slices.Clone(e.to)
	if e.def != "" {
		ts = append(ts, e.def)
	}
	return ts
}

// describe is e's canonical text for the fingerprint.
func (e *edge) describe(typeName func(reflect.Type) string) string {
	types := make([]string, len(e.caseType))
	for i, t := range e.caseType {
		if t != nil {
			types[i] = typeName(t)
		}
	}
	return fmt.Sprintf("%s from=%q to=%q def=%q cond=%t sel=%t cases=%q",
		e.kind, e.from, e.to, e.def, e.cond != nil, e.selector != nil, types)
}
