// Package postgres is superstep's PostgreSQL store, for several hosts sharing
// one database.
//
// Open connects a pgx pool, applies the embedded migrations
// (migration/NNN_name.up.sql, recorded in superstep_schema_version) to the
// schema named in Options, and starts one listener connection that receives
// LISTEN/NOTIFY announcements of new events for EventWait. A schema written
// by a newer superstep, or holding tables named like superstep's without its
// version table, is refused.
//
// # Commit
//
// A superstep commit is one call of the SQL function superstep_commit, sent
// as one statement in autocommit mode: one round trip and one WAL flush. The
// function (its body superstep_write_step, shared with the group commit's
// superstep_commit_batch) updates the run conditional on the lease epoch
// and the step (fencing), updates the response, appends the step's events
// as one log record (one row of event_records covering their sequence
// range, encoded by store/internal/eventrec), stores new checkpoint parts
// and the checkpoint row; an error anywhere rolls all of it back.
// EventList slices records by sequence number.
// Checkpoint parts are content-addressed per run (sha256): the store
// remembers the parts of each run's last commit and sends only the parts
// that changed; unchanged parts are stored by reference. A small part
// that changed is kept inline in the checkpoint row (its manifest) instead
// of a blob row of its own, and a commit that changes nothing its response
// shows (no events, the same snapshot and status) leaves the response's
// row alone: a response read before its terminal commit takes CommitStep
// and UpdatedAt from its run's last commit (migration 016). Once a write may
// have been sent, its context's cancellation no longer interrupts it, so an
// error means nothing was written (Options.WriteTimeout still bounds it).
//
// The columns holding a request's, a snapshot's, a checkpoint's or an event
// record's bytes are TOAST-compressed with lz4 where the server has it
// (migration 020); pglz, PostgreSQL's default, cost W3 ~9 % of the
// server's CPU.
//
// A response's create is one call of superstep_create (migration 019) too
// when it starts a new run (no idempotency key, conversation turn,
// continuation nor branch): the run, its lease claim, the response, its
// first events and its first checkpoint in one statement. The other
// creates are a transaction of a statement per row.
//
// Under group commit (the default; Options.NoGroupCommit or CommitBatchMax
// 1 turns it off) such a create usually rides a batch: its statement runs
// inside the batch's transaction, with other runs' commits, after them and
// right before the COMMIT. Its times (created_at, the lease's expiry) are its
// own statement's (statement_timestamp), as they would be alone. It
// fails alone when it conflicts, but it also fails, with
// store.ErrUnavailable, when the batch's transaction fails (the
// connection lost, the batch past Options.WriteTimeout because a commit
// waited for its run's row), though its own statement was fine: nothing
// of it written, unless the COMMIT was sent and its answer lost, as for
// a failed commit of a batch.
//
// EventAppend calls (live publication) are group-committed: concurrent calls
// are written in one transaction, each succeeding or failing alone, each as
// one record.
//
// # Notifications
//
// By default new events are announced with NOTIFY right after their commit,
// in batches (Options.NotifyInterval), because a NOTIFY inside a transaction
// holds PostgreSQL's notify-queue lock across its commit and so serialises
// every notifying commit of the database. Readers in the same process are
// woken at once. Options.NotifyInCommit moves the NOTIFY into the commit
// transaction. EventWait also re-checks every Options.PollInterval, which
// bounds the delay when an announcement was lost to a crash or a broken
// listener connection.
//
// The same channel carries the notices of store.Notifier (a cancel, a run
// queued or handed back), sent after their commit in the same batches with
// a payload that no response id starts with ("!n" and JSON), so hosts stop
// cancelled runs and claim waiting ones in milliseconds.
//
// # Host registry
//
// Each host upserts its row of the hosts table (migration 002) with every
// lease renewal (store.HostRegistry); a heartbeat deletes the rows of other
// hosts that expired, skipping rows locked by a concurrent heartbeat.
//
// # Leases
//
// A run is owned through (owner, epoch, expiry). LeaseClaim takes active runs
// that are unowned or expired with FOR UPDATE SKIP LOCKED, so several hosts
// claiming at once never block each other nor claim the same run.
package postgres
