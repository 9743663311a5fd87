// Package verify checks superstep's end-to-end contract on what a run left
// behind: the durable event log of each response, the events every client
// actually received, and the journal of executor invocations the demo
// workflows append to (SUPERSTEP_DEMO_JOURNAL).
//
// Tests and tools share it. A crash test drives clients through kills and
// restarts, then hands everything to Check, which returns a Report listing
// every violated invariant (not only the first):
//
//   - the log numbers its events 0, 1, 2, … with no gap, starts with exactly
//     one response.created and ends with exactly one terminal event
//     (response.completed, response.failed, response.incomplete or
//     response.cancelled); each payload's type and sequence_number match
//     the log entry;
//   - every client saw exactly the log from where it started: no gap, no
//     duplicate, no reordering, across any number of resumes;
//   - every output item a client was shown (response.output_item.done)
//     since the last response.in_progress (a live-mode reset withdraws
//     earlier ones) is in the final response, and the final output equals
//     a crash-free reference run's;
//   - no committed superstep's executors ran again, and an interrupted
//     superstep re-ran at most once per crash (Journal.Marks, recorded at
//     each crash, make this exact; Journal.PerAttempt accounts for
//     executors that handle several messages in one superstep).
//
// # Caveats
//
// Check judges only what it is given. The journal shows executor
// invocations that finished their work (the demos append after the work and
// before returning); an invocation killed mid-way leaves no line, which is
// the at-least-once execution the contract allows for uncommitted work.
// Without crash marks, a superstep that re-ran with no crash in between
// is seen only when the re-runs exceed the crash budget. The journal does
// not say which message an invocation handled, so re-runs of an executor
// whose PerAttempt is unknown (0) are not counted at all.
package verify
