//go:build faults

package fault

import "context"

// Enabled reports whether fault points are compiled in (-tags faults).
const Enabled = true

type ctxKey struct{}

// WithInjector returns a copy of ctx whose Point calls consult in.
func WithInjector(ctx context.Context, in *Injector) context.Context {
	return context.WithValue(ctx, ctxKey{}, in)
}

// Point marks a named place between two statements of a write. It returns
// an error matching ErrInjected when ctx carries an Injector armed for this
// call, nil otherwise. Callers return the error as a backend failure.
func Point(ctx context.Context, name string) error {
	in, _ := ctx.Value(ctxKey{}).(*Injector)
	if in == nil {
		return nil
	}
	return in.hit(name)
}
