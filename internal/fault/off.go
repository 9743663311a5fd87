//go:build !faults

package fault

import "context"

// Enabled reports whether fault points are compiled in (-tags faults).
const Enabled = false

// WithInjector returns ctx unchanged: fault points are not compiled in.
func WithInjector(ctx context.Context, _ *Injector) context.Context { return ctx }

// Point does nothing in a normal build; the compiler removes the call.
func Point(context.Context, string) error { return nil }
