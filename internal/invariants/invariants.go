// Package invariants holds runtime assertions that are compiled in only with
// the "invariants" build tag (CI runs the tests with -tags invariants). In a
// normal build Check is an empty function the compiler removes.
package invariants
