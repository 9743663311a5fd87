//go:build !race

package multihost

// raceEnabled mirrors the test binary's -race into the server build.
const raceEnabled = false
