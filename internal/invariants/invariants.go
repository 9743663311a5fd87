// Package invariants holds runtime assertions of superstep's internal
// invariants. They are compiled in only with the "invariants" build tag
// (go test -tags invariants ./workflow/...); in a normal build Check is an
// empty function the compiler removes, so production code calls it freely.
// A failed Check panics: it is a bug in superstep, never a user error.
package invariants
