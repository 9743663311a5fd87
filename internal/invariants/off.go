//go:build !invariants

package invariants

// Enabled reports whether assertions are compiled in.
const Enabled = false

// Check does nothing without the invariants build tag.
func Check(cond bool, msg string) {}
