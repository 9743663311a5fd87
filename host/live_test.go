package host_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/verify"
	"github.com/superstep/superstep/workflow"
)

var (
	liveMD    = map[string]string{"publication": "live"}
	streamRef = verify.Outcome{Status: "completed", Output: []string{"x one two three", "done"}}
)

// deltas returns the output_text.delta texts of evs.
func deltas(evs []event) []string {
	var out []string
	for _, e := range evs {
		if e.Type == "response.output_text.delta" {
			out = append(out, e.Delta)
		}
	}
	return out
}

// In live mode each text delta is in the log (appended outside a commit,
// step -1) before the commit closes its item; in committed mode a
// superstep's text arrives whole with its commit.
func TestHost_Live_Publication(t *testing.T) {
	t.Parallel()
	forEachHosting(t, examples.Stream, func(t *testing.T, model string) {
		sc := newScenario(t, host.Config{})
		live := sc.create(model, "x", liveMD)
		committed := sc.create(model, "x", nil)
		sc.waitDone(live.ID)
		sc.waitDone(committed.ID)
		sc.check(map[string]verify.Outcome{live.ID: streamRef, committed.ID: streamRef})
		evs := collect(t, sc.host(), live.ID, -1)
		if got := deltas(evs); !slices.Equal(got, []string{"x ", "one ", "two ", "three", "done"}) {
			t.Fatalf("live deltas %q", got)
		}
		if got := deltas(collect(t, sc.host(), committed.ID, -1)); !slices.Equal(got, []string{"x one two three", "done"}) {
			t.Fatalf("committed deltas %q", got)
		}
		_, log, err := verify.Load(testCtx(t), sc.store(), live.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range log {
			isDelta := ev.Type == "response.output_text.delta"
			if isDelta != (ev.Step == -1) && ev.Type != "response.output_item.added" &&
				ev.Type != "response.content_part.added" && ev.Type != "response.in_progress" {
				t.Fatalf("event %d %s written at step %d", ev.Seq, ev.Type, ev.Step)
			}
		}
	})
}

func TestHost_Live_BadMode(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, err := b.host.Create(testCtx(t), &host.CreateParams{Model: examples.Stream, Metadata: map[string]string{"publication": "eventually"},
		Input: []host.InputItem{{Type: host.InputMessage, Text: "x"}}})
	var ie *host.InputError
	if !errors.As(err, &ie) || ie.Param != "metadata" {
		t.Fatalf("Create: %v", err)
	}
}

// A crash after a live superstep published its deltas and before its
// commit: the superstep re-runs and streams the same deltas, which the log
// holds already, so nothing is appended again and no reset is needed: a
// client following across the crash sees each delta once. (Before the
// re-run was matched against the log, recovery appended a reset and the
// superstep streamed "done" a second time.)
func TestHost_Recover_LiveCrashMidSuperstep(t *testing.T) {
	t.Parallel()
	forEachHosting(t, examples.Stream, func(t *testing.T, model string) {
		sc := newScenario(t, host.Config{})
		sc.arm(&faultRule{point: host.FaultCommitBefore, mode: modeCrash, match: stepIs(2)})
		r := sc.create(model, "x", liveMD)
		c := newClient("streaming", r.ID)
		done := sc.followAsync(c)
		sc.crashAtFault()
		done()
		sc.check(map[string]verify.Outcome{r.ID: streamRef}, c)
		evs := collect(t, sc.host(), r.ID, -1)
		if rs := resets(evs); len(rs) != 0 {
			t.Fatalf("resets %+v (events %s)", rs, types(evs))
		}
		// "done" streamed before the crash, matched after it.
		if got := strings.Join(deltas(evs), "|"); got != "x |one |two |three|done" {
			t.Fatalf("deltas %q", got)
		}
		if got := outputs(evs); !slices.Equal(got, streamRef.Output) {
			t.Fatalf("outputs %q", got)
		}
	})
}

// tokenAgent streams "hello world" as two deltas, then the whole text.
var tokenAgent = agent.AgentFunc(func(ctx context.Context, s *agent.Session, in []agent.Message) iter.Seq2[agent.Update, error] {
	return func(yield func(agent.Update, error) bool) {
		for _, u := range []agent.Update{{Kind: agent.UpdateTextDelta, Text: "hello "},
			{Kind: agent.UpdateTextDelta, Text: "world"}, {Kind: agent.UpdateText, Text: "hello world"}} {
			if !yield(u, nil) {
				return
			}
		}
	}
})

// A plain agent's turn in live mode: its deltas are in the log before the
// turn's commit closes the item.
func TestHost_Live_PlainAgent(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{noReg: true})
	if err := b.host.RegisterAgent("tokens", tokenAgent); err != nil {
		t.Fatal(err)
	}
	for _, md := range []map[string]string{liveMD, nil} {
		r := create(t, b.host, "tokens", "hi", md)
		evs := collect(t, b.host, r.ID, -1)
		checkLog(t, evs)
		want := []string{"hello world"}
		if md != nil {
			want = []string{"hello ", "world"}
		}
		if got := deltas(evs); !slices.Equal(got, want) {
			t.Fatalf("%v: deltas %q", md, got)
		}
		if got := outputs(evs); !slices.Equal(got, []string{"hello world"}) {
			t.Fatalf("%v: outputs %q", md, got)
		}
		rec, log, err := verify.Load(testCtx(t), b.store, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		ref := verify.Outcome{Status: "completed", Output: []string{"hello world"}}
		if err := verify.Check(&verify.Input{Responses: []verify.ResponseInput{{ID: r.ID, Log: log, Record: rec, Reference: &ref}}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// A failed live append is retried like a commit: nothing is lost or
// repeated, and the failure is counted.
func TestHost_Live_AppendFailsOnce(t *testing.T) {
	t.Parallel()
	sc := newScenario(t, host.Config{})
	// Live appends name their run; the reader-side point does not.
	sc.arm(&faultRule{point: host.FaultPublish, mode: modeFail, match: func(f *host.Fault) bool { return f.RunID != "" }})
	r := sc.create(examples.Stream, "x", liveMD)
	c := newClient("streaming", r.ID)
	sc.followAsync(c)()
	sc.check(map[string]verify.Outcome{r.ID: streamRef}, c)
	if got := deltas(collect(t, sc.host(), r.ID, -1)); !slices.Equal(got, []string{"x ", "one ", "two ", "three", "done"}) {
		t.Fatalf("deltas %q", got)
	}
	if sc.firedAt(host.FaultPublish) != 1 || sc.metric("superstep_host_failures_total", "publish") != 1 {
		t.Fatalf("fired %d, metric %v", sc.firedAt(host.FaultPublish), sc.metric("superstep_host_failures_total", "publish"))
	}
	sc.requireLogged("publishing live events failed; retrying")
}

// backends are the stores host tests of a path both stores have run on.
var backends = []string{"sqlite", "postgres"}

// backendBundle returns a started host with no models registered over a
// fresh store of the backend; cleanup as setup's.
func backendBundle(t *testing.T, backend string, cfg *host.Config) *testBundle {
	t.Helper()
	if backend == "sqlite" {
		return setup(t, &setupOpts{noReg: true, cfg: cfg})
	}
	s := openPG(t, pgSchema(t))
	b := &testBundle{store: s, host: newHost(t, s, cfg, nil)}
	t.Cleanup(func() {
		shutdown(t, b.host)
		if err := store.Check(context.Background(), s); err != nil {
			t.Errorf("store.Check: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return b
}

// failOnce returns a FaultFunc failing the first arrival at p that match
// accepts (nil: any), and a count of the failures it injected.
func failOnce(p host.FaultPoint, match func(*host.Fault) bool) (func(context.Context, *host.Fault) error, *atomic.Int32) {
	var fired atomic.Int32
	return func(_ context.Context, f *host.Fault) error {
		if f.Point == p && (match == nil || match(f)) && fired.CompareAndSwap(0, 1) {
			return errors.New("injected: the reply was lost")
		}
		return nil
	}, &fired
}

// countingAgent counts the turns of an agent.
type countingAgent struct {
	agent.Agent
	runs atomic.Int32
}

func (a *countingAgent) Run(ctx context.Context, s *agent.Session, in []agent.Message) iter.Seq2[agent.Update, error] {
	a.runs.Add(1)
	return a.Agent.Run(ctx, s, in)
}

// lifecycleCount returns how many events of type typ evs has.
func lifecycleCount(evs []event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// A live append the store applied but whose reply was an error (the
// failure injected after the store call) is recognised as applied, as a
// commit is: the retry finds the events in the log, the superstep goes
// on, and nothing is voided, repeated or run again.
func TestHost_Live_AppendAppliedButFailed(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		for _, how := range liveHostings {
			t.Run(backend+"/"+how, func(t *testing.T) {
				t.Parallel()
				fault, fired := failOnce(host.FaultAppendAfter, nil)
				b := backendBundle(t, backend, &host.Config{CommitBackoff: time.Millisecond,
					Test: host.TestConfig{FaultFunc: fault}})
				a := &countingAgent{Agent: newGatedAgent(5, nil)}
				registerGated(t, b.host, how, a)
				r := create(t, b.host, "gated", "hi", liveMD)
				evs := checkGated(t, b, r.ID, a.Agent.(*gatedAgent))
				if fired.Load() != 1 {
					t.Fatalf("fault fired %d times", fired.Load())
				}
				if n := lifecycleCount(evs, "response.in_progress"); n != 1 || evs[len(evs)-1].Type != "response.completed" {
					t.Fatalf("%d response.in_progress, last %s: %s", n, evs[len(evs)-1].Type, types(evs))
				}
				if n := a.runs.Load(); n != 1 {
					t.Fatalf("the agent ran %d times", n)
				}
			})
		}
	}
}

// resets returns the reset response.in_progress events of evs (every one
// after the first).
func resets(evs []event) []event {
	var out []event
	seen := false
	for _, e := range evs {
		if e.Type != "response.in_progress" {
			continue
		}
		if seen {
			out = append(out, e)
		}
		seen = true
	}
	return out
}

// A recovery whose reset response.in_progress was appended, but whose
// host died before it knew (the crash right after the store call), leaves
// the reset and what it republished at the log's end: the next recovery,
// diverging from the interrupted attempt at the same place, reads them
// back, reproduces what followed them, and appends no second reset. The
// executor streams "a ", "b ", "c", "d" the first time and "a ", "b ",
// "X", "y" after (other text from the third token on).
func TestHost_Recover_LiveResetAppliedOnce(t *testing.T) {
	t.Parallel()
	var attempts atomic.Int32
	sc := newScenarioWith(t, host.Config{}, func(t *testing.T, h *host.Host) {
		w := workflow.Func("writer", func(c *workflow.Context, _ string) error {
			toks, text := []string{"a ", "b ", "c", "d"}, "a b cd"
			if attempts.Add(1) > 1 {
				toks, text = []string{"a ", "b ", "X", "y"}, "a b Xy"
			}
			for _, tok := range toks {
				if err := c.EmitLive(tok); err != nil {
					return err
				}
			}
			return c.Yield(text)
		})
		wf, err := workflow.NewBuilder("rechunk").SetStart(w).Outputs(w).Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := h.RegisterWorkflow("rechunk", wf); err != nil {
			t.Fatal(err)
		}
	})
	sc.arm(&faultRule{point: host.FaultCommitBefore, mode: modeCrash, match: stepIs(1)})
	r := sc.create("rechunk", "go", liveMD)
	sc.waitCrash()
	// The next incarnation dies right after its reset is appended.
	sc.arm(&faultRule{point: host.FaultAppendAfter, mode: modeCrash})
	sc.restart(true)
	sc.crashAtFault()
	sc.waitDone(r.ID)
	sc.check(map[string]verify.Outcome{r.ID: {Status: "completed", Output: []string{"a b Xy"}}})
	evs := collect(t, sc.host(), r.ID, -1)
	requireCoherent(t, evs)
	if rs := resets(evs); len(rs) != 1 {
		t.Fatalf("%d resets (events %s)", len(rs), types(evs))
	}
	// Before the crash; the reset's republication of "a b "; the rest.
	if got := strings.Join(deltas(evs), "|"); got != "a |b |c|d|a b |X|y" {
		t.Fatalf("deltas %q", got)
	}
	if n := attempts.Load(); n != 3 {
		t.Fatalf("the executor ran %d times, want 3", n)
	}
}

// streamABC emits "a ", "b ", "c" live and yields "a b c".
func streamABC() workflow.Executor {
	return workflow.Func("writer", func(c *workflow.Context, _ string) error {
		for _, tok := range []string{"a ", "b ", "c"} {
			if err := c.EmitLive(tok); err != nil {
				return err
			}
		}
		return c.Yield("a b c")
	})
}

// registerNested registers "flat" (streamABC as the workflow's output
// executor) and "wrapped" (the same executor inside a sub-workflow,
// itself the output executor), each also inside two levels of nesting
// ("wrapped2").
func registerNested(t *testing.T, h *host.Host) {
	t.Helper()
	build := func(name string, start workflow.Executor) *workflow.Workflow {
		wf, err := workflow.NewBuilder(name).SetStart(start).Outputs(start).Build()
		if err != nil {
			t.Fatal(err)
		}
		return wf
	}
	flat := build("flat", streamABC())
	wrapped := build("wrapped", build("inner", streamABC()).AsExecutor("sub"))
	wrapped2 := build("wrapped2", wrapped.AsExecutor("outer"))
	for name, wf := range map[string]*workflow.Workflow{"flat": flat, "wrapped": wrapped, "wrapped2": wrapped2} {
		if err := h.RegisterWorkflow(name, wf); err != nil {
			t.Fatal(err)
		}
	}
}

// Live events emitted inside a sub-workflow (AsExecutor) are published as
// the same executor's are when it is not nested: the same deltas, closed
// by the commit into the same output.
func TestHost_Live_NestedSubWorkflow(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			b := backendBundle(t, backend, nil)
			registerNested(t, b.host)
			for _, model := range []string{"flat", "wrapped", "wrapped2"} {
				r := create(t, b.host, model, "go", liveMD)
				evs := collect(t, b.host, r.ID, -1)
				checkLog(t, evs)
				if got := deltas(evs); !slices.Equal(got, []string{"a ", "b ", "c"}) {
					t.Fatalf("%s: deltas %q", model, got)
				}
				if got := outputs(evs); !slices.Equal(got, []string{"a b c"}) {
					t.Fatalf("%s: outputs %q", model, got)
				}
				if n := len(resets(evs)); n != 0 {
					t.Fatalf("%s: %d resets: %s", model, n, types(evs))
				}
				rec, log, err := verify.Load(testCtx(t), b.store, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				ref := verify.Outcome{Status: "completed", Output: []string{"a b c"}}
				if err := verify.Check(&verify.Input{Responses: []verify.ResponseInput{{ID: r.ID, Log: log, Record: rec, Reference: &ref}}}).Err(); err != nil {
					t.Fatalf("%s: %v", model, err)
				}
			}
		})
	}
}

// checkClosed checks that every item the log announces (since its last
// response.in_progress) is done before the terminal event, that the
// terminal response's output holds each as it was done, and that the
// stored snapshot (what GET returns) agrees; it returns that output.
func checkClosed(t *testing.T, h *host.Host, id string, evs []event) []wireItem {
	t.Helper()
	open := map[int]string{}
	done := map[int]wireItem{}
	last := evs[len(evs)-1]
	for _, e := range evs[:len(evs)-1] {
		switch e.Type {
		case "response.in_progress":
			open, done = map[int]string{}, map[int]wireItem{}
		case "response.output_item.added":
			open[e.OutputIndex] = e.Item.ID
		case "response.output_item.done":
			if open[e.OutputIndex] != e.Item.ID {
				t.Fatalf("output_item.done of %s at %d, not open: %s", e.Item.ID, e.OutputIndex, types(evs))
			}
			delete(open, e.OutputIndex)
			done[e.OutputIndex] = *e.Item
		}
	}
	if len(open) > 0 || !terminal(last.Type) {
		t.Fatalf("items %v still open at %s: %s", open, last.Type, types(evs))
	}
	out := last.Response.Output
	if len(out) != len(done) {
		t.Fatalf("terminal output has %d items, %d were done", len(out), len(done))
	}
	for i, it := range out {
		d := done[i]
		if d.ID != it.ID || d.Status != it.Status || fmt.Sprint(d.Content) != fmt.Sprint(it.Content) {
			t.Fatalf("output %d is %+v, its output_item.done said %+v", i, it, d)
		}
	}
	rec, err := h.Get(testCtx(t), id, "")
	if err != nil {
		t.Fatal(err)
	}
	snap := snapshot(t, rec)
	if snap.Status != last.Response.Status || fmt.Sprint(snap.Output) != fmt.Sprint(out) {
		t.Fatalf("snapshot %s %+v, terminal event %s %+v", snap.Status, snap.Output, last.Response.Status, out)
	}
	return out
}

// waitDelta reads the response's events until the delta text shows, so
// that it is durable.
func waitDelta(t *testing.T, h *host.Host, id, text string) {
	t.Helper()
	for ev, err := range h.Events(testCtx(t), id, "", -1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "response.output_text.delta" && strings.Contains(string(ev.Payload), text) {
			return
		}
	}
	t.Fatalf("delta %q never came", text)
}

// A cancel while a live message streams: the message is closed
// (incomplete, with the text streamed so far) before the cancelled
// response, in the stream, the snapshot and GET.
func TestHost_Live_CancelClosesOpenItems(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		for _, how := range liveHostings {
			t.Run(backend+"/"+how, func(t *testing.T) {
				t.Parallel()
				b := backendBundle(t, backend, nil)
				a := newGatedAgent(6, func(ctx context.Context, i int) error {
					if i == 3 { // "t0 t1 t2 " streamed: wait for the cancel
						<-ctx.Done()
						return context.Cause(ctx)
					}
					return nil
				})
				registerGated(t, b.host, how, a)
				r := create(t, b.host, "gated", "hi", liveMD)
				waitDelta(t, b.host, r.ID, token(2))
				if _, err := b.host.Cancel(testCtx(t), r.ID, ""); err != nil {
					t.Fatal(err)
				}
				evs := collect(t, b.host, r.ID, -1)
				checkLog(t, evs)
				if last := evs[len(evs)-1]; last.Response.Status != "cancelled" {
					t.Fatalf("last %s %s", last.Type, last.Response.Status)
				}
				out := checkClosed(t, b.host, r.ID, evs)
				if len(out) != 1 || out[0].Status != "incomplete" || out[0].Content[0].Text != "t0 t1 t2 " {
					t.Fatalf("output %+v", out)
				}
			})
		}
	}
}

// An infrastructure failure while a live message streams (the step's
// commit keeps failing): the message is closed incomplete before
// response.failed, in the stream, the snapshot and GET.
func TestHost_Live_FailureClosesOpenItems(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		for _, how := range liveHostings {
			t.Run(backend+"/"+how, func(t *testing.T) {
				t.Parallel()
				var fails atomic.Int32
				fault := func(_ context.Context, f *host.Fault) error {
					// The step's commit and its retry fail; the terminal commit goes through.
					if f.Point == host.FaultCommitBefore && fails.Add(1) <= 2 {
						return errors.New("injected: disk on fire")
					}
					return nil
				}
				b := backendBundle(t, backend, &host.Config{CommitRetries: 1, CommitBackoff: time.Millisecond,
					Test: host.TestConfig{FaultFunc: fault}})
				a := newGatedAgent(4, nil)
				registerGated(t, b.host, how, a)
				r := create(t, b.host, "gated", "hi", liveMD)
				evs := collect(t, b.host, r.ID, -1)
				checkLog(t, evs)
				// The cause is logged, not shown (issue 12 #21).
				if last := evs[len(evs)-1]; last.Type != "response.failed" || strings.Contains(last.Response.Error.Message, "disk on fire") ||
					!strings.Contains(last.Response.Error.Message, "server's log") {
					t.Fatalf("last %s %+v", last.Type, last.Response.Error)
				}
				out := checkClosed(t, b.host, r.ID, evs)
				if len(out) != 1 || out[0].Status != "incomplete" || out[0].Content[0].Text != a.text() {
					t.Fatalf("output %+v", out)
				}
			})
		}
	}
}

// cutAgent streams "hello " and "wor", then ends its reply there: the
// model hit its output limit.
var cutAgent = agent.AgentFunc(func(ctx context.Context, s *agent.Session, in []agent.Message) iter.Seq2[agent.Update, error] {
	return func(yield func(agent.Update, error) bool) {
		for _, u := range []agent.Update{{Kind: agent.UpdateTextDelta, Text: "hello "},
			{Kind: agent.UpdateTextDelta, Text: "wor"}, {Kind: agent.UpdateText, Text: "hello wor"},
			{Kind: agent.UpdateDone, Reason: agent.ReasonMaxOutputTokens}} {
			if !yield(u, nil) {
				return
			}
		}
	}
})

// A reply cut short makes an incomplete response whose cut item is
// incomplete too, as the Responses API has it: in the stream
// (output_item.done), the terminal event, the snapshot and GET, in both
// publication modes and both hostings.
func TestHost_Live_CutItemIncomplete(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		for _, how := range liveHostings {
			t.Run(backend+"/"+how, func(t *testing.T) {
				t.Parallel()
				b := backendBundle(t, backend, nil)
				registerGated(t, b.host, how, cutAgent)
				for _, md := range []map[string]string{liveMD, nil} {
					r := create(t, b.host, "gated", "hi", md)
					evs := collect(t, b.host, r.ID, -1)
					checkLog(t, evs)
					if last := evs[len(evs)-1]; last.Type != "response.incomplete" {
						t.Fatalf("%v: last %s", md, last.Type)
					}
					out := checkClosed(t, b.host, r.ID, evs)
					if len(out) != 1 || out[0].Status != "incomplete" || out[0].Content[0].Text != "hello wor" {
						t.Fatalf("%v: output %+v", md, out)
					}
				}
			})
		}
	}
}

// retryAgent streams "a", calls a tool, streams "b" and retries that model
// call, which then streams "b2": the retry voids "b" only.
var retryAgent = agent.AgentFunc(func(ctx context.Context, s *agent.Session, in []agent.Message) iter.Seq2[agent.Update, error] {
	return func(yield func(agent.Update, error) bool) {
		for _, u := range []agent.Update{{Kind: agent.UpdateTextDelta, Text: "a"}, {Kind: agent.UpdateText, Text: "a"},
			{Kind: agent.UpdateToolCall, CallID: "c1", Name: "f", Arguments: "{}"},
			{Kind: agent.UpdateToolResult, CallID: "c1", Text: "ok"},
			{Kind: agent.UpdateTextDelta, Text: "b"}, {Kind: agent.UpdateRetry},
			{Kind: agent.UpdateTextDelta, Text: "b2"}, {Kind: agent.UpdateText, Text: "b2"}} {
			if !yield(u, nil) {
				return
			}
		}
	}
})

// requireCoherent checks that after the log's last response.in_progress
// every message's deltas add up to its done text.
func requireCoherent(t *testing.T, evs []event) {
	t.Helper()
	from := 0
	for i, e := range evs {
		if e.Type == "response.in_progress" {
			from = i
		}
	}
	streamed := map[int]string{}
	for _, e := range evs[from:] {
		switch e.Type {
		case "response.output_text.delta":
			streamed[e.OutputIndex] += e.Delta
		case "response.output_text.done":
			if streamed[e.OutputIndex] != e.Text {
				t.Fatalf("output %d streamed %q, done says %q: %s", e.OutputIndex, streamed[e.OutputIndex], e.Text, types(evs))
			}
		}
	}
}

// A model call retried mid-stream voids the message it was streaming, and
// only that: the reset that withdraws it publishes the items that stay
// valid again (the text and the tool call before it), so what follows the
// reset is a coherent history by itself, and the commit closes the retry's
// message.
func TestHost_Live_RetryVoidsOnlyItsMessage(t *testing.T) {
	t.Parallel()
	for _, how := range liveHostings {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			b := setup(t, &setupOpts{noReg: true})
			registerGated(t, b.host, how, retryAgent)
			r := create(t, b.host, "gated", "hi", liveMD)
			evs := collect(t, b.host, r.ID, -1)
			checkLog(t, evs)
			requireCoherent(t, evs)
			if n := len(resets(evs)); n != 1 {
				t.Fatalf("%d resets: %s", n, types(evs))
			}
			want := []string{"a", "f({})", "b2"}
			rec, log, err := verify.Load(testCtx(t), b.store, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			ref := verify.Outcome{Status: "completed", Output: []string{"a", "tool_call f {} -> ok", "b2"}}
			if err := verify.Check(&verify.Input{Responses: []verify.ResponseInput{{ID: r.ID, Log: log, Record: rec, Reference: &ref}}}).Err(); err != nil {
				t.Fatal(err)
			}
			var final []string
			for _, e := range evs[len(evs)-1].Response.Output {
				if e.Type == "message" {
					final = append(final, e.Content[0].Text)
				} else {
					final = append(final, e.Name+"("+e.Args+")")
				}
			}
			if !slices.Equal(final, want) {
				t.Fatalf("output %q", final)
			}
		})
	}
}
