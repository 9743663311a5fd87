package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// yieldKind says what an executor's yielded values are.
type yieldKind int

const (
	yieldNone yieldKind = iota
	yieldOutput
	yieldIntermediate
)

// Workflow is a validated, immutable graph of executors. It is safe for
// concurrent use: every run (NewRun, Restore) has its own state.
type Workflow struct {
	name        string
	start       string
	order       []string // executor ids in the order they were added
	index       map[string]int
	execs       map[string]Executor
	out         map[string][]*edge // outgoing edge groups by source
	edges       []*edge
	fanIns      []*edge
	yields      map[string]yieldKind
	fingerprint string
	// legacyFingerprint is the fingerprint as computed before checkpoint
	// type names were explicit (types named by package path); Restore
	// accepts it so that checkpoints of that release restore.
	legacyFingerprint string
}

// Name returns the name given to NewBuilder.
func (w *Workflow) Name() string { return w.name }

// Fingerprint returns a hash of the graph's shape: executor ids, their Go
// types and input types (by their registered names, so a type moved to
// another package keeps it), edges, and output declarations. Checkpoints
// carry it and Restore refuses a checkpoint made by a graph with another
// one. Functions (conditions, handlers) are not part of it.
func (w *Workflow) Fingerprint() string { return w.fingerprint }

// StartInputTypes returns the message types the start executor declares, or
// nil when it accepts anything (it does not implement InputTyper).
func (w *Workflow) StartInputTypes() []reflect.Type {
	if it, ok := w.execs[w.start].(InputTyper); ok {
		return it.InputTypes()
	}
	return nil
}

// fingerprinter is implemented by executors whose shape is more than their
// Go type, such as sub-workflows.
type fingerprinter interface {
	fingerprintPart(legacy bool) string
}

// computeFingerprint hashes the canonical description of the graph; legacy
// names types as before their names were explicit (see legacyFingerprint).
func (w *Workflow) computeFingerprint(legacy bool) string {
	typeName := func(t reflect.Type) string {
		if legacy {
			if t == anyAnswer {
				return "github.com/superstep/superstep/workflow.Answer"
			}
			return canonicalName(t)
		}
		if n, ok := registeredName(t); ok {
			return n
		}
		return canonicalName(t) // not registered: an interface type (Build rejects the others)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "workflow %q start %q\n", w.name, w.start)
	for _, id := range w.order {
		ex := w.execs[id]
		fmt.Fprintf(&sb, "executor %q %T", id, ex)
		if it, ok := ex.(InputTyper); ok {
			names := make([]string, 0)
			for _, t := range it.InputTypes() {
				if t != nil {
					names = append(names, typeName(t))
				}
			}
			sort.Strings(names)
			fmt.Fprintf(&sb, " in=%q", names)
		}
		if fp, ok := ex.(fingerprinter); ok {
			fmt.Fprintf(&sb, " sub=%s", fp.fingerprintPart(legacy))
		}
		fmt.Fprintf(&sb, " yield=%d\n", w.yields[id])
	}
	for _, e := range w.edges {
		sb.WriteString(e.describe(typeName))
		sb.WriteByte('\n')
	}
	sum := sha256.Sum256([]byte(sb.String()))
	return hex.EncodeToString(sum[:16])
}
