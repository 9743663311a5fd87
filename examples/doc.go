// Package examples holds the demo workflows that `superstep serve` hosts out
// of the box: demo.echo, demo.two-outputs, demo.silent, demo.approval,
// demo.fanout and demo.stream (which emits its words as live text deltas,
// published as they come with metadata.publication=live). Each accepts request metadata step_delay_ms (a sleep inside
// every executor invocation) and, when SUPERSTEP_DEMO_JOURNAL names a file,
// appends one line "<response_id> <superstep> <executor_id>" per executor
// invocation to it (O_APPEND, fsync) after its work and before returning:
// an external side effect crash tests count.
//
// Metadata: demo.silent reads steps (default 5, capped at the host's
// superstep limit minus one), demo.fanout workers (default 4, 1..64; other
// values fail the run).
package examples
