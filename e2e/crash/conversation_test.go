package crash

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/superstep/superstep/internal/testkit/pgtest"
	"github.com/superstep/superstep/internal/testkit/proctest"
	"github.com/superstep/superstep/internal/testkit/resumeclient"
	"github.com/superstep/superstep/internal/testkit/verifytest"
	"github.com/superstep/superstep/localmodel"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/verify"
)

// TestCrash_Conversation_* drive one multi-turn conversation on a proxied
// local model (serve --model-server local --proxy-models all: local-echo
// is a durable plain agent, a conversation model) twice: once without
// kills (the reference), then with the server SIGKILLed at seeded random
// points of the turns (after the k-th event a client streamed, k = 1 being
// right after response.created; a random time after a create was sent;
// again during the retry) and restarted on the same database. Every
// create carries an Idempotency-Key; a client whose request a kill cut
// sends it again with the same key (a stream then replays from sequence
// 0), or, when it streamed and knows the id, resumes with starting_after.
// Some turns offer a client tool (tool_choice naming it, or
// metadata.follow_tools) and end with its function_call; the next turn
// answers it with function_call_output and previous_response_id. Turns
// are streamed, blocking, or background and polled.
//
// At the end, after every turn's create was sent once more with its key:
// each turn's key gave one response id; the database holds
// exactly the two conversations' responses, each conversation on one run,
// linked by previous_response_id in turn order; every turn's output,
// call id and usage equal the reference's (the local model's input_tokens
// count the words of the whole history, so a turn lost or doubled in the
// history the model got changes them); verify finds every client's
// stream equal to the log, and store.Check and `superstep check` pass.
func TestCrash_Conversation_SQLite(t *testing.T) {
	t.Parallel()
	db := filepath.Join(proctest.WorkDir(t, *flagKeep, "superstep-crash"), "superstep.db")
	runConversation(t, &backend{
		dbArg: db,
		open:  func(ctx context.Context) (store.Store, error) { return sqlite.Open(ctx, db, nil) },
	})
}

func TestCrash_Conversation_Postgres(t *testing.T) {
	t.Parallel()
	db := pgtest.Database(t, "superstep_crash")
	runConversation(t, &backend{
		dbArg:     db,
		open:      func(ctx context.Context) (store.Store, error) { return postgres.Open(ctx, db, nil) },
		extraArgs: postgresServeArgs,
	})
}

// convTool is the client tool some turns offer.
const convTool = "lookup_order"

// turnKind is what a turn sends.
type turnKind int

const (
	// kindText is a user message.
	kindText turnKind = iota
	// kindCallChoice is a user message offering the tool with tool_choice
	// naming it: the turn ends with its function_call.
	kindCallChoice
	// kindCallFollow is the same with metadata.follow_tools instead.
	kindCallFollow
	// kindAnswer answers the previous turn's function_call.
	kindAnswer
)

func (k turnKind) String() string {
	return [...]string{"text", "call(tool_choice)", "call(follow_tools)", "answer"}[k]
}

// turnMode is how a turn's create is sent and its end awaited.
type turnMode int

const (
	modeStream     turnMode = iota // stream: true, background: true
	modeBlocking                   // a plain create, which waits for the end
	modeBackground                 // background: true, then GET until done
)

func (m turnMode) String() string { return [...]string{"stream", "blocking", "background"}[m] }

// convPattern is the conversation's turn kinds, repeated to its length.
var convPattern = []turnKind{kindText, kindCallChoice, kindAnswer, kindText, kindCallFollow, kindAnswer}

// convTurns returns the script's length: 20 turns with the default
// -kills, more with more.
func convTurns() int { return max(20, *flagKills*2/5) }

// turnKindOf returns turn i's kind; a call is never the last turn.
func turnKindOf(i, n int) turnKind {
	k := convPattern[i%len(convPattern)]
	if i == n-1 && (k == kindCallChoice || k == kindCallFollow) {
		return kindText
	}
	return k
}

// turnModeOf returns turn i's mode: half the turns stream.
func turnModeOf(i int) turnMode {
	return [...]turnMode{modeStream, modeBlocking, modeStream, modeBackground}[i%4]
}

// convResult is what the checks read of a turn's final Response.
type convResult struct {
	ID, Prev, Status string
	Outcome          verify.Outcome
	// CallID is the call id of the last function_call item ("" if none).
	CallID                    string
	InputTokens, OutputTokens int64
}

// parseResult reads a Response object.
func parseResult(raw []byte) (*convResult, error) {
	var r struct {
		ID     string `json:"id"`
		Prev   string `json:"previous_response_id"`
		Status string `json:"status"`
		Output []struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		} `json:"output"`
		Usage *struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("crash: a Response that is not JSON: %w: %s", err, raw)
	}
	out, err := verify.SnapshotOutcome(raw)
	if err != nil {
		return nil, err
	}
	res := &convResult{ID: r.ID, Prev: r.Prev, Status: r.Status, Outcome: out}
	for _, it := range r.Output {
		if it.Type == "function_call" {
			res.CallID = it.CallID
		}
	}
	if r.Usage != nil {
		res.InputTokens, res.OutputTokens = r.Usage.InputTokens, r.Usage.OutputTokens
	}
	return res, nil
}

// terminalResponse returns the response object of a stream's terminal
// event.
func terminalResponse(st *resumeclient.Stream) (*convResult, error) {
	if !st.Terminal || len(st.View.Events) == 0 {
		return nil, fmt.Errorf("crash: %s: no terminal event", st.Name)
	}
	var ev struct {
		Response json.RawMessage `json:"response"`
	}
	data := st.View.Events[len(st.View.Events)-1].Data
	if err := json.Unmarshal(data, &ev); err != nil || len(ev.Response) == 0 {
		return nil, fmt.Errorf("crash: %s: terminal event without a response: %s", st.Name, data)
	}
	return parseResult(ev.Response)
}

// turnParams returns turn i's create request; prev is the previous turn's
// result (nil for the first).
func turnParams(i, n int, prev *convResult) responses.ResponseNewParams {
	md := map[string]string{"workload": fmt.Sprintf("conv-turn-%02d", i), "token_delay_ms": "4"}
	p := responses.ResponseNewParams{Model: localmodel.DefaultModel, Store: openai.Bool(true), Metadata: md}
	if prev != nil {
		p.PreviousResponseID = openai.String(prev.ID)
	}
	text := fmt.Sprintf("turn %d: tell me how the lighthouse keeper answered message %d before the winter storms", i, i)
	p.Input = responses.ResponseNewParamsInputUnion{OfString: openai.String(text)}
	tools := []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: convTool, Strict: openai.Bool(false),
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}, "required": []string{"id"}}}}}
	switch turnKindOf(i, n) {
	case kindCallChoice:
		p.Tools = tools
		p.ToolChoice.OfFunctionTool = &responses.ToolChoiceFunctionParam{Name: convTool}
	case kindCallFollow:
		p.Tools = tools
		md["follow_tools"] = "true"
	case kindAnswer:
		p.Tools = tools
		md["follow_tools"] = "true"
		callID := ""
		if prev != nil {
			callID = prev.CallID
		}
		out := responses.ResponseInputItemParamOfFunctionCallOutput(fmt.Sprintf("order %d shipped on day %d", i, i+1))
		out.OfFunctionCallOutput.CallID = openai.String(callID)
		p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}
	}
	if turnModeOf(i) != modeBlocking {
		p.Background = openai.Bool(true)
	}
	return p
}

// killPlan is where a turn's kills go: after the afterEvents-th event a
// client streamed, or afterMS after the create was sent; with again >= 0,
// a second one that long (ms) after the first retry was sent.
type killPlan struct {
	afterEvents, afterMS, again int
}

func (p killPlan) String() string {
	var parts []string
	if p.afterEvents > 0 {
		parts = append(parts, fmt.Sprintf("after event %d", p.afterEvents))
	}
	if p.afterMS >= 0 {
		parts = append(parts, fmt.Sprintf("%dms after the create", p.afterMS))
	}
	if p.again >= 0 {
		parts = append(parts, fmt.Sprintf("%dms into the retry", p.again))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// drawPlan draws turn i's kill plan.
func drawPlan(rng *rand.Rand, mode turnMode) killPlan {
	p := killPlan{afterMS: -1, again: -1}
	r := rng.IntN(8)
	if r < 1 {
		return p
	}
	if mode == modeStream && r%2 == 0 {
		p.afterEvents = 1 + rng.IntN(20)
	} else {
		p.afterMS = rng.IntN(120)
	}
	if r >= 6 {
		p.again = rng.IntN(80)
	}
	return p
}

// convRun drives one run of the conversation script.
type convRun struct {
	t    *testing.T
	cl   *cluster
	name string
	// rng draws the kill plans and the retry choices; kill is false for the
	// reference run.
	rng  *rand.Rand
	kill bool
	n    int

	killMu  sync.Mutex
	pending sync.WaitGroup
	// kills says where each kill landed.
	kills []string
	// ids are the response ids each turn's key was answered with.
	ids []map[string]bool
	// streams are every client stream, for verify.
	streams []*resumeclient.Stream
	results []*convResult
	// params are the turns' create requests.
	params []responses.ResponseNewParams
	// resumes and reposts count the retries of cut streams by kind.
	resumes, reposts int
	// conv, when set, is the conversation the turns name (the
	// conversation parameter) instead of previous_response_id.
	conv string
}

// turnState is one turn's kill triggers.
type turnState struct {
	cr         *convRun
	i          int
	plan       killPlan
	mu         sync.Mutex
	events     int
	fired      bool
	againArmed bool
	timers     []*time.Timer
	// closed is set when the turn is over: no trigger fires after.
	closed bool
}

// fire kills the server in the background and restarts it. ts.mu is
// held, and the turn not over.
func (ts *turnState) fire(ctx context.Context, where string) {
	ts.cr.pending.Add(1)
	go func() {
		defer ts.cr.pending.Done()
		ts.cr.killAndRestart(ctx, fmt.Sprintf("turn %d (%s, %s): %s", ts.i, turnKindOf(ts.i, ts.cr.n), turnModeOf(ts.i), where))
	}()
}

// onEvent counts the events clients streamed in the turn and fires the
// event trigger.
func (ts *turnState) onEvent(ctx context.Context, typ string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.events++
	if !ts.closed && ts.cr.kill && !ts.fired && ts.plan.afterEvents > 0 && ts.events == ts.plan.afterEvents {
		ts.fired = true
		ts.fire(ctx, fmt.Sprintf("after streamed event %d (%s)", ts.events, typ))
	}
}

// sent arms the time trigger when the turn's first create is sent.
func (ts *turnState) sent(ctx context.Context) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if !ts.cr.kill || ts.fired || ts.plan.afterMS < 0 || len(ts.timers) > 0 {
		return
	}
	ts.after(ctx, ts.plan.afterMS, fmt.Sprintf("%dms after the create was sent", ts.plan.afterMS))
	ts.fired = true
}

// retrying arms the second kill when the first retry is sent.
func (ts *turnState) retrying(ctx context.Context) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if !ts.cr.kill || ts.againArmed || ts.plan.again < 0 {
		return
	}
	ts.againArmed = true
	ts.after(ctx, ts.plan.again, fmt.Sprintf("%dms into the retry", ts.plan.again))
}

// after fires ms from now unless the turn is over by then. ts.mu is held.
func (ts *turnState) after(ctx context.Context, ms int, where string) {
	ts.timers = append(ts.timers, time.AfterFunc(time.Duration(ms)*time.Millisecond, func() {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		if !ts.closed {
			ts.fire(ctx, where)
		}
	}))
}

// done stops the triggers that did not fire and waits for the restarts
// of those that did.
func (ts *turnState) done() {
	ts.mu.Lock()
	ts.closed = true
	for _, tm := range ts.timers {
		tm.Stop()
	}
	ts.mu.Unlock()
	ts.cr.pending.Wait()
}

// killAndRestart SIGKILLs the server and starts a new one on the same
// database.
func (cr *convRun) killAndRestart(ctx context.Context, where string) {
	cr.killMu.Lock()
	defer cr.killMu.Unlock()
	if err := cr.cl.kill(); err != nil {
		cr.t.Errorf("kill at %s: %v", where, err)
		return
	}
	cr.kills = append(cr.kills, where)
	if err := cr.cl.start(ctx); err != nil {
		cr.t.Errorf("restart after the kill at %s: %v", where, err)
	}
}

// key returns turn i's Idempotency-Key.
func (cr *convRun) key(i int) string { return fmt.Sprintf("%s-turn-%02d", cr.name, i) }

// saw records that turn i's key was answered with response id.
func (cr *convRun) saw(i int, id string) {
	if id != "" {
		cr.ids[i][id] = true
	}
}

// run drives the whole conversation.
func (cr *convRun) run(ctx context.Context) {
	cr.ids = make([]map[string]bool, cr.n)
	var prev *convResult
	for i := range cr.n {
		cr.ids[i] = map[string]bool{}
		ts := &turnState{cr: cr, i: i, plan: killPlan{afterMS: -1, again: -1}}
		if cr.kill {
			ts.plan = drawPlan(cr.rng, turnModeOf(i))
		}
		params := turnParams(i, cr.n, prev)
		if cr.conv != "" {
			params = inConversation(params, cr.conv)
		}
		var res *convResult
		switch turnModeOf(i) {
		case modeStream:
			res = cr.streamTurn(ctx, ts, params)
		default:
			res = cr.plainTurn(ctx, ts, params)
		}
		ts.done()
		if res.Status != "completed" {
			cr.t.Fatalf("%s: turn %d (%s) ended %s: %v", cr.name, i, ts.plan, res.Status, res.Outcome)
		}
		// Now and then the client sends the finished turn's create again:
		// the same key must give the same response.
		if cr.rng.IntN(4) == 0 {
			cr.resend(ctx, i, params)
		}
		cr.results = append(cr.results, res)
		cr.params = append(cr.params, params)
		prev = res
	}
}

// resendAll sends every turn's create again with its key, late, as a
// duplicate delivered after the conversation went on would arrive.
func (cr *convRun) resendAll(ctx context.Context) {
	for i, p := range cr.params {
		cr.resend(ctx, i, p)
	}
}

// client returns a client of the server up now.
func (cr *convRun) client(ctx context.Context) openai.Client {
	base, err := cr.cl.current(ctx)
	if err != nil {
		cr.t.Fatalf("%s: no server: %v", cr.name, err)
	}
	return newClient(cr.cl, base)
}

// newTurnStream returns a client stream of turn i counting events.
func (cr *convRun) newTurnStream(ctx context.Context, ts *turnState, name string) *resumeclient.Stream {
	st := &resumeclient.Stream{Name: name, APIKey: cr.cl.key, Host: cr.cl.host, OnEvent: func(typ string) { ts.onEvent(ctx, typ) }}
	cr.streams = append(cr.streams, st)
	return st
}

// post sends turn i's create as a stream with its key and reads it until
// it ends; it fails the test on a 4xx.
func (cr *convRun) post(ctx context.Context, st *resumeclient.Stream, i int, params responses.ResponseNewParams) {
	base, err := cr.cl.current(ctx)
	if err != nil {
		cr.t.Fatalf("%s: no server: %v", cr.name, err)
	}
	st.Base = base
	c := newClient(cr.cl, base)
	err = st.Read(c.Responses.NewStreaming(ctx, params, option.WithHeader("Idempotency-Key", cr.key(i))))
	st.LastErr = err
	if fatal := resumeclient.FatalHTTP(err); fatal != nil {
		cr.t.Fatalf("%s: turn %d: POST with key %s: %v", cr.name, i, cr.key(i), fatal)
	}
	cr.saw(i, st.ID)
}

// streamTurn creates turn i as a stream and follows it to its end: a cut
// create is sent again with the same key, or, once the id is known,
// resumed with starting_after (each at random).
func (cr *convRun) streamTurn(ctx context.Context, ts *turnState, params responses.ResponseNewParams) *convResult {
	i := ts.i
	first := len(cr.streams)
	var cur *resumeclient.Stream // the last stream that got the id
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			cr.t.Fatalf("%s: turn %d: %v", cr.name, i, ctx.Err())
		}
		if cur != nil && cr.rng.IntN(2) == 0 {
			cr.resumes++
			ts.retrying(ctx)
			if err := cur.Follow(ctx); err != nil {
				cr.t.Fatalf("%s: turn %d: %v", cr.name, i, err)
			}
			if !cur.Terminal {
				cr.t.Fatalf("%s: turn %d: the stream of %s ended cleanly before its terminal event", cr.name, i, cur.ID)
			}
			break
		}
		st := cr.newTurnStream(ctx, ts, fmt.Sprintf("%s-turn%02d-post%d", cr.name, i, attempt))
		if attempt > 0 {
			cr.reposts++
			ts.retrying(ctx)
		} else {
			ts.sent(ctx)
		}
		cr.post(ctx, st, i, params)
		if st.ID != "" {
			cur = st
		}
		if st.Terminal {
			break
		}
		sleep(ctx, 10*time.Millisecond)
	}
	// The streams the client gave up for another POST stopped on purpose.
	for _, st := range cr.streams[first:] {
		st.View.Partial = !st.Terminal
	}
	res, err := terminalResponse(cur)
	if err != nil {
		cr.t.Fatal(err)
	}
	return res
}

// plainTurn creates turn i without streaming, retrying with the same key
// until a reply; a background turn then polls until the end.
func (cr *convRun) plainTurn(ctx context.Context, ts *turnState, params responses.ResponseNewParams) *convResult {
	i := ts.i
	var resp *responses.Response
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			cr.t.Fatalf("%s: turn %d: %v", cr.name, i, ctx.Err())
		}
		if attempt == 0 {
			ts.sent(ctx)
		} else {
			ts.retrying(ctx)
		}
		c := cr.client(ctx)
		r, err := c.Responses.New(ctx, params, option.WithHeader("Idempotency-Key", cr.key(i)))
		if err == nil {
			resp = r
			cr.saw(i, r.ID)
			break
		}
		if fatal := resumeclient.FatalHTTP(err); fatal != nil {
			cr.t.Fatalf("%s: turn %d: POST with key %s: %v", cr.name, i, cr.key(i), fatal)
		}
		sleep(ctx, 10*time.Millisecond)
	}
	for !isDone(string(resp.Status)) {
		sleep(ctx, 10*time.Millisecond)
		if ctx.Err() != nil {
			cr.t.Fatalf("%s: turn %d: %s still %s: %v", cr.name, i, resp.ID, resp.Status, ctx.Err())
		}
		c := cr.client(ctx)
		r, err := c.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{})
		if fatal := resumeclient.FatalHTTP(err); fatal != nil {
			cr.t.Fatalf("%s: turn %d: GET %s: %v", cr.name, i, resp.ID, fatal)
		}
		if err == nil {
			resp = r
		}
	}
	res, err := parseResult([]byte(resp.RawJSON()))
	if err != nil {
		cr.t.Fatal(err)
	}
	return res
}

// isDone reports whether a response status is final.
func isDone(status string) bool {
	return status == "completed" || status == "failed" || status == "incomplete" || status == "cancelled"
}

// resend sends finished turn i's create once more with its key, as a
// client that lost the reply would, and records the id it gets.
func (cr *convRun) resend(ctx context.Context, i int, params responses.ResponseNewParams) {
	if turnModeOf(i) == modeStream {
		st := &resumeclient.Stream{Name: fmt.Sprintf("%s-turn%02d-resend", cr.name, i), APIKey: cr.cl.key, Host: cr.cl.host}
		cr.streams = append(cr.streams, st)
		cr.post(ctx, st, i, params)
		if !st.Terminal {
			cr.t.Errorf("%s: turn %d: the stream of a finished turn's create, sent again with its key, ended before its terminal event (%v)", cr.name, i, st.LastErr)
		}
		return
	}
	c := cr.client(ctx)
	r, err := c.Responses.New(ctx, params, option.WithHeader("Idempotency-Key", cr.key(i)))
	if err != nil {
		cr.t.Fatalf("%s: turn %d: resend with key %s: %v", cr.name, i, cr.key(i), err)
	}
	cr.saw(i, r.ID)
}

// runConversation runs the reference conversation, then the one with
// kills, and checks both.
func runConversation(t *testing.T, b *backend) {
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	n := convTurns()
	t.Logf("seed %d, %d turns (replay: go test ./e2e/crash -run '^%s$' -seed %d -kills %d)", seed, n, t.Name(), seed, *flagKills)
	dir := proctest.WorkDir(t, *flagKeep, "superstep-crash")
	args := append(append([]string(nil), b.extraArgs...), "--model-server", "local", "--proxy-models", "all")
	cl := newCluster(binary, b.dbArg, dir, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second+time.Duration(n)*5*time.Second)
	defer cancel()
	t.Cleanup(cl.killAtCleanup)
	if err := cl.start(ctx); err != nil {
		t.Fatal(err)
	}
	ref := &convRun{t: t, cl: cl, name: "ref", n: n, rng: rand.New(rand.NewPCG(seed, 1))}
	ref.run(ctx)
	checkScript(t, ref)
	ch := &convRun{t: t, cl: cl, name: fmt.Sprintf("chaos-%d", seed), n: n, rng: rand.New(rand.NewPCG(seed, 0xc0de)), kill: true}
	began := time.Now()
	ch.run(ctx)
	t.Logf("%d kills in %v:\n  %s", len(ch.kills), time.Since(began).Round(time.Millisecond), strings.Join(ch.kills, "\n  "))
	t.Logf("cut streams: %d resumed with starting_after, %d sent again with their key", ch.resumes, ch.reposts)
	if len(ch.kills) < n/5 {
		t.Errorf("seed %d: only %d kills landed in %d turns: the test did not test recovery", seed, len(ch.kills), n)
	}
	for _, cr := range []*convRun{ref, ch} {
		cr.resendAll(ctx)
		checkKeys(t, cr)
		checkServed(ctx, t, cr)
	}
	checkSameAnswers(t, seed, ref, ch)
	if err := cl.stop(30 * time.Second); err != nil {
		t.Error(err)
	}
	checkConversationDatabase(ctx, t, b, seed, ref, ch)
	verifytest.CheckCommand(ctx, t, binary, b.dbArg)
}

// checkScript checks that the reference run did what the script means:
// text turns echo the user, call turns end with a function_call of the
// tool, answers read its output.
func checkScript(t *testing.T, ref *convRun) {
	for i, r := range ref.results {
		var ok bool
		switch turnKindOf(i, ref.n) {
		case kindText:
			ok = len(r.Outcome.Output) == 1 && strings.HasPrefix(r.Outcome.Output[0], fmt.Sprintf("Echo: turn %d: ", i))
		case kindCallChoice, kindCallFollow:
			ok = len(r.Outcome.Output) == 1 && r.Outcome.Output[0] == `function_call `+convTool+` {"id":"x"}` && r.CallID != ""
		case kindAnswer:
			ok = slices.Equal(r.Outcome.Output, []string{fmt.Sprintf("Tool %s returned: order %d shipped on day %d", convTool, i, i+1)})
		}
		if !ok || r.InputTokens == 0 {
			t.Errorf("reference turn %d (%s): %v, call id %q, %d input tokens", i, turnKindOf(i, ref.n), r.Outcome, r.CallID, r.InputTokens)
		}
		if i > 0 && r.InputTokens <= ref.results[i-1].InputTokens {
			t.Errorf("reference turn %d: %d input tokens, turn %d had %d: the history does not grow", i, r.InputTokens, i-1, ref.results[i-1].InputTokens)
		}
	}
}

// checkKeys requires each turn's key to have been answered with one
// response id, the turn's.
func checkKeys(t *testing.T, cr *convRun) {
	for i, ids := range cr.ids {
		if len(ids) != 1 || !ids[cr.results[i].ID] {
			t.Errorf("%s: turn %d's Idempotency-Key %s was answered with response ids %v; the turn ended as %s",
				cr.name, i, cr.key(i), slices.Sorted(maps.Keys(ids)), cr.results[i].ID)
		}
	}
}

// checkServed reads every turn back from the server: the same status,
// output and usage, linked to the turn before.
func checkServed(ctx context.Context, t *testing.T, cr *convRun) {
	c := cr.client(ctx)
	for i, want := range cr.results {
		r, err := c.Responses.Get(ctx, want.ID, responses.ResponseGetParams{})
		if err != nil {
			t.Errorf("%s: GET turn %d (%s): %v", cr.name, i, want.ID, err)
			continue
		}
		got, err := parseResult([]byte(r.RawJSON()))
		if err != nil {
			t.Error(err)
			continue
		}
		if !(got.ID == want.ID && got.Status == want.Status && got.Outcome.Equal(want.Outcome) &&
			got.CallID == want.CallID && got.InputTokens == want.InputTokens && got.OutputTokens == want.OutputTokens && got.Prev == want.Prev) {
			t.Errorf("%s: turn %d: GET %s shows %+v; the client was shown %+v", cr.name, i, want.ID, got, want)
		}
		wantPrev := ""
		if i > 0 && cr.conv == "" {
			wantPrev = cr.results[i-1].ID
		}
		if got.Prev != wantPrev {
			t.Errorf("%s: turn %d (%s): previous_response_id %q, want the turn before, %q", cr.name, i, want.ID, got.Prev, wantPrev)
		}
	}
}

// checkSameAnswers requires every turn of the run with kills to end as
// the reference's did: what the local model answers to the same history.
func checkSameAnswers(t *testing.T, seed uint64, ref, ch *convRun) {
	for i := range ref.results {
		r, c := ref.results[i], ch.results[i]
		if !c.Outcome.Equal(r.Outcome) || c.CallID != r.CallID || c.InputTokens != r.InputTokens || c.OutputTokens != r.OutputTokens {
			t.Errorf("seed %d: turn %d (%s, %s) ended %v, call id %q, usage %d in / %d out; the crash-free run: %v, call id %q, usage %d in / %d out",
				seed, i, turnKindOf(i, ref.n), turnModeOf(i), c.Outcome, c.CallID, c.InputTokens, c.OutputTokens,
				r.Outcome, r.CallID, r.InputTokens, r.OutputTokens)
		}
	}
}

// checkConversationDatabase reads the database the server left: exactly
// the two conversations' responses, each on one run of its own and linked
// in turn order, with logs every client's stream and the reference
// outcomes agree with (package verify), and store.Check passing.
func checkConversationDatabase(ctx context.Context, t *testing.T, b *backend, seed uint64, ref, ch *convRun) {
	s, err := b.open(ctx)
	if err != nil {
		t.Fatalf("open the database: %v", err)
	}
	defer s.Close()
	stored := map[string]*store.Response{}
	err = verifytest.ForEachResponse(ctx, s, func(_ *store.Run, r *store.Response) error {
		stored[r.ID] = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 2*ref.n {
		t.Errorf("seed %d: the database holds %d responses; the two conversations have %d turns", seed, len(stored), 2*ref.n)
	}
	for _, cr := range []*convRun{ref, ch} {
		for i, res := range cr.results {
			r := stored[res.ID]
			if r == nil {
				t.Errorf("%s: turn %d's response %s is not in the database", cr.name, i, res.ID)
				continue
			}
			delete(stored, res.ID)
			if i > 0 && r.PreviousResponseID != cr.results[i-1].ID {
				t.Errorf("%s: turn %d (%s) is stored after %q, want %q", cr.name, i, r.ID, r.PreviousResponseID, cr.results[i-1].ID)
			}
			if w := verifytest.WorkloadOf(r.Request); w != fmt.Sprintf("conv-turn-%02d", i) {
				t.Errorf("%s: turn %d (%s) stored with the request of %q", cr.name, i, r.ID, w)
			}
		}
	}
	for id, r := range stored {
		t.Errorf("seed %d: response %s (%s, previous %q) belongs to no turn: a doubled turn", seed, id, verifytest.WorkloadOf(r.Request), r.PreviousResponseID)
	}
	runs := map[string]string{}
	err = verifytest.ForEachResponse(ctx, s, func(_ *store.Run, r *store.Response) error {
		runs[r.ID] = r.RunID
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, cr := range []*convRun{ref, ch} {
		first := runs[cr.results[0].ID]
		for i, res := range cr.results {
			if runs[res.ID] != first {
				t.Errorf("%s: turn %d (%s) is on run %s, turn 0 on %s: the conversation branched", cr.name, i, res.ID, runs[res.ID], first)
			}
		}
	}
	if runs[ref.results[0].ID] == runs[ch.results[0].ID] {
		t.Errorf("the two conversations share run %s", runs[ref.results[0].ID])
	}

	refs := map[string]verify.Outcome{}
	for i, r := range ref.results {
		refs[fmt.Sprintf("conv-turn-%02d", i)] = r.Outcome
	}
	in := &verify.Input{}
	verifytest.AddResponses(ctx, t, s, in, resumeclient.ViewsByID(append(ref.streams, ch.streams...)...), refs, nil)
	rep := verify.Check(in)
	t.Logf("%v", rep)
	if err := rep.Err(); err != nil {
		t.Errorf("seed %d: %v", seed, err)
	}
}
