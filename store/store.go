package store

import (
	"context"
	"fmt"
	"time"
)

// Status is the lifecycle state of a response, using the OpenAI Responses
// API's names.
type Status string

// Response statuses.
const (
	StatusQueued     Status = "queued"
	StatusInProgress Status = "in_progress"
	StatusCompleted  Status = "completed"
	StatusFailed     Status = "failed"
	StatusCancelled  Status = "cancelled"
	StatusIncomplete Status = "incomplete"
)

// Terminal reports whether s is a final status: no event follows the one
// that set it.
func (s Status) Terminal() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusCancelled, StatusIncomplete:
		return true
	}
	return false
}

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusQueued, StatusInProgress:
		return true
	}
	return s.Terminal()
}

// Response is one turn of a run as the Responses API shows it: its request,
// its status and the snapshot of the Response object at its last commit.
//
// A run spans one or more responses: a follow-up request naming
// previous_response_id continues the same run (human in the loop) under a
// new response whose event log starts again at sequence 0.
type Response struct {
	ID                 string
	RunID              string
	PreviousResponseID string // "" for the first response of a run
	Model              string
	Owner              string // API key identity; "" when auth is off
	Status             Status
	// Request is the create request as received (opaque JSON).
	Request []byte
	// Snapshot is the Response object at the last commit (opaque JSON),
	// written by ResponseCreate and replaced by every Commit. A backend
	// may store a long one as a reference to the event of the same write
	// whose payload holds it (store/internal/snapref); it reads back as
	// written.
	Snapshot []byte
	// Error and Usage are opaque JSON copies of the snapshot's fields, kept
	// apart for inspection tools; nil when absent.
	Error []byte
	Usage []byte
	// NextSeq is the sequence number the next event of this response gets;
	// events 0..NextSeq-1 are in the log.
	NextSeq int64
	// CommitStep is the run step of the last commit that wrote this
	// response's events (the step a continuation resumes from); the step
	// the run was at when the response was created until then.
	CommitStep int64
	// StartStep is the run's LastStep when the response was created: the
	// commit of step StartStep+1 is the first one made for this response,
	// and it absorbed the answers its request carried (function_call_output
	// items). Written by ResponseCreate, never changed. A durable fact, so
	// recovery need not infer whether answers were absorbed.
	StartStep int64
	// Publication is how the response's events reach readers, as the host
	// decided when it created the response ("committed" or "live"; the
	// store treats it as an opaque short string). Written by
	// ResponseCreate, never changed; "" for responses created before the
	// store kept it. A durable fact, so recovery need not re-decide it.
	Publication string
	// Input is the response's normalised input items as the host read them
	// from the request at create (opaque JSON; nil when absent, also for
	// responses created before the store kept it, and for a long request
	// whose input is the request's as it reads: the host then reads it
	// from Request rather than store its text twice). It is what recovery
	// re-delivers to the workflow, so the host need not re-parse Request.
	// Written by ResponseCreate, never changed; nil stays nil.
	Input []byte
	// CancelRequested is set by ResponseCancel. From then on the response
	// reads as cancelled (Status is StatusCancelled) and the only commit the
	// store accepts for it is one with Status StatusCancelled (ErrCancelled
	// otherwise), which appends its terminal event.
	CancelRequested bool
	CreatedAt       time.Time
	UpdatedAt       time.Time
	// CompletedAt is set by the write that gave the response its terminal
	// event; nil before, also while a recorded cancel (Status cancelled)
	// waits for the owner's cancelled commit.
	CompletedAt *time.Time
	// TraceContext is the W3C trace context of the response as the host
	// recorded it at create (a traceparent header value, optionally
	// followed by "\n" and a tracestate; opaque to the store; "" when
	// tracing was off or for responses created before the store kept it),
	// so that a host resuming the run continues the response's trace.
	// Written by ResponseCreate, never changed.
	TraceContext string
}

// Finished reports whether the response's terminal event is in its log:
// its Status is terminal and was committed (CompletedAt set). A response
// whose cancel is recorded reads as cancelled before that.
func (r *Response) Finished() bool { return r.Status.Terminal() && r.CompletedAt != nil }

// Run is the durable identity of one workflow execution: which response is
// its head, its last committed step, and who owns it.
type Run struct {
	ID             string
	Model          string
	HeadResponseID string
	// LastStep is the step of the last commit; 0 before the first commit
	// (the checkpoint written by ResponseCreate, if any, is step 0).
	LastStep int64
	Lease    Lease
	// Active is true while the head response is not terminal: the run needs
	// a host driving it.
	Active bool
	// Resume records the hosts' failed attempts to resume the run since its
	// last commit (LeaseRelease with Failure); the zero value when none.
	Resume    ResumeState
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ResumeState is what the store knows of failed attempts to resume a run:
// a run no host can resume (model not registered, corrupt checkpoint,
// graph changed) is visible as such instead of being claimed in a loop.
type ResumeState struct {
	// Failures counts consecutive failed resumes; a commit resets it.
	Failures int
	// Error is the last failure's reason, as the host reported it.
	Error string
	// NotBefore: LeaseClaim skips the run until then (store clock).
	NotBefore time.Time
}

// ResumeFailure reports, on LeaseRelease, that the holder could not resume
// the run.
type ResumeFailure struct {
	Reason string
	// RetryAfter is how long no host may claim the run (> 0).
	RetryAfter time.Duration
}

// Lease names the host that owns a run and the epoch its writes are made
// under. Epoch grows by one on every claim; a zero Owner means unowned.
type Lease struct {
	Owner     string
	Epoch     int64
	ExpiresAt time.Time
}

// Event is one entry of a response's event log. Payload is opaque (the SSE
// data the host will publish); Seq is its sequence number.
type Event struct {
	ResponseID string
	Seq        int64
	Type       string
	Payload    []byte
	// Step is the run step whose commit wrote the event; 0 for events
	// written by ResponseCreate, -1 for events appended by EventAppend
	// (live publication) before their step committed.
	Step int64
}

// EventRecord describes one record of a response's event log: the events
// one write (ResponseCreate, a Commit, an EventAppend call) stored together
// as one row. Records of a response cover 0..NextSeq-1 in order, without
// gap or overlap; readers slice them by sequence number.
type EventRecord struct {
	FirstSeq int64
	LastSeq  int64 // inclusive: the record holds LastSeq-FirstSeq+1 events
	Step     int64 // the Step of each of its events
}

// EventRecordLister is implemented by stores that keep a response's events
// in records covering sequence ranges (both backends), so that Check and
// tests can verify the layout behind EventList. It is optional: callers
// find it with a type assertion.
type EventRecordLister interface {
	// EventRecords returns the records of the response's log in sequence
	// order (ErrNotFound for an unknown response).
	EventRecords(ctx context.Context, responseID string) ([]EventRecord, error)
}

// EventInput is an event to be written; its sequence number is chosen by the
// caller (the owner of the run) and checked by the store.
//
// Its payload is Payload with the Bytes of each of Splices inserted at
// their offsets. A writer splices a long string that several events of a
// commit repeat (the text of a reply is in four of its frames), so that
// its bytes are in memory once, not once per event; the store writes,
// and its readers get, the whole payload (Payload when Splices is empty).
type EventInput struct {
	Seq     int64
	Type    string
	Payload []byte
	Splices []Splice
}

// Splice is a piece of an event's payload held apart from the rest: its
// Bytes go at offset At of the payload without them. The splices of an
// event are in order of At (equal offsets in their order); the Bytes of
// one may be shared by other events and are never written to.
type Splice struct {
	At    int
	Bytes []byte
}

// CheckSplices reports an event whose splices are out of order or past
// the end of its Payload, which a store refuses before it writes
// anything.
func CheckSplices(events []EventInput) error {
	for _, e := range events {
		at := 0
		for i, sp := range e.Splices {
			if sp.At < at || sp.At > len(e.Payload) {
				return fmt.Errorf("event %d: splice %d at %d: payload of %d bytes without splices, previous splice at %d",
					e.Seq, i, sp.At, len(e.Payload), at)
			}
			at = sp.At
		}
	}
	return nil
}

// Len returns the length of the event's payload.
func (e *EventInput) Len() int {
	n := len(e.Payload)
	for _, sp := range e.Splices {
		n += len(sp.Bytes)
	}
	return n
}

// AppendPayload appends the event's payload to b.
func (e *EventInput) AppendPayload(b []byte) []byte {
	at := 0
	for _, sp := range e.Splices {
		b = append(b, e.Payload[at:sp.At]...)
		b = append(b, sp.Bytes...)
		at = sp.At
	}
	return append(b, e.Payload[at:]...)
}

// Part is one named piece of a checkpoint. The store treats Data as opaque
// and keeps parts whose bytes did not change since the parent checkpoint by
// reference, so the bytes written per commit grow with what changed. A
// part written with its response's create that repeats long strings of the
// response's request (a new run's first checkpoint queues the request's
// input) may be kept by reference to the request; it reads back byte for
// byte all the same.
type Part struct {
	Name string
	Data []byte
}

// Checkpoint is one entry of a run's checkpoint history.
type Checkpoint struct {
	RunID      string
	Step       int64
	ParentStep int64 // -1 for the first checkpoint of a run
	Parts      []Part
	CreatedAt  time.Time
}

// CheckpointInfo describes a checkpoint without its parts.
type CheckpointInfo struct {
	RunID      string
	Step       int64
	ParentStep int64
	Size       int64 // total bytes of its parts
	CreatedAt  time.Time
}

// ResponseCreateParams are the arguments of ResponseCreate.
type ResponseCreateParams struct {
	Response *Response // ID, Model, Owner, Status, Request, Snapshot, Publication, Input, TraceContext; CreatedAt defaults to Now
	// RunID names the run. Without Response.PreviousResponseID the run is
	// created with Response as its head (ErrConflict when it exists). With
	// it (a continuation) the run must exist, PreviousResponseID must be
	// its head, the run must not be Active, and the head's CommitStep must
	// be the run's LastStep (its commit is the run's last: a later
	// response that committed and was deleted left its state behind);
	// otherwise a *ContinueError (matching ErrConflict) says which. A
	// continuation never creates a run, unless it is a branch.
	RunID string
	// Branch, with Response.PreviousResponseID, makes RunID a new run
	// (ErrConflict when it exists) that continues the previous response's
	// conversation from Checkpoint — the previous response's state, which
	// the caller copied from its run — rather than the previous response's
	// own run: a branch from an earlier response, or a second turn on a
	// head whose run is busy. The previous response must still exist (a
	// *ContinueError with ContinueGone otherwise).
	Branch bool
	// Checkpoint, if not nil, is written as the checkpoint at the run's
	// current step (step 0 for a new run); ignored for an existing run.
	Checkpoint []Part
	// Events are written as the response's first events (normally
	// response.created with Seq 0), in the same transaction.
	Events []EventInput
	// LeaseOwner, when not empty, claims the run for that owner for
	// LeaseDuration in the same transaction (epoch incremented).
	LeaseOwner    string
	LeaseDuration time.Duration
	// IdempotencyKey, when not empty (at most IdempotencyKeyMax bytes), is
	// recorded for (Response.Owner, IdempotencyKey) with RequestHash and the
	// response's ID, in the same transaction and before anything else of
	// it: when a record of that owner and key less than IdempotencyWindow
	// old exists, nothing is written and an *IdempotencyError (matching
	// ErrConflict) returns that record. A concurrent create with the same
	// key gets it too once the first commits. An older record is replaced.
	// The record is deleted with its response (ResponseDelete,
	// ResponsePrune).
	IdempotencyKey string
	// RequestHash identifies the request the key came with (opaque to the
	// store; the host hashes the request body).
	RequestHash string
	Now         time.Time // zero means time.Now()
	// Conversation, when not nil, makes the response a turn of that
	// conversation, taken in the same transaction (see ConversationTurn;
	// a *ConversationError, nothing written, when refused). Only a
	// ConversationStore honours it; other stores refuse it.
	Conversation *ConversationTurn
	// ForkedFrom, for a new run without PreviousResponseID, makes it a
	// fork: the run starts at step ForkedFrom.Step (its Checkpoint is
	// written at that step, and its first commit is Step+1) and records
	// where it came from (RunInfo.ForkedFrom). The store does not read the
	// origin: the caller passes the state to start from as Checkpoint.
	ForkedFrom *ForkPoint
}

// ResponseCreateResult is returned by ResponseCreate.
type ResponseCreateResult struct {
	Response *Response
	Run      *Run
}

// CommitParams are the arguments of Commit.
type CommitParams struct {
	RunID string
	// Epoch is the lease epoch the commit is made under (ErrFenced when it
	// is not the run's current epoch or the lease expired).
	Epoch int64
	// Step must be the run's LastStep+1 (ErrConflict otherwise).
	Step       int64
	Checkpoint []Part
	// ResponseID is the response whose log receives Events; it must be the
	// run's head.
	ResponseID string
	// Events are appended to the response's log; the first Seq must equal
	// the response's NextSeq and the rest follow contiguously.
	Events []EventInput
	// Status, Snapshot, Error and Usage replace the response's fields; a
	// nil Snapshot keeps the one the response has (a superstep that changed
	// nothing its Response object shows need not rewrite it).
	Status   Status
	Snapshot []byte
	Error    []byte
	Usage    []byte
	Now      time.Time
	// PruneKeep, when positive, also prunes the run's checkpoint history
	// as CheckpointPrune with KeepLast PruneKeep would, in the commit's own
	// transaction (no write of its own).
	PruneKeep int
	// Release, on a commit whose Status is terminal (the one that finishes
	// the head response), also gives the run's lease up in the commit's
	// transaction, as LeaseRelease would: the owner is cleared and the
	// lease expires, the epoch stays (the releasing holder is fenced from
	// then on), so another host can claim the run's next turn at once and
	// no release write follows the commit. A commit with Release and a
	// Status that is not terminal is refused, nothing written: a run that
	// goes on needs its lease.
	Release bool
	// Conversation, when not nil (on the commit that finishes a turn),
	// appends the turn's items to its conversation and ends the turn, in
	// the commit's transaction: a turn's items are in its conversation
	// exactly when its terminal commit is (see ConversationAppend). Only a
	// ConversationStore honours it; other stores refuse it.
	Conversation *ConversationAppend
	// PendingCalls, on the commit that finishes a response waiting for
	// answers, records those call ids for the response (and its owner) in
	// the commit's transaction, so that PendingCallGet finds it by one of
	// them. Only a PendingCallReader honours it; other stores refuse it.
	PendingCalls []string
	// Webhooks, on a commit whose Status is terminal, are webhook
	// deliveries of the response written in the commit's transaction (the
	// outbox; see WebhookOutbox, which the store must implement). A commit
	// with Webhooks and a Status that is not terminal is refused, nothing
	// written: only a finished response has webhooks.
	Webhooks []WebhookInput
	// JournalPrune, in a store that implements Journal, also deletes the
	// journal of the run's steps up to Step in the commit's own
	// transaction: the step's results are in its checkpoint now. The
	// caller sets it when the step journaled anything (a commit without
	// it writes nothing more than before).
	JournalPrune bool
}

// CommitResult is returned by Commit.
type CommitResult struct {
	NextSeq int64 // the response's NextSeq after the commit
	// BytesWritten is the number of checkpoint bytes actually stored by
	// this commit (parts already stored are not counted).
	BytesWritten int64
	// Pruned is how many checkpoints PruneKeep deleted.
	Pruned int
}

// EventAppendParams are the arguments of EventAppend.
type EventAppendParams struct {
	RunID      string
	Epoch      int64
	ResponseID string
	Events     []EventInput
	Now        time.Time
	// Journal, when not empty, is appended to the journal of (RunID,
	// JournalStep) in the same transaction as Events, under the same
	// fence, as JournalAppend would (its ErrConflict when JournalStep is
	// not the run's LastStep+1): both are stored or neither. Only stores
	// that implement JournalBatcher read it; a caller must check (another
	// store ignores it). It needs Events: with none, nothing is written.
	Journal     []JournalInput
	JournalStep int64
}

// EventListParams are the arguments of EventList.
type EventListParams struct {
	ResponseID string
	After      int64 // exclusive; -1 lists from sequence 0
	Limit      int   // at most this many; <= 0 means EventListLimitDefault
	// MaxBytes, when positive, ends the page once the payloads listed
	// reach it (the event that crosses it is included: a page holds at
	// least one event), so a page's memory is bounded by bytes too.
	MaxBytes int
}

// EventListLimitDefault is the page size of EventList when Limit is <= 0.
const EventListLimitDefault = 1000

// LeaseClaimParams are the arguments of LeaseClaim.
type LeaseClaimParams struct {
	Owner    string
	Duration time.Duration
	// Limit caps how many runs are claimed; <= 0 means no limit.
	Limit int
	Now   time.Time
}

// LeaseParams name a lease held by Owner at Epoch.
type LeaseParams struct {
	RunID    string
	Owner    string
	Epoch    int64
	Duration time.Duration // for LeaseRenew
	// Failure, on LeaseRelease only, records a failed resume (see
	// ResumeState): the release then announces nothing (no NoticeRunReady)
	// and no host claims the run before Failure.RetryAfter has passed.
	Failure *ResumeFailure
	Now     time.Time
}

// CheckpointPruneParams are the arguments of CheckpointPrune.
type CheckpointPruneParams struct {
	RunID string
	// KeepLast keeps the newest KeepLast checkpoints (at least 1). Any
	// checkpoint a response of the run still needs (its CommitStep) is kept
	// too.
	KeepLast int
}

// RunListParams are the arguments of RunList.
type RunListParams struct {
	After string // list runs with ID > After
	Limit int    // <= 0 means 100
	// ActiveOnly lists only Active runs, through an index of them: its
	// cost follows the runs in flight, not all the runs kept.
	ActiveOnly bool
}

// Store is the durable state of superstep: responses, their event logs, runs,
// checkpoint history and leases. Every method is safe for concurrent use.
//
// Methods return errors that match ErrNotFound, ErrFenced, ErrConflict or
// ErrCorrupt with errors.Is where those conditions apply; any other error is
// a failure of the backend, after which nothing of the call is visible.
type Store interface {
	// ResponseCreate durably creates a response (and its run, for a new
	// run) together with its first events. The host replies
	// response.created only after it returns nil. ErrConflict when the ID
	// exists; a *ContinueError (ErrConflict) when a continuation is refused
	// (see ResponseCreateParams.RunID); an *IdempotencyError (ErrConflict)
	// when its IdempotencyKey is recorded (see
	// ResponseCreateParams.IdempotencyKey).
	ResponseCreate(ctx context.Context, p *ResponseCreateParams) (*ResponseCreateResult, error)
	// ResponseGet returns a response by ID (ErrNotFound).
	ResponseGet(ctx context.Context, id string) (*Response, error)
	// ResponseListByRun returns the responses of a run, oldest first.
	ResponseListByRun(ctx context.Context, runID string) ([]*Response, error)
	// ResponseCancel records the cancel of a response that is not terminal
	// and returns the response: from then on it reads as cancelled (see
	// Response.CancelRequested), and the run's owner commits its cancelled
	// event. A response already terminal is returned unchanged. It is
	// idempotent (ErrNotFound).
	ResponseCancel(ctx context.Context, id string) (*Response, error)
	// ResponseDelete deletes a response, its events and its idempotency
	// key record; when it was the last response of its run, the run and
	// its checkpoints go too (ErrNotFound).
	ResponseDelete(ctx context.Context, id string) error

	// Commit atomically writes one superstep: the checkpoint, the step's
	// events and the head response's status and snapshot. After an error
	// none of it is visible. Errors: ErrFenced (stale epoch or expired
	// lease), ErrConflict (Step is not LastStep+1, the response is not the
	// head, or the events' Seq do not continue the log), ErrCancelled (the
	// response's cancel is recorded and Status is not StatusCancelled),
	// ErrNotFound (the run or the response is gone). A commit resets the
	// run's Resume. The store does not keep p or its slices after Commit
	// returns.
	Commit(ctx context.Context, p *CommitParams) (*CommitResult, error)
	// EventAppend appends events outside a commit (live publication),
	// group-committed and fenced like Commit (ErrFenced, ErrConflict,
	// ErrCancelled, ErrNotFound).
	EventAppend(ctx context.Context, p *EventAppendParams) error
	// EventList returns the response's events with Seq > After, in order,
	// at most Limit of them (ErrNotFound for an unknown response).
	EventList(ctx context.Context, p *EventListParams) ([]Event, error)
	// EventWait blocks until the response has an event with Seq > after,
	// the response is deleted, or ctx ends. It returns nil in the first two
	// cases (callers re-read), ctx.Err() otherwise. It may return nil
	// spuriously.
	EventWait(ctx context.Context, responseID string, after int64) error

	// RunGet returns a run by ID (ErrNotFound).
	RunGet(ctx context.Context, id string) (*Run, error)
	// RunList returns runs in ID order, for inspection and Check.
	RunList(ctx context.Context, p *RunListParams) ([]*Run, error)

	// CheckpointGet returns the run's checkpoint at step (ErrNotFound).
	CheckpointGet(ctx context.Context, runID string, step int64) (*Checkpoint, error)
	// CheckpointGetLast returns the checkpoint of the run's last commit,
	// found through the run record in time independent of history length
	// (ErrNotFound).
	CheckpointGetLast(ctx context.Context, runID string) (*Checkpoint, error)
	// CheckpointList returns the run's checkpoint history, oldest first.
	CheckpointList(ctx context.Context, runID string) ([]CheckpointInfo, error)
	// CheckpointPrune deletes old checkpoints of a run per p and returns how
	// many were deleted.
	CheckpointPrune(ctx context.Context, p *CheckpointPruneParams) (int, error)

	// LeaseClaim claims Active runs that are unowned or whose lease expired,
	// incrementing their epoch, and returns them; runs whose
	// Resume.NotBefore is after Now are skipped.
	LeaseClaim(ctx context.Context, p *LeaseClaimParams) ([]*Run, error)
	// LeaseRenew extends a lease held at p.Epoch (ErrFenced when lost) and
	// returns the new expiry.
	LeaseRenew(ctx context.Context, p *LeaseParams) (time.Time, error)
	// LeaseRelease gives a lease up so another host can claim the run at
	// once (ErrFenced when it was already lost); with Failure, it records a
	// failed resume instead and announces nothing (see ResumeState).
	LeaseRelease(ctx context.Context, p *LeaseParams) error

	// Close releases the store's resources. Calls after Close fail.
	Close() error
}

// HostInfo is one host's entry in a HostRegistry: who it is, where clients
// reach it, and how loaded it was at its last heartbeat.
type HostInfo struct {
	ID   string
	Addr string // the host's address as others reach it; "" when unknown
	// MaxRuns is the host's cap on concurrent runs (0: no cap) and Runs how
	// many it drove at its last heartbeat.
	MaxRuns int
	Runs    int
	// StartedAt is when the host first registered (kept across
	// heartbeats); HeartbeatAt is its last heartbeat.
	StartedAt   time.Time
	HeartbeatAt time.Time
	// ExpiresAt is when the entry stops counting as live unless renewed.
	ExpiresAt time.Time
}

// HostHeartbeatParams are the arguments of HostHeartbeat.
type HostHeartbeatParams struct {
	// Host names the host (ID required) and its Addr, MaxRuns and Runs;
	// the store sets StartedAt, HeartbeatAt and ExpiresAt.
	Host HostInfo
	// TTL is how long the entry stays live without another heartbeat
	// (> 0).
	TTL time.Duration
	Now time.Time // zero means time.Now()
}

// HostRegistry is implemented by stores that keep a registry of the hosts
// using them, so that every host can list the others (GET /v1/hosts),
// including those that drive no run. It is optional: callers find it with
// a type assertion.
type HostRegistry interface {
	// HostHeartbeat creates or refreshes the host's entry, live until
	// Now+TTL, and returns it. Entries that expired before Now may be
	// deleted by it.
	HostHeartbeat(ctx context.Context, p *HostHeartbeatParams) (*HostInfo, error)
	// HostList returns the entries live at now (ExpiresAt after now; zero
	// now means time.Now()), sorted by ID.
	HostList(ctx context.Context, now time.Time) ([]*HostInfo, error)
	// HostRemove deletes the host's entry (a host shutting down). Removing
	// an absent entry is not an error.
	HostRemove(ctx context.Context, id string) error
}

// NoticeKind says what a Notice announces.
type NoticeKind int

// Notice kinds.
const (
	// NoticeCancel: ResponseCancel set the cancel flag of ResponseID (of run
	// RunID). The run's owner should stop it.
	NoticeCancel NoticeKind = iota + 1
	// NoticeRunReady: run RunID needs a host now: it was created or
	// continued without a lease owner (queued), or its owner released its
	// lease while it is still active (drain). Hosts with capacity should
	// claim.
	NoticeRunReady
	// NoticeResync: notices may have been lost (the store's connection to
	// its notification source broke). Subscribers should re-check whatever
	// they watch.
	NoticeResync
)

// String returns the kind's name.
func (k NoticeKind) String() string {
	switch k {
	case NoticeCancel:
		return "cancel"
	case NoticeRunReady:
		return "run_ready"
	case NoticeResync:
		return "resync"
	}
	return "unknown"
}

// Notice is a cross-host signal from a Notifier.
type Notice struct {
	Kind       NoticeKind
	RunID      string
	ResponseID string // NoticeCancel only
}

// Notifier is implemented by stores that announce cancels and runs needing
// a host to every store handle on the same database (every host), so that
// they act in milliseconds instead of at their next poll. It is optional:
// callers find it with a type assertion.
//
// Notices are hints sent after the write they announce committed: one may
// be lost (a crash right after the commit, a full subscriber buffer, a
// broken connection; the last is followed by NoticeResync) or arrive more
// than once, so subscribers keep a slower periodic check as the source of
// truth.
type Notifier interface {
	// Notices subscribes to the notices of every handle on the store's
	// database, this one included. Notices are delivered on the returned
	// channel, which has room for buffer of them (at least 1); when it is
	// full, further notices are dropped until there is room again, and the
	// next delivered notice is a NoticeResync. The channel is closed when
	// ctx ends or the store is closed.
	Notices(ctx context.Context, buffer int) <-chan Notice
}

// Clock is implemented by stores whose lease expiries, claims and commits
// are judged by a clock of their own (PostgreSQL: the database server's),
// not by the hosts'. It is optional: callers find it with a type
// assertion. A store without it judges leases by its host's clock
// (SQLite: one host).
//
// A lease-judged call (ResponseCreate with a lease owner, Commit,
// EventAppend, LeaseClaim, LeaseRenew, LeaseRelease) that passes no Now is
// made at the store's clock, and the expiries and back-offs it returns are
// on that clock; a Now, when set, is used as given (tests move calls in
// time with it), so hosts pass none to such calls. Hosts read StoreNow to
// map expiries onto their own clocks and to warn when theirs is off.
type Clock interface {
	// StoreNow returns the store's current time.
	StoreNow(ctx context.Context) (time.Time, error)
}

// LeaseBatchRenewer is implemented by stores that renew many leases of
// one owner in one write (PostgreSQL: one statement on the lease pool). It
// is optional: callers find it with a type assertion and otherwise call
// LeaseRenew per run. A host renews every lease it holds each third of
// the lease; one write for all of them keeps renewals cheap and quick on
// a busy host, where a late renewal stops a healthy run.
type LeaseBatchRenewer interface {
	// LeaseRenewBatch extends, as LeaseRenew does, each lease of p.Runs
	// still held by p.Owner at its epoch, to p.Duration from now. It
	// returns one result per run, in p.Runs' order: the new expiry, or
	// the error LeaseRenew would give for that run alone (ErrFenced,
	// ErrNotFound). The error is for the call as a whole (the store
	// unreachable, ErrUnavailable): then no result is returned.
	LeaseRenewBatch(ctx context.Context, p *LeaseRenewBatchParams) ([]LeaseRenewResult, error)
}

// CreateCommitter is implemented by stores that write a new response's
// create and its run's first commit in one transaction: one write, one
// sync, where ResponseCreate and Commit are two. It is optional: callers
// find it with a type assertion. A host uses it for a request whose
// response nobody can read before the request ends (a blocking request:
// host.Run), so its create need not be durable, nor visible, before the
// first superstep's commit.
type CreateCommitter interface {
	// CreateCommit writes c as ResponseCreate would, then p as Commit
	// would, atomically: after an error neither is written. c must create
	// a new run claimed by c.LeaseOwner (no PreviousResponseID, Branch,
	// ForkedFrom, IdempotencyKey nor Conversation: ErrConflict
	// otherwise); p is made under that claim, so p.RunID and p.ResponseID
	// must name c's run and response, and p.Epoch is ignored (the claim's
	// epoch is used). Errors are those of the two calls.
	CreateCommit(ctx context.Context, c *ResponseCreateParams, p *CommitParams) (*ResponseCreateResult, *CommitResult, error)
}

// CreateJournaler is implemented by stores that write a new response's
// create and its run's first journal entries in one transaction: one
// write, one sync, where ResponseCreate and JournalAppend are two. It is
// optional: callers find it with a type assertion. A host uses it for a
// blocking request whose create it deferred to the first commit
// (CreateCommitter) when the first superstep journals a call before that
// commit: a chat agent's model call.
type CreateJournaler interface {
	// CreateJournalAppend writes c as ResponseCreate would, then p as
	// JournalAppend would, atomically: after an error neither is written.
	// c must create a new run claimed by c.LeaseOwner, as CreateCommit's
	// create (ErrConflict otherwise); p is made under that claim, so
	// p.RunID must name c's run, and p.Epoch is ignored (the claim's epoch
	// is used). Errors are those of the two calls.
	CreateJournalAppend(ctx context.Context, c *ResponseCreateParams, p *JournalAppendParams) (*ResponseCreateResult, error)
}

// CheckCreateJournal reports why c and p cannot be written by
// CreateJournalAppend (nil when they can): the rules its doc states.
func CheckCreateJournal(c *ResponseCreateParams, p *JournalAppendParams) error {
	switch {
	case c == nil || c.Response == nil || p == nil:
		return fmt.Errorf("%w: create-journal: create and journal entries are required", ErrConflict)
	case c.LeaseOwner == "":
		return fmt.Errorf("%w: create-journal: the create must claim the run (LeaseOwner)", ErrConflict)
	case c.Response.PreviousResponseID != "" || c.Branch || c.ForkedFrom != nil || c.IdempotencyKey != "" || c.Conversation != nil:
		return fmt.Errorf("%w: create-journal: only a new run without idempotency key or conversation", ErrConflict)
	case p.RunID != c.RunID:
		return fmt.Errorf("%w: create-journal: journal of run %s, create of run %s", ErrConflict, p.RunID, c.RunID)
	}
	return nil
}

// NewRunEpoch is the epoch of the lease a new run's create claims
// (ResponseCreate or CreateCommit with LeaseOwner), in every store: a
// caller can make the run's first commit under it before the create
// answered.
const NewRunEpoch = 1

// CheckCreateCommit reports why c and p cannot be written by
// CreateCommit (nil when they can): the rules its doc states.
func CheckCreateCommit(c *ResponseCreateParams, p *CommitParams) error {
	switch {
	case c == nil || c.Response == nil || p == nil:
		return fmt.Errorf("%w: create-commit: create and commit are required", ErrConflict)
	case c.LeaseOwner == "":
		return fmt.Errorf("%w: create-commit: the create must claim the run (LeaseOwner)", ErrConflict)
	case c.Response.PreviousResponseID != "" || c.Branch || c.ForkedFrom != nil || c.IdempotencyKey != "" || c.Conversation != nil:
		return fmt.Errorf("%w: create-commit: only a new run without idempotency key or conversation", ErrConflict)
	case p.RunID != c.RunID || p.ResponseID != c.Response.ID:
		return fmt.Errorf("%w: create-commit: commit of run %s response %s, create of run %s response %s",
			ErrConflict, p.RunID, p.ResponseID, c.RunID, c.Response.ID)
	}
	return nil
}

// LeaseRenewBatchParams are the arguments of LeaseRenewBatch.
type LeaseRenewBatchParams struct {
	Owner    string
	Duration time.Duration
	Runs     []LeaseRef
	Now      time.Time // see Clock: hosts pass none
}

// LeaseRef names a run's lease: its run and epoch.
type LeaseRef struct {
	RunID string
	Epoch int64
}

// LeaseRenewResult is the outcome of one run's renewal in LeaseRenewBatch.
type LeaseRenewResult struct {
	ExpiresAt time.Time
	Err       error
}

// ResponsePruneParams are the arguments of ResponsePrune.
type ResponsePruneParams struct {
	// Before: responses whose completion (CompletedAt) is before it are
	// deleted, within the rules of ResponsePruner.
	Before time.Time
	// Limit caps how many responses one call deletes; <= 0 means
	// ResponsePruneLimitDefault.
	Limit int
}

// ResponsePruneLimitDefault is the batch size of ResponsePrune when Limit
// is <= 0.
const ResponsePruneLimitDefault = 100

// ResponsePruner is implemented by stores that can delete old finished
// responses in batches (response retention). It is optional: callers find
// it with a type assertion.
type ResponsePruner interface {
	// ResponsePrune deletes up to p.Limit terminal responses completed
	// before p.Before, with their events and idempotency key records,
	// oldest completion first, and
	// returns how many it deleted. It never deletes a response of an
	// Active run. A run's head goes too when it is old enough, though a
	// completed head could still have been continued (previous_response_id:
	// an agent's conversation, a workflow waiting for input): retention
	// ends conversations, as the OpenAI API's does, and a continuation
	// naming a pruned response is refused as unknown. A run whose responses
	// are all deleted goes with its checkpoints, as with ResponseDelete.
	// Concurrent calls (several hosts) are safe: each response is deleted
	// once.
	ResponsePrune(ctx context.Context, p *ResponsePruneParams) (int, error)
}
