//go:build race

package proctest

// RaceEnabled reports whether this binary was built with -race. Tests
// build their servers the same way (BuildTemp), so the servers are checked
// for data races under load and their packages come from the same build
// cache as the rest of `go test -race ./...`.
const RaceEnabled = true
