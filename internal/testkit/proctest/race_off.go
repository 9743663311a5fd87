//go:build !race

package proctest

// RaceEnabled reports whether this binary was built with -race.
const RaceEnabled = false
