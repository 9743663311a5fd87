// Package crash holds superstep's real-kill tests: they build
// cmd/superstep, run it as a child process on a database, drive the demo
// workflows with the openai-go client, SIGKILL the server at seeded random
// moments, restart it on the same database, resume every client with
// starting_after, and check the whole history with package verify and
// `superstep check`.
//
// Run more kills locally with
//
//	go test ./e2e/crash -run TestCrash -kills 2000 -timeout 1h
//
// and replay a failure with the seed it printed: -seed N.
package crash
