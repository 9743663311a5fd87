// Package multihost holds superstep's multi-host tests: three real
// `superstep serve` processes share one PostgreSQL database, and the tests
// SIGKILL, SIGSTOP and SIGCONT them while runs are in flight, then check
// the whole history with package verify and `superstep check`:
//
//   - TestMultihost_Kills: random hosts killed and restarted under load;
//     streaming clients of a dead host resume on another one with
//     starting_after; every run completes exactly once.
//   - TestMultihost_Zombie: a host paused past its lease loses its runs to
//     another host and, continued, commits and publishes nothing for them
//     (it is fenced) and keeps serving.
//   - TestMultihost_Spread: 1,000 background runs created on one host are
//     spread over three hosts capped by --max-runs.
//   - TestMultihost_Drain: SIGTERM on a host hands its runs over at once,
//     with no superstep run twice; GET /v1/hosts and `superstep hosts`
//     list every host, and the drained one no more.
//   - BenchmarkTakeover: time from a SIGKILL to the first commit of the new
//     owner, at a short and at the default lease.
//
// Heavier runs locally:
//
//	go test ./e2e/multihost -run Kills -kills 200 -timeout 1h
//	go test ./e2e/multihost -run Spread -spread 5000 -timeout 1h
//	go test ./e2e/multihost -run '^$' -bench Takeover -benchtime 30x -timeout 2h
//
// and replay a kill schedule with the seed a test printed: -seed N.
package multihost
