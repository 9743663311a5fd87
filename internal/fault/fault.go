// Package fault is superstep's one fault-injection mechanism: the named
// points where tests make a step fail (or, in a test binary, the whole
// process crash), in the manner of pebble's errorfs and bbolt's failpoints.
// Every error it injects matches ErrInjected. A point is reached in one of
// two ways:
//
//   - Statement points, Point(ctx, "commit.events_inserted"): a store
//     backend calls Point between two statements of a write and returns its
//     error. In a normal build Point is an empty function the compiler
//     removes; built with -tags faults, Point consults the Injector carried
//     by ctx (WithInjector), which fails the n-th call, so parallel tests
//     cannot interfere with each other. Enabled reports which build this is.
//
//   - Hook points, Reach(ctx, fn, at): a component (the host) describes
//     an arrival (At: the point's Name and the run, response, step or event
//     it concerns) and asks the Func its tests configured, which may fail
//     any arrival it chooses. A nil Func costs one comparison, so hook
//     points stay in every build. A binary built with -tags faults can take
//     its Func from the environment instead (FromEnv, Spec): the n-th
//     arrival at a named point fails or SIGKILLs the process, which is how
//     process-level tests crash a server at an exact place.
//
// Neither way injects anything unless a test asks: production code calls
// Point and Reach freely.
package fault

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrInjected is the error every injected failure matches (errors.Is):
// Point's when an armed Injector fails it, Reach's when the Func returns an
// error.
var ErrInjected = errors.New("injected fault")

// Name names a hook point.
type Name string

// At describes one arrival at a hook point. The fields other than Point
// are those that concern the arrival, zero when unknown or irrelevant.
type At struct {
	Point      Name
	RunID      string // the run ("" when unknown)
	ResponseID string // the response
	Step       int64  // the step being committed (commit points)
	Seq        int64  // the event about to be published (publish points)
}

// Func decides whether an arrival fails: a non-nil error is injected
// there. It is called synchronously at the point, so it may also block
// (a stall) or make the component's store refuse writes first (a crash a
// test simulates in-process).
type Func func(ctx context.Context, at *At) error

// Reach reports the arrival at to fn (a nil fn injects nothing) and
// returns fn's error wrapped so that it matches ErrInjected and names the
// point. The caller handles a non-nil error as a real failure of the step
// at that point.
func Reach(ctx context.Context, fn Func, at *At) error {
	if fn == nil {
		return nil
	}
	err := fn(ctx, at)
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w at %s: %w", ErrInjected, at.Point, err)
}

// Injector decides which Point calls fail. The zero value records the
// points it passes and fails none. An Injector is safe for concurrent use.
//
// A backend may run a write's statements twice: the SQLite writer redoes a
// group-commit batch without a write that failed, so the other writes of
// that batch reach their points again, and each arrival counts (Calls,
// Passed, FailAt's index). A test that counts calls runs its write alone.
type Injector struct {
	// FailAt is the index (0-based, counted over every Point call that
	// consults this Injector) of the call that fails; negative means none.
	// Only that one call fails.
	FailAt int

	mu struct {
		sync.Mutex
		n      int
		passed []string
		failed string
	}
}

// NewInjector returns an Injector that fails the failAt-th Point call
// (negative: none).
func NewInjector(failAt int) *Injector { return &Injector{FailAt: failAt} }

// hit records one Point call and returns the error it must return.
func (in *Injector) hit(name string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	i := in.mu.n
	in.mu.n++
	if i == in.FailAt {
		in.mu.failed = name
		return fmt.Errorf("%w at point %d %q", ErrInjected, i, name)
	}
	in.mu.passed = append(in.mu.passed, name)
	return nil
}

// Calls returns how many Point calls consulted the Injector.
func (in *Injector) Calls() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.mu.n
}

// Passed returns the names of the points passed without failing, in order.
func (in *Injector) Passed() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.mu.passed...)
}

// Failed returns the name of the point that failed, or "" when none did.
func (in *Injector) Failed() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.mu.failed
}
