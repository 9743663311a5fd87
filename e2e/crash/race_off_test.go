//go:build !race

package crash

// raceEnabled mirrors the test binary's -race into the server build.
const raceEnabled = false
