// Package store defines superstep's durable state: the Store interface that
// every backend implements, its records and its sentinel errors.
//
// It is a leaf package: it imports nothing else from superstep, so the host
// and the backends (store/sqlite, store/postgres) both depend on it and not
// on each other. Checkpoints are opaque named parts and events are opaque
// payloads with sequence numbers; the store knows nothing of workflows.
//
// # The contract
//
// One Commit per superstep writes the checkpoint, that step's events and the
// response's status in one transaction, conditional on the lease epoch
// (fencing) and on being the run's next step. Sequence numbers of a
// response's events start at 0, are contiguous and are never reused. A run
// resumes from its own last commit, found through the run record
// (CheckpointGetLast), never from "the latest checkpoint" by time.
//
// Each write's events are one log record covering a contiguous range of
// sequence numbers (one row in both backends; EventRecordLister lists
// them); readers slice records by sequence number, so an event is still
// addressed, listed and paged alone.
//
// Check verifies these invariants over a whole store; tests, crash tests and
// `superstep check` share it.
package store
