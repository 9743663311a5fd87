//go:build race

package crash

// raceEnabled mirrors the test binary's -race into the server build, so
// the server is checked for data races under crash load and its packages
// come from the same build cache as the rest of `go test -race ./...`.
const raceEnabled = true
