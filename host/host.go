package host

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/workflow"
)

// Defaults of Config.
const (
	LeaseDurationDefault = 15 * time.Second
	MaxSuperstepsDefault = 1000
	CommitRetriesDefault = 5
	CommitBackoffDefault = 20 * time.Millisecond
	CancelPollDefault    = time.Second
	// ClaimIntervalMax caps the default ClaimInterval: a dead host's runs
	// are claimed at most this long after their leases expire, whatever
	// the lease. One claim is one indexed query that finds nothing when
	// no host died.
	ClaimIntervalMax = time.Second
	// ResumeBackoffDefault and ResumeBackoffMaxDefault are the defaults of
	// Config.ResumeBackoff and ResumeBackoffMax.
	ResumeBackoffDefault    = time.Second
	ResumeBackoffMaxDefault = 5 * time.Minute
	// KeepCheckpointsDefault is the default Config.KeepCheckpoints: the
	// last commit's checkpoint is all recovery and continuation read; one
	// more is kept for inspection.
	KeepCheckpointsDefault = 2
)

// Config configures a Host. The zero value (or nil) is valid: every zero
// field takes its default.
type Config struct {
	// HostID names this host as a lease owner; default hostname-pid-random.
	HostID string
	// LeaseDuration is how long a claimed run stays owned without renewal;
	// leases are renewed every LeaseDuration/3 (a failed renewal is retried
	// every LeaseDuration/12), and a run whose lease could not be renewed
	// for 3/4 of LeaseDuration is stopped, before another host can take it
	// over. It is also the time-to-live of the host's registry entry.
	// Default 15s.
	LeaseDuration time.Duration
	// MaxSupersteps caps the supersteps of one response (a run's turn:
	// a continuation gets as many again); default 1000.
	MaxSupersteps int
	// CommitRetries is how many times a commit that failed with an error
	// not known to be transient is retried (with exponential backoff from
	// CommitBackoff) before the run fails loudly. A transient failure
	// (store.ErrUnavailable: connection lost, timeout, serialization
	// failure, disk full, database locked) is retried without a count for
	// as long as the run holds its lease, and never fails the run: once
	// the lease cannot be kept the run is handed back for recovery.
	// Default 5; negative means none.
	CommitRetries int
	// CommitBackoff is the first retry delay; default 20ms.
	CommitBackoff time.Duration
	// CommitBackoffMax caps the retry delay, which doubles from
	// CommitBackoff at each retry; default CommitBackoffMaxDefault (2s),
	// and never below CommitBackoff.
	CommitBackoffMax time.Duration
	// Logger receives the host's logs; default slog.Default().
	Logger *slog.Logger
	// Metrics, when not nil, receives the host's Prometheus collectors.
	Metrics prometheus.Registerer
	// ExclusiveStore says this host is the only one using the store (SQLite,
	// whose file is locked by one process): any lease found at Start was
	// held by a process that is gone, so Start claims every unfinished run
	// at once instead of waiting for leases to expire. A store implementing
	// interface{ Exclusive() bool } returning true implies it.
	ExclusiveStore bool
	// ClaimInterval is how often the host claims runs that need a host
	// (lease expired, unowned); default LeaseDuration/3, at most
	// ClaimIntervalMax. Queued and released runs are also claimed at once
	// through the store's notices when it has them.
	ClaimInterval time.Duration
	// MaxRuns caps how many runs this host drives at once; 0 means no cap.
	// A host at its cap creates new responses unowned (queued) for any
	// host with capacity to claim (at once with a store.Notifier, else at
	// its next ClaimInterval), and claims no more runs until one ends.
	MaxRuns int
	// CancelPollInterval is how often the host looks for cancels recorded
	// through other hosts on the runs it drives (not with an exclusive
	// store, where every cancel comes through this host). With a store
	// that announces cancels (store.Notifier, e.g. PostgreSQL) the
	// announcement stops the run at once and the watch is only the
	// fallback, at least LeaseDuration/3 apart. Default 1s; negative
	// disables the watch (a run then stops at its next commit, which the
	// store refuses once a cancel is recorded).
	CancelPollInterval time.Duration
	// ResumeBackoff is how long no host claims a run after a failed
	// resume here (model not registered on this host, corrupt checkpoint,
	// changed graph); it doubles with each consecutive failure, up to
	// ResumeBackoffMax, and a commit resets it. The failures show in the
	// run record (store.Run.Resume). Defaults 1s and 5m.
	ResumeBackoff    time.Duration
	ResumeBackoffMax time.Duration
	// Addr is this host's address as others reach it, shown by Hosts (and
	// kept in the store's host registry, store.HostRegistry).
	Addr string
	// KeepCheckpoints is how many of a run's newest checkpoints are kept
	// when its history is pruned: by the commit of every
	// CheckpointPruneEvery-th step and the commit that finishes a response,
	// in the commit's own transaction (store.CommitParams.PruneKeep, no
	// write of its own). The store also keeps the checkpoint each response
	// resumes from.
	// Default KeepCheckpointsDefault (2); negative keeps every checkpoint.
	KeepCheckpoints int
	// Retention is how long finished responses are kept: a background loop
	// deletes, in batches, terminal responses completed longer ago than
	// Retention, with their events, and a run whose responses are all gone
	// with its checkpoints. It needs a store implementing
	// store.ResponsePruner, whose rules say what is kept (responses of
	// active runs; an old completed head goes, ending its conversation).
	// 0 (the default) keeps responses forever.
	Retention time.Duration
	// WebhookURLs, when not empty, turns webhooks on: the commit that
	// finishes a response also writes, in its transaction, one delivery
	// of the response's event to each URL (the outbox; the store must
	// implement store.WebhookOutbox). Package webhook sends them.
	WebhookURLs []string
	// WebhookEnqueued, when not nil, is called after each commit that
	// wrote webhook deliveries, so their sender looks at once. It must
	// not block (a run's commit calls it).
	WebhookEnqueued func()
	// NoJournal turns the journal inside the superstep off: a superstep
	// re-run after a crash makes every model and tool call again (see
	// host/journal.go). For measurements and to show what the journal
	// saves; the journal needs a store implementing store.Journal.
	NoJournal bool
	// Test holds knobs for tests only (fault injection); the superstep
	// command never sets them.
	Test TestConfig
	// TracerProvider, when set, traces responses (see host/trace.go): a
	// span per response, superstep and store commit, and the workflow's,
	// model and tool spans beneath them. Nil (the default): no spans, and
	// no trace context stored with responses.
	TracerProvider trace.TracerProvider
}

// Sentinel errors of the host.
var (
	// ErrModelNotFound is returned by Create for an unregistered model.
	ErrModelNotFound = errors.New("host: model not found")
	// ErrHostClosed is returned by calls made after Shutdown began.
	ErrHostClosed = errors.New("host: closed")
)

// InputError is a problem with the caller's input (HTTP 400). Nothing is
// stored when Create returns it.
type InputError struct {
	Param   string // the request field at fault, e.g. "input"
	Code    string // e.g. "invalid_value"
	Message string
}

func (e *InputError) Error() string { return "host: " + e.Message }

// ConflictError is a request that does not fit the current state of the
// response it names (a continuation of a response that cannot be
// continued now). It matches store.ErrConflict; Message is written for
// the client.
type ConflictError struct {
	Message string
}

func (e *ConflictError) Error() string { return "host: conflict: " + e.Message }

// Is reports whether target is store.ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == store.ErrConflict }

// Model describes a hosted workflow or agent.
type Model struct {
	ID        string
	Kind      string // "workflow" or "agent"
	CreatedAt time.Time
}

// CreateParams are the arguments of Create.
type CreateParams struct {
	Model string
	Owner string // API key identity; "" when auth is off
	// Request is the raw JSON body as received; it is stored and the
	// Response's echo fields (tools, temperature, ...) come from it.
	Request []byte
	Input   []InputItem // normalised input
	// Parsed, when not nil, is what protocol.ParseCreate read Request
	// into, Input being its Input (Parsed.InputOf): the host then knows
	// Input is what recovery will read from the stored Request without
	// reading it a second time (for an 8 MiB text, 17 MB allocated and
	// compared). Any other Request or Input is read and compared as
	// without it.
	Parsed       *protocol.CreateRequest
	Instructions *string
	Metadata     map[string]string
	Stream       bool
	Background   bool
	Store        bool
	// PreviousResponseID continues the run whose head is that response.
	PreviousResponseID string
	// IdempotencyKey, when not empty (at most store.IdempotencyKeyMax
	// bytes), makes the create idempotent for this Owner within
	// store.IdempotencyWindow: a create with a key seen before and the same
	// request (Request, or the one built from these fields) returns the
	// response the first created, as stored now, and starts nothing; with
	// a different request it is an *IdempotencyError. The key is recorded
	// in the transaction that creates the response, so this holds across
	// crashes, hosts and concurrent creates.
	IdempotencyKey string
	// Conversation, when not empty, makes the response a turn of that
	// conversation of Owner's (see conversation.go): its items come before
	// Input, and the turn's items are appended to it by its terminal
	// commit. It cannot go with PreviousResponseID.
	Conversation string

	// publication and params are what Create decided from the request
	// (on its own copy of the params), once, for the steps after it.
	publication string
	params      *agent.ModelParams
	// history and turn are a conversation turn's items before Input and
	// the conversation version they were read at (createTurn).
	history []InputItem
	turn    *store.ConversationTurn
	// inputInRequest says that Input is what the stored request's input
	// reads as (no item_reference was resolved): the response then records
	// no Input of its own (store.Response.Input nil), which would be the
	// request's text a second time.
	inputInRequest bool
	// blocking: CreateAndWait made the create; its caller learns the response's id
	// only with the finished response (see deferCreate).
	blocking bool
}

// InputItem is one normalised input item. It is the type the one reader
// of create requests (package protocol) returns, so the HTTP parser, recovery
// and input_items read a request alike.
type InputItem = protocol.InputItem

// Host drives runs. Create it with New, register models, then Start it
// before calling Create. Every method is safe for concurrent use.
type Host struct {
	store   store.Store
	cfg     Config
	log     *slog.Logger
	metrics *metrics

	// runCtx is the parent of every run's context; hardStop cancels it when
	// Shutdown's context ends before the runs stopped.
	runCtx   context.Context
	hardStop context.CancelFunc
	// loopCtx stops the background loops.
	loopCtx  context.Context
	stopLoop context.CancelFunc
	runWG    sync.WaitGroup // run goroutines
	loopWG   sync.WaitGroup // background loops
	// clock maps the store's lease expiries onto this host's clock; set
	// by start before the first claim.
	clock *storeClock
	// kick wakes the lease loop to claim runs now (capacity freed, a
	// response queued).
	kick chan struct{}

	mu struct {
		sync.Mutex
		models   map[string]*model
		runs     map[string]*run // by run ID
		reserved int             // run slots reserved under Config.MaxRuns
		started  bool
		closed   bool // Shutdown began: no new work
		draining bool // runs stop after their next commit
	}

	test testSignals
}

// New returns a Host over s. cfg may be nil (every default). The host does
// not own s: close s after Shutdown.
func New(s store.Store, cfg *Config) (*Host, error) { return newHost(s, cfg) }

// RegisterWorkflow hosts wf under the model name.
func (h *Host) RegisterWorkflow(name string, wf *workflow.Workflow, opts ...ModelOption) error {
	return h.registerWorkflow(name, wf, opts)
}

// RegisterAgent hosts a under the model name: each turn of the agent is
// one durable step of a conversation, and an agent that implements
// agent.ParamsChecker (a ChatAgent) takes the request's model settings.
// A workflow, agents in it or not, is hosted with RegisterWorkflow; an
// agent.WorkflowAgent is refused (its supersteps would not be durable).
func (h *Host) RegisterAgent(name string, a agent.Agent, opts ...ModelOption) error {
	return h.registerAgent(name, a, opts)
}

// Models returns the hosted models sorted by ID.
func (h *Host) Models() []Model { return h.models() }

// Start recovers every unfinished run this host can claim (every one, at
// once, with an exclusive store; up to MaxRuns) and starts the background
// loops (lease renewal, claiming of expired or queued runs, the cancel
// watch). It fails only when the store does: a run that cannot be resumed
// is logged, counted (superstep_host_failures_total{op="recover"}) and
// released for a later attempt.
func (h *Host) Start(ctx context.Context) error { return h.start(ctx) }

// Shutdown stops accepting new work, lets running supersteps finish and
// commit within ctx, then stops the runs (uncommitted work is left for
// recovery) and releases their leases, so that other hosts claim them at
// once instead of waiting for the leases to expire. It returns ctx.Err() when ctx ended
// before every run stopped.
func (h *Host) Shutdown(ctx context.Context) error { return h.shutdown(ctx) }

// Create validates p, durably creates the response (and its run, for a new
// run) with its response.created event at sequence 0, and returns the
// created response; the run proceeds on a goroutine owned by the host.
// Errors: ErrModelNotFound, *InputError (bad input, unknown call id,
// unknown previous_response_id, an idempotency key too long),
// store.ErrConflict (continuation of a response that is not the head of
// its run or has no pending requests), *IdempotencyError (the idempotency
// key came with another request), ErrHostClosed. With an idempotency key
// seen before, Create returns the response it created (see
// CreateParams.IdempotencyKey).
func (h *Host) Create(ctx context.Context, p *CreateParams) (*store.Response, error) {
	return h.create(ctx, p)
}

// CreateAndWait creates a response as Create does and waits until it is finished,
// as WaitStarted would, returning it then: a blocking request. Its caller
// learns the response's id only with the finished response, so nobody
// can read the response before its first superstep commits: when the
// store can (store.CreateCommitter), a new run's create is not written on
// its own before the run starts but with that first commit, in one
// transaction (one store write where Create and the commit are two). A
// crash before that commit leaves nothing stored, as if the request had
// not arrived; its caller, waiting, sees the failure. Errors: those of
// Create and Wait.
func (h *Host) CreateAndWait(ctx context.Context, p *CreateParams) (*store.Response, error) {
	return h.createAndWait(ctx, p)
}

// Get returns the response (store.ErrNotFound also for another owner's).
func (h *Host) Get(ctx context.Context, id, owner string) (*store.Response, error) {
	return h.get(ctx, id, owner)
}

// GetView is Get without the response's Request and Input (nil), which a
// store implementing store.ResponseViewReader leaves unread: for a reader
// that shows the response (a client polling a background response), whose
// request may be megabytes.
func (h *Host) GetView(ctx context.Context, id, owner string) (*store.Response, error) {
	return h.view(ctx, id, owner)
}

// Wait blocks until the response's terminal event is committed and
// returns it (a recorded cancel reads as cancelled at once, but Wait
// returns the response as its owner finished it).
func (h *Host) Wait(ctx context.Context, id, owner string) (*store.Response, error) {
	return h.wait(ctx, id, owner)
}

// WaitStarted is Wait for a response the caller has just been given by
// Create or Fork (resp, owned by resp.Owner): while its run is driven
// here it does not read the response back from the store first.
func (h *Host) WaitStarted(ctx context.Context, resp *store.Response) (*store.Response, error) {
	return h.waitStarted(ctx, resp)
}

// Events yields the response's events with Seq > after from the durable
// log, then follows it live until the terminal event (response.completed,
// .failed, .incomplete or .cancelled), which is the last one yielded. An
// error is yielded once and ends the sequence. Payloads are the exact SSE
// data JSON and Type the SSE event name.
func (h *Host) Events(ctx context.Context, id, owner string, after int64) iter.Seq2[store.Event, error] {
	return h.events(ctx, id, owner, after)
}

// EventsStarted is Events for a response the caller has just been given
// by Create or Fork (resp, owned by resp.Owner): it does not read the
// response back from the store first (a store row holds the request,
// megabytes for a long input).
func (h *Host) EventsStarted(ctx context.Context, resp *store.Response, after int64) iter.Seq2[store.Event, error] {
	return h.eventsOf(ctx, resp.ID, resp.RunID, after)
}

// Frames is Events with each event as its frame (protocol.Frame): a long
// text that the host holds once for all the frames of its step stays
// spliced into them, so a reader that writes frames out piece by piece
// (Frame.WriteTo), as an SSE stream does, never makes a long reply's
// frames whole. Events read from the store come whole.
func (h *Host) Frames(ctx context.Context, id, owner string, after int64) iter.Seq2[protocol.Frame, error] {
	return asFrames(h.ownedLog(ctx, id, owner, after))
}

// FramesStarted is Frames for a response the caller has just been given,
// as EventsStarted is Events.
func (h *Host) FramesStarted(ctx context.Context, resp *store.Response, after int64) iter.Seq2[protocol.Frame, error] {
	return asFrames(h.logOf(ctx, resp.ID, resp.RunID, after))
}

// Cancel durably requests cancellation and returns the response as the
// client should see it: status cancelled, or the terminal status it had
// already reached. It is idempotent. The run stops at its next superstep
// boundary at the latest and its executors see their context cancelled.
func (h *Host) Cancel(ctx context.Context, id, owner string) (*store.Response, error) {
	return h.cancel(ctx, id, owner)
}

// Delete deletes the response and its events (store.ErrNotFound). A running
// response is cancelled first.
func (h *Host) Delete(ctx context.Context, id, owner string) error { return h.delete(ctx, id, owner) }
