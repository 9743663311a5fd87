package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/workflow"
)

// Input item types.
const (
	InputMessage            = protocol.InputMessage
	InputFunctionCallOutput = protocol.InputFunctionCallOutput
)

func newHost(s store.Store, cfg *Config) (*Host, error) {
	if s == nil {
		return nil, errors.New("host: nil store")
	}
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := checkWebhooks(s, &c); err != nil {
		return nil, err
	}
	m, err := newMetrics(c.Metrics)
	if err != nil {
		return nil, err
	}
	h := &Host{store: s, cfg: c, log: c.Logger, metrics: m}
	h.runCtx, h.hardStop = context.WithCancel(context.Background())
	h.loopCtx, h.stopLoop = context.WithCancel(context.Background())
	h.mu.models = map[string]*model{}
	h.mu.runs = map[string]*run{}
	h.kick = make(chan struct{}, 1)
	return h, nil
}

// acceptNew reports an error unless the host takes new work.
func (h *Host) acceptNew() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.closed {
		return ErrHostClosed
	}
	if !h.mu.started {
		return errors.New("host: Create called before Start")
	}
	return nil
}

func (h *Host) create(ctx context.Context, p *CreateParams) (*store.Response, error) {
	if err := checkIdempotencyKey(p.IdempotencyKey); err != nil {
		return nil, err
	}
	if err := h.acceptNew(); err != nil {
		return nil, err
	}
	m, err := h.lookupModel(p.Model)
	if err != nil {
		return nil, err
	}
	mode, err := publicationMode(p.Metadata, m.publication)
	if err != nil {
		return nil, err
	}
	if p.blocking && p.IdempotencyKey == "" && p.Metadata[PublicationMetadataKey] == "" {
		// Nobody reads a blocking request's response before it ends (its
		// id comes with it): a model's live default would only cost live
		// appends, and the create could not ride with the first write
		// (deferCreate). Published at commits, unless the request asks for
		// live or a retry with its idempotency key may stream it.
		mode = PublicationCommitted
	}
	if p, err = withStoredRequest(p); err != nil {
		return nil, err
	}
	if p.params, err = modelParams(m, p.Request); err != nil {
		return nil, err
	}
	p.publication = mode // p is withStoredRequest's copy
	if p.IdempotencyKey != "" {
		if resp, err := h.replay(ctx, p); resp != nil || err != nil {
			return resp, err // seen before: nothing starts
		}
	}
	// References to earlier output items become those items: what is
	// recorded (store.Response.Input) and run is the resolved input; the
	// stored request keeps the references as the client sent them.
	// Without references, the input is the request's as withStoredRequest
	// read it; a long one is not recorded a second time (inputInRequest).
	p.inputInRequest = len(p.Request) >= InputInRequestMin &&
		!slices.ContainsFunc(p.Input, func(it InputItem) bool { return it.Type == protocol.InputItemReference })
	in, err := h.resolveReferences(ctx, p.Owner, p.Input)
	if err != nil {
		return nil, err
	}
	p.Input = in // p is withStoredRequest's copy
	if p.Conversation != "" {
		return h.createTurn(ctx, m, p)
	}
	if p.PreviousResponseID == "" {
		// Answers naming only call ids continue the response that made
		// the calls (pendingcall.go).
		if p.PreviousResponseID, err = h.answeredResponse(ctx, p); err != nil {
			return nil, err
		}
	}
	if p.PreviousResponseID != "" {
		return h.createContinuation(ctx, m, p)
	}
	if err := replayedCalls(p.Input); err != nil {
		return nil, err
	}
	return h.createWorkflowRun(ctx, m, p)
}

// InputInRequestMin is the size of a stored request from which the
// response records no input of its own when its input is the request's as
// it reads (no item_reference resolved): store.Response.Input stays nil and
// recovery reads the input from the request, with the one reader the HTTP
// parser uses, instead of holding its text twice. A smaller request's
// input is recorded, so that recovery never depends on the reader of a
// later build (the durable fact); a long one's is not, as its record would
// double the bytes stored for it (an 8 MiB text, 8 MiB more).
const InputInRequestMin = 64 << 10

// createWorkflowRun starts a new run of m's workflow with p's input.
func (h *Host) createWorkflowRun(ctx context.Context, m *model, p *CreateParams) (*store.Response, error) {
	runID := newID("run_")
	in, err := agent.WorkflowInput(m.wf, toMessages(append(slices.Clip(p.history), p.Input...)))
	if err != nil {
		return nil, &InputError{Param: "input", Code: "invalid_value", Message: err.Error()}
	}
	wr, err := m.wf.NewRun(runID, in)
	if err != nil {
		return nil, &InputError{Param: "input", Code: "invalid_value", Message: err.Error()}
	}
	parts, err := wr.Checkpoint()
	if err != nil {
		return nil, fmt.Errorf("host: initial checkpoint: %w", err)
	}
	cp := toStoreParts(parts)
	return h.createAndStart(ctx, m, p, &startSpec{runID: runID, checkpoint: cp, lastParts: cp,
		drive: func(r *run) func(context.Context) error { return h.driveWorkflow(r, wr) }})
}

// createContinuation continues p.PreviousResponseID under a new response,
// on its own run when it is the run's head and the run is idle. A
// conversation (a plain agent) continued from an earlier response, or from
// a head whose later state was deleted, branches: a new run from the state
// the previous response left, as the Responses API's previous_response_id
// allows. A workflow's is refused instead (409, 400): answering an old
// request again would redo what its answer decided; forking a run is an
// explicit operation, not a side effect of an answer.
func (h *Host) createContinuation(ctx context.Context, m *model, p *CreateParams) (*store.Response, error) {
	prev, sr, err := h.continuable(ctx, p)
	if err != nil {
		return nil, err
	}
	if prev.Model != m.ID {
		return nil, &InputError{Param: "model", Code: "invalid_value", Message: fmt.Sprintf(
			"model %q does not match model %q of previous response %s", m.ID, prev.Model, prev.ID)}
	}
	switch {
	case m.conversation && (sr.HeadResponseID != prev.ID || prev.CommitStep != sr.LastStep):
		return h.createBranch(ctx, m, p, prev)
	case sr.HeadResponseID != prev.ID:
		return nil, &ConflictError{Message: fmt.Sprintf("Response %s is not the latest response of its conversation (the latest is %s).",
			prev.ID, sr.HeadResponseID)}
	case prev.CommitStep != sr.LastStep:
		// The run's last commit is a later response's, deleted since:
		// its checkpoint and step are not prev's state, and resuming from
		// them would continue the deleted response. Deterministic, so a
		// 400 (SDKs would retry a 409).
		return nil, &InputError{Param: "previous_response_id", Code: "invalid_value", Message: fmt.Sprintf(
			"response %s cannot be continued: the run's last commit (step %d) belongs to a later response that was deleted",
			prev.ID, sr.LastStep)}
	}
	return h.continueFrom(ctx, m, p, prev, sr.ID)
}

// createBranch continues prev on a new run, which starts from a copy of the
// state prev's last commit left (kept by the store for every response,
// whatever KeepCheckpoints says); prev and its run are untouched.
func (h *Host) createBranch(ctx context.Context, m *model, p *CreateParams, prev *store.Response) (*store.Response, error) {
	return h.continueFrom(ctx, m, p, prev, "")
}

// continueFrom restores the state prev's commit left, delivers p's input to
// it and starts it under a new response: on runID, prev's own run (whose
// last commit is prev's), or, with runID "", on a new run branching from
// prev. Either way the run goes on from prev's step.
func (h *Host) continueFrom(ctx context.Context, m *model, p *CreateParams, prev *store.Response, runID string) (*store.Response, error) {
	cp, err := h.store.CheckpointGet(ctx, prev.RunID, prev.CommitStep)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &InputError{Param: "previous_response_id", Code: "invalid_value", Message: fmt.Sprintf(
			"response %s cannot be continued: the state it left (step %d of its run) is no longer kept", prev.ID, prev.CommitStep)}
	}
	if err != nil {
		return nil, fmt.Errorf("host: load the state of response %s: %w", prev.ID, err)
	}
	sp := &startSpec{runID: runID, lastStep: cp.Step, lastParts: cp.Parts}
	if runID == "" {
		sp.runID, sp.checkpoint, sp.branch = newID("run_"), cp.Parts, true
	}
	wparts, err := toWorkflowParts(cp.Parts)
	if err != nil {
		return nil, fmt.Errorf("host: the state of response %s: %w", prev.ID, err)
	}
	wr, err := m.wf.Restore(sp.runID, wparts)
	if err != nil {
		return nil, fmt.Errorf("host: restore the state of response %s: %w", prev.ID, err)
	}
	if err := h.deliverInput(ctx, m, prev.ID, sp.runID, wr, p.Input); err != nil {
		return nil, err
	}
	if sp.branch {
		h.metrics.branches.Inc()
	}
	sp.drive = func(r *run) func(context.Context) error { return h.driveWorkflow(r, wr) }
	return h.createAndStart(ctx, m, p, sp)
}

// continuable checks that p.PreviousResponseID can be continued: visible to
// the owner, completed or incomplete, and not already being continued by a
// turn in flight on its run (one turn per head at a time: the second gets
// a ConflictError, HTTP 409).
func (h *Host) continuable(ctx context.Context, p *CreateParams) (*store.Response, *store.Run, error) {
	prev, err := h.get(ctx, p.PreviousResponseID, p.Owner)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, &InputError{Param: "previous_response_id", Code: "not_found",
				Message: fmt.Sprintf("previous response with id '%s' not found", p.PreviousResponseID)}
		}
		return nil, nil, err
	}
	sr, err := h.store.RunGet(ctx, prev.RunID)
	if err != nil {
		return nil, nil, fmt.Errorf("host: run of response %s: %w", prev.ID, err)
	}
	switch {
	case prev.Status != store.StatusCompleted && prev.Status != store.StatusIncomplete:
		// incomplete (a reply cut short) continues, as on OpenAI.
		return nil, nil, &ConflictError{Message: fmt.Sprintf("Response %s is %s; only a completed or incomplete response can be continued.",
			prev.ID, prev.Status)}
	case sr.HeadResponseID == prev.ID && sr.Active:
		return nil, nil, &ConflictError{Message: fmt.Sprintf("Response %s is still in progress.", prev.ID)}
	case sr.Active && h.continuesInFlight(ctx, sr, prev.ID):
		return nil, nil, &ConflictError{Message: fmt.Sprintf(
			"Response %s is already being continued by %s, which is in progress; continue from that one once it ends.",
			prev.ID, sr.HeadResponseID)}
	}
	return prev, sr, nil
}

// continuesInFlight reports whether the head of sr, in flight, continues
// prevID.
func (h *Host) continuesInFlight(ctx context.Context, sr *store.Run, prevID string) bool {
	head, err := h.store.ResponseGet(ctx, sr.HeadResponseID)
	return err == nil && head.PreviousResponseID == prevID
}

// startSpec says how createAndStart positions and drives a run.
type startSpec struct {
	runID      string
	checkpoint []store.Part     // the first checkpoint of a new run (at lastStep); nil to continue a run
	lastStep   int64            // the run's last committed step
	lastParts  []store.Part     // its checkpoint
	branch     bool             // a new run branching from p.PreviousResponseID
	fork       *store.ForkPoint // a new run forked from that checkpoint (see fork)
	drive      func(*run) func(context.Context) error
}

// createAndStart durably creates the response with its response.created
// event (and, for a new run, its step-0 checkpoint), claims the lease and
// starts the run's goroutine.
func (h *Host) createAndStart(ctx context.Context, m *model, p *CreateParams, sp *startSpec) (*store.Response, error) {
	now := h.now()
	status := protocol.StatusInProgress
	if p.Background {
		status = protocol.StatusQueued
	}
	c, err := protocol.Create(&protocol.NewResponseParams{ID: newID("resp_"), Model: m.ID, Status: status,
		CreatedAt: now, PreviousResponseID: p.PreviousResponseID, Instructions: p.Instructions,
		Metadata: p.Metadata, Background: p.Background, Store: p.Store, Request: p.Request, Conversation: turnID(p.turn)})
	if err != nil {
		return nil, fmt.Errorf("host: create response: %w", err)
	}
	snap := c.Next.Response
	slot, capped := h.reserve(1)
	defer h.unreserve(slot)
	owner := h.cfg.HostID
	if capped && slot == 0 {
		owner = "" // queued: any host with capacity claims it
	}
	// The durable facts recovery reads instead of re-deriving them: the
	// publication mode decided by create (the model's default may change
	// before a recovery) and the input as read now (the reader may change),
	// unless it is the request's input as it reads (storedInput reads it
	// from the request then): the request is stored anyway, and the input
	// would be its text a second time, in another encoding.
	var input []byte
	if !p.inputInRequest {
		if input, err = json.Marshal(p.Input); err != nil {
			return nil, fmt.Errorf("host: encode input: %w", err)
		}
	}
	span, tc := h.startResponseSpan(ctx, snap.ID, sp.runID, m.ID, p.Background)
	cp := &store.ResponseCreateParams{
		Response: &store.Response{ID: snap.ID, PreviousResponseID: p.PreviousResponseID, Model: m.ID,
			Owner: p.Owner, Status: store.Status(status), Request: p.Request, Snapshot: c.Snapshot, CreatedAt: now,
			Publication: p.publication, Input: input, TraceContext: tc},
		RunID: sp.runID, Branch: sp.branch, Checkpoint: sp.checkpoint, Events: toEventInputs(c.Frames),
		LeaseOwner: owner, LeaseDuration: h.cfg.LeaseDuration, // the lease on the store's clock
		IdempotencyKey: p.IdempotencyKey, RequestHash: keyHash(p), Conversation: p.turn, ForkedFrom: sp.fork}
	if h.deferCreate(p, sp, owner) {
		// Written with the first commit (deferred.go).
		resp := pendingResponse(cp, now)
		r := h.newRun(m, resp, snap, sp.runID, store.Lease{Owner: owner, Epoch: store.NewRunEpoch}, sp.lastStep, sp.lastParts)
		r.info.Params, r.trace.span = p.params, span
		r.create = cp
		r.pending.Store(true)
		if err := h.startRun(r, sp.drive(r)); err != nil {
			return nil, err // nothing stored: the host is closing
		}
		h.metrics.createsDeferred.Inc()
		return resp, nil
	}
	res, err := h.store.ResponseCreate(ctx, cp)
	if err != nil {
		endSpan(span, err)
	}
	if ie, ok := errors.AsType[*store.IdempotencyError](err); ok {
		return h.replayRaced(ctx, p, ie) // a concurrent create with the key won
	}
	if err != nil {
		return nil, fmt.Errorf("host: create response: %w", err)
	}
	ferr := h.fault(ctx, &Fault{Point: FaultCreateAfterRecord, RunID: sp.runID, ResponseID: snap.ID})
	if owner == "" {
		h.log.Info("host: at MaxRuns; response queued for a host with capacity", "response_id", snap.ID)
		endSpan(span, nil, attrStopped.String("queued for a host with capacity"))
	} else {
		r := h.newRun(m, res.Response, snap, sp.runID, res.Run.Lease, sp.lastStep, sp.lastParts)
		r.info.Params, r.trace.span = p.params, span
		if err := h.startRun(r, sp.drive(r)); err != nil {
			// The response is durable; recovery (Start on any host) resumes it.
			h.log.Warn("host: created response not started here; left for recovery", "response_id", snap.ID, "err", err)
		}
	}
	if ferr != nil {
		// The response is durable and runs; only the reply is lost.
		h.metrics.failed(opCreate)
		h.log.Error("host: create failed after the response was stored; the run proceeds", "response_id", snap.ID,
			"err", ferr)
		return nil, fmt.Errorf("host: create response %s: %w", snap.ID, ferr)
	}
	return res.Response, nil
}

// withStoredRequest returns p with the request to store: the raw body,
// or one built from p when the caller (a library user) gave none. What
// recovery and input_items will read from it (the one reader,
// protocol.ReadInput) must be p's input: a request the reader refuses, or
// whose input differs from p.Input, is an *InputError before anything is
// stored; a request p.Parsed says ParseCreate read p.Input from is not read
// again. p itself is not changed.
func withStoredRequest(p *CreateParams) (*CreateParams, error) {
	q := *p
	if len(q.Request) == 0 {
		q.Request = protocol.BuildRequest(&protocol.RequestParams{Model: p.Model, Input: p.Input, Metadata: p.Metadata,
			Background: p.Background, Stream: p.Stream, Store: p.Store, Instructions: p.Instructions,
			PreviousResponseID: p.PreviousResponseID})
	}
	if p.Parsed.InputOf(q.Request, q.Input) {
		return &q, nil // read by the one reader from these very bytes
	}
	in, err := protocol.ReadInput(q.Request)
	if err != nil {
		if re, ok := errors.AsType[*protocol.RequestError](err); ok {
			return nil, &InputError{Param: re.Param, Code: re.Code, Message: re.Message}
		}
		return nil, &InputError{Param: "input", Code: "invalid_value", Message: "the request cannot be read: " + err.Error()}
	}
	if len(p.Request) > 0 {
		if !reflect.DeepEqual(in, p.Input) {
			return nil, &InputError{Param: "input", Code: "invalid_value",
				Message: "the input items do not match the input of the request to store"}
		}
		// Equal: the caller's items stay, and in (a second copy of every
		// text in them) is garbage at once.
		return &q, nil
	}
	q.Input = in
	return &q, nil
}

// toMessages converts input items to agent messages: the same mapping for
// workflows hosted natively and agents. Reasoning items carry nothing a
// hosted model reads back.
func toMessages(items []InputItem) []agent.Message {
	out := make([]agent.Message, 0, len(items))
	for _, it := range items {
		switch it.Type {
		case InputFunctionCallOutput:
			out = append(out, agent.Message{Role: agent.RoleTool, Text: it.Output, CallID: it.CallID})
		case protocol.InputFunctionCall:
			out = append(out, agent.Message{Role: agent.RoleAssistant, CallID: it.CallID, Name: it.Name, Arguments: it.Arguments})
		case protocol.InputToolCall: // the call and its output, as the model saw them
			out = append(out, agent.Message{Role: agent.RoleAssistant, CallID: it.CallID, Name: it.Name, Arguments: it.Arguments},
				agent.Message{Role: agent.RoleTool, CallID: it.CallID, Text: it.Output})
		case protocol.InputReasoning:
		default:
			role := agent.Role(it.Role)
			if role == "" {
				role = agent.RoleUser
			}
			out = append(out, agent.Message{Role: role, Text: it.Text, Parts: toParts(it.Parts)})
		}
	}
	return out
}

// replayedCalls checks the function_call_output items of a request without
// previous_response_id: each must answer a function_call item earlier in
// the same input (a client that keeps the conversation itself replays it
// whole, as the AI SDK's and LangChain's tool loops and OpenAI's
// function-calling guide do). An output with no such call would answer a
// call the server does not know: use previous_response_id for that.
func replayedCalls(input []InputItem) error {
	calls := map[string]bool{}
	for _, it := range input {
		switch it.Type {
		case protocol.InputFunctionCall:
			calls[it.CallID] = true
		case InputFunctionCallOutput:
			if !calls[it.CallID] {
				return &InputError{Param: "input", Code: "invalid_value", Message: fmt.Sprintf(
					"function_call_output (call_id %q) answers no function_call earlier in the input; "+
						"send the call with it, or continue the response that made it with previous_response_id", it.CallID)}
			}
		}
	}
	return nil
}

// deliverInput gives the input of a response continuing prevID to wr, the
// run runID: a plain agent's conversation takes it as its next turn's
// input; a workflow takes the answers to its pending requests.
func (h *Host) deliverInput(ctx context.Context, m *model, prevID, runID string, wr *workflow.Run, input []InputItem) error {
	if m.conversation {
		if err := wr.Send(toMessages(input)); err != nil {
			return &InputError{Param: "input", Code: "invalid_value", Message: err.Error()}
		}
		return nil
	}
	if len(wr.Pending()) > 0 {
		return h.applyAnswers(ctx, runID, wr, input)
	}
	// A workflow that ended (or idles with nothing pending) runs again: a
	// new turn whose input goes to its start executor, its state kept.
	// Answers have nothing to answer.
	msgs := toMessages(input)
	for _, it := range input {
		if it.Type == InputFunctionCallOutput {
			return &ConflictError{Message: fmt.Sprintf("Response %s has no pending function calls (already answered).", prevID)}
		}
	}
	in, err := agent.WorkflowInput(m.wf, msgs)
	if err == nil {
		err = wr.Send(in)
	}
	if err != nil {
		return &InputError{Param: "input", Code: "invalid_value", Message: err.Error()}
	}
	return nil
}

// toParts converts a message's content parts (nil for text only).
func toParts(ps []protocol.Part) []agent.Part {
	if ps == nil {
		return nil
	}
	out := make([]agent.Part, len(ps))
	for i, p := range ps {
		switch p.Type {
		case protocol.PartImage:
			out[i] = agent.Part{Kind: agent.PartImage, URL: p.ImageURL, Detail: p.Detail}
		case protocol.PartFile:
			url := p.FileData
			if url == "" {
				url = p.FileURL
			}
			out[i] = agent.Part{Kind: agent.PartFile, URL: url, Filename: p.Filename}
		default:
			out[i] = agent.Part{Kind: agent.PartText, Text: p.Text}
		}
	}
	return out
}

// applyAnswers delivers the function_call_output items of input to wr, the
// run runID. An unknown call id, an answer the request refuses or an input
// without any answer is an *InputError. Recovery calls it too, with the
// stored request, only when no commit absorbed the answers yet (see
// resumeDriver), so the same rules hold.
func (h *Host) applyAnswers(ctx context.Context, runID string, wr *workflow.Run, input []InputItem) error {
	pending := map[string]workflow.Request{}
	for _, req := range wr.Pending() {
		pending[req.ID] = req
	}
	answered := 0
	for _, it := range input {
		if it.Type != InputFunctionCallOutput {
			continue
		}
		req, ok := pending[it.CallID]
		if !ok {
			return &InputError{Param: "input", Code: "invalid_value",
				Message: fmt.Sprintf("no pending function call with call_id %q", it.CallID)}
		}
		if err := h.fault(ctx, &Fault{Point: FaultHITLDeliver, RunID: runID}); err != nil {
			h.metrics.failed(opDeliver)
			h.log.Error("host: delivering an answer failed", "run_id", runID, "call_id", it.CallID, "err", err)
			return fmt.Errorf("host: deliver output for call_id %q: %w", it.CallID, err)
		}
		v, err := agent.AnswerValue(req, it.Output)
		if err == nil {
			err = wr.Respond(req.ID, v)
		}
		if err != nil {
			return &InputError{Param: "input", Code: "invalid_value",
				Message: fmt.Sprintf("output for call_id %q: %v", it.CallID, err)}
		}
		delete(pending, it.CallID)
		answered++
	}
	if answered == 0 {
		return &InputError{Param: "input", Code: "invalid_value",
			Message: "input must contain function_call_output items answering the pending function calls"}
	}
	return nil
}

// storedInput returns the input items of a stored response as the host
// read them at create (store.Response.Input), so that recovery redoes
// exactly the work the request asked for: re-deliver answers or a
// conversation's input. A response that recorded none (its input is its
// request's, see CreateParams.inputInRequest, or it was stored before the
// record kept them) is read from its request by the one reader the HTTP
// parser uses. Input the host cannot read is an error, never a guess.
func storedInput(resp *store.Response) ([]InputItem, error) {
	if resp.Input != nil {
		var in []InputItem
		if err := json.Unmarshal(resp.Input, &in); err != nil {
			return nil, fmt.Errorf("host: read the stored input of response %s: %w: %w", resp.ID, store.ErrCorrupt, err)
		}
		return in, nil
	}
	in, err := protocol.ReadInput(resp.Request)
	if err != nil {
		return nil, fmt.Errorf("host: read the stored request of response %s: %w", resp.ID, err)
	}
	return in, nil
}
