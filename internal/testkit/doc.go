// Package testkit is the home of superstep's test harnesses, one package
// per directory below it:
//
//   - pgtest: a PostgreSQL database or schema per test, dropped at its end;
//   - proctest: real server processes built, started, signalled, scraped;
//   - resumeclient: a streaming client that follows a response across
//     server deaths and records what it saw;
//   - verifytest: what a process-killing test saw, as package verify's input;
//   - workpool: workloads kept running while a test breaks the system;
//   - tcpproxy: a TCP proxy that cuts a server off on demand.
//
// The promise of every package here: only tests import it (_test.go files,
// other harnesses here, or e2e test packages). Production code, everything
// the superstep command links, never does; TestNotLinked checks that, and
// that the command does not link package testing either.
// Production mechanisms that tests drive live beside it, in internal/fault
// (fault injection) and internal/invariants (assertions).
package testkit
