//go:build race

package multihost

// raceEnabled mirrors the test binary's -race into the server build, so
// the servers are checked for data races under multi-host load and their
// packages come from the same build cache as the rest of
// `go test -race ./...`.
const raceEnabled = true
