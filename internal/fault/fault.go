// Package fault names the points between the statements of a store write
// where tests inject failures, in the manner of pebble's errorfs and bbolt's
// failpoints.
//
// A backend calls Point(ctx, "commit.events_inserted") between two
// statements and returns its error. In a normal build Point is an empty
// function the compiler removes; built with -tags faults, Point consults the
// Injector carried by ctx (WithInjector), so parallel tests cannot interfere
// with each other. Enabled reports which build this is.
package fault

import (
	"errors"
	"fmt"
	"sync"
)

// ErrInjected is the error an armed Injector makes Point return. Errors
// returned by Point match it with errors.Is.
var ErrInjected = errors.New("fault: injected failure")

// Injector decides which Point calls fail. The zero value records the
// points it passes and fails none. An Injector is safe for concurrent use.
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
