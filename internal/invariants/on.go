//go:build invariants

package invariants

// Enabled reports whether assertions are compiled in.
const Enabled = true

// Check panics with msg when cond is false: a broken internal invariant is
// a bug in superstep, never a user error.
func Check(cond bool, msg string) {
	if !cond {
		panic("invariant violated: " + msg)
	}
}
