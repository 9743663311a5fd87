package host_test

import (
	"context"
	"errors"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/superstep/superstep/agent"
	"iter"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/workflow"
)

// testDB is one database that successive store handles (host
// incarnations, as separate processes would) open.
type testDB struct {
	name string
	open func(t *testing.T) store.Store
}

// forEachBackend runs fn as a parallel subtest on a fresh SQLite file and a
// fresh PostgreSQL schema.
func forEachBackend(t *testing.T, fn func(t *testing.T, db testDB)) {
	t.Helper()
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "superstep.db")
		fn(t, testDB{name: "sqlite", open: func(t *testing.T) store.Store { return openStore(t, path) }})
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		schema := pgSchema(t)
		fn(t, testDB{name: "postgres", open: func(t *testing.T) store.Store { return openPG(t, schema) }})
	})
}

// crashPoint makes an incarnation "die" at the first arrival at a fault
// point that match accepts: from then on its store refuses every write.
type crashPoint struct {
	cs    *crashStore
	match func(*host.Fault) bool
	fired chan struct{}
	once  atomic.Bool
}

func (c *crashPoint) fault(_ context.Context, f *host.Fault) error {
	if c.cs.crashed.Load() {
		return errCrashed
	}
	if c.match != nil && c.match(f) && c.once.CompareAndSwap(false, true) {
		c.cs.crashed.Store(true)
		close(c.fired)
		return errInjected
	}
	return nil
}

// incarnation2 is one host process over its own store handle.
type incarnation2 struct {
	t   *testing.T
	raw store.Store
	cs  *crashStore
	h   *host.Host
	cp  *crashPoint
}

// startIncarnation opens a handle on db and starts a host over it with
// register's models. The host claims every unfinished run at Start
// (ExclusiveStore: the previous incarnation is gone), so no test waits for
// a dead incarnation's lease to expire. crash, when not nil, arms a crash.
func startIncarnation(t *testing.T, db testDB, cfg host.Config, register func(*testing.T, *host.Host),
	crash func(*host.Fault) bool) *incarnation2 {
	t.Helper()
	raw := db.open(t)
	inc := &incarnation2{t: t, raw: raw, cs: &crashStore{Store: raw}}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = time.Hour
	}
	if cfg.CommitBackoff == 0 {
		cfg.CommitBackoff = time.Millisecond
	}
	cfg.CommitRetries = 1
	cfg.ExclusiveStore = true
	if crash != nil {
		inc.cp = &crashPoint{cs: inc.cs, match: crash, fired: make(chan struct{})}
		cfg.Test.FaultFunc = inc.cp.fault
	}
	inc.h = newHost(t, inc.cs, &cfg, register)
	t.Cleanup(inc.close)
	return inc
}

// crashed waits for the armed crash, then kills the incarnation: its runs
// stop where they are and its handle is closed.
func (inc *incarnation2) crashed() {
	t := inc.t
	t.Helper()
	select {
	case <-inc.cp.fired:
	case <-time.After(testTimeout):
		t.Fatal("armed crash did not fire")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace
	_ = inc.h.Shutdown(ctx)
	shutdownOnce.Store(inc.h, true)
	inc.close()
}

// close shuts the host down (once) and closes the handle.
func (inc *incarnation2) close() {
	if inc.raw == nil {
		return
	}
	shutdown(inc.t, inc.h)
	if err := inc.raw.Close(); err != nil {
		inc.t.Errorf("close store: %v", err)
	}
	inc.raw = nil
}

// answer continues prev with function_call_output items (call id, output
// pairs).
func answer(ctx context.Context, h *host.Host, model, prev string, pairs ...string) (*store.Response, error) {
	var in []host.InputItem
	for i := 0; i+1 < len(pairs); i += 2 {
		in = append(in, host.InputItem{Type: host.InputFunctionCallOutput, CallID: pairs[i], Output: pairs[i+1]})
	}
	return h.Create(ctx, &host.CreateParams{Model: model, Store: true, Background: true, PreviousResponseID: prev, Input: in})
}

// reaskModel asks question "q"; its answer is yielded, and the first
// answer makes it ask "q" again (same request id) while a worker runs one
// more superstep.
const reaskModel = "test.reask"

func registerReask(t *testing.T, h *host.Host) {
	t.Helper()
	asker := workflow.Handlers("asker", []workflow.Handler{
		workflow.On(func(c *workflow.Context, _ string) error {
			_, err := workflow.RequestInput[string](c, "q", "first")
			return err
		}),
		workflow.On(func(c *workflow.Context, a workflow.Answer[any]) error {
			if err := c.Yield("answer " + a.Value.(string) + " to " + a.Payload.(string)); err != nil {
				return err
			}
			if a.Payload != "first" {
				return nil
			}
			if _, err := workflow.RequestInput[string](c, "q", "second"); err != nil {
				return err
			}
			return c.Send("work")
		}),
	})
	worker := workflow.Func("worker", func(c *workflow.Context, _ string) error { return c.Yield("worked") })
	wf, err := workflow.NewBuilder(reaskModel).SetStart(asker).AddEdge(asker, worker).Outputs(asker, worker).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.RegisterWorkflow(reaskModel, wf); err != nil {
		t.Fatal(err)
	}
}

// Issue 12 item 8: a continuation's first commit absorbs its answer; the
// workflow asks again with the same request id and commits; the host
// crashes before the next commit. Recovery must not deliver the stored
// answer to the new question, which nobody answered.
func TestHost_Recover_AnswerNotRedeliveredToReusedRequestID(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, db testDB) {
		// Step 1 asks; the continuation starts at step 1, commits step 2
		// (answer absorbed, "q" asked again) and crashes before step 3.
		inc := startIncarnation(t, db, host.Config{}, registerReask, func(f *host.Fault) bool {
			return f.Point == host.FaultCommitBefore && f.Step == 3
		})
		ctx := testCtx(t)
		first := create(t, inc.h, reaskModel, "go", nil)
		wait(t, inc.h, first.ID)
		second, err := answer(ctx, inc.h, reaskModel, first.ID, "q", "yes")
		if err != nil {
			t.Fatal(err)
		}
		inc.crashed()

		inc2 := startIncarnation(t, db, host.Config{}, registerReask, nil)
		done := wait(t, inc2.h, second.ID)
		if done.Status != store.StatusCompleted {
			t.Fatalf("status %s", done.Status)
		}
		evs := collect(t, inc2.h, second.ID, -1)
		checkLog(t, evs)
		want := []string{"answer yes to first", `asker("second")`, "worked"}
		if got := outputs(evs); !slices.Equal(got, want) {
			t.Fatalf("outputs %q, want %q", got, want)
		}
		run, err := inc2.raw.RunGet(ctx, second.RunID)
		if err != nil || run.LastStep != 3 {
			t.Fatalf("run %+v %v, want last step 3", run, err)
		}
	})
}

// The other side of item 8: a crash before the continuation's first commit
// leaves its answer unabsorbed (run.LastStep == StartStep), so recovery
// delivers it again, exactly once.
func TestHost_Recover_AnswerRedeliveredBeforeFirstCommit(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, db testDB) {
		inc := startIncarnation(t, db, host.Config{}, registerReask, func(f *host.Fault) bool {
			return f.Point == host.FaultCommitBefore && f.Step == 2
		})
		ctx := testCtx(t)
		first := create(t, inc.h, reaskModel, "go", nil)
		wait(t, inc.h, first.ID)
		second, err := answer(ctx, inc.h, reaskModel, first.ID, "q", "yes")
		if err != nil {
			t.Fatal(err)
		}
		inc.crashed()

		inc2 := startIncarnation(t, db, host.Config{}, registerReask, nil)
		wait(t, inc2.h, second.ID)
		evs := collect(t, inc2.h, second.ID, -1)
		checkLog(t, evs)
		want := []string{"answer yes to first", `asker("second")`, "worked"}
		if got := outputs(evs); !slices.Equal(got, want) {
			t.Fatalf("outputs %q, want %q", got, want)
		}
	})
}

// Issue 12 item 6: after the head response is deleted, its predecessor is
// the head again, but the run's last commit (step, checkpoint) is the
// deleted response's. Answering the predecessor is refused with a 400
// (InputError on previous_response_id) and nothing is stored. (A workflow's
// answers are not branched: a conversation model's turns are; see
// TestHost_Conversation_BranchAndTurns.)
func TestHost_Continue_AfterDeletedHeadRefused(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, db testDB) {
		inc := startIncarnation(t, db, host.Config{}, registerReask, nil)
		ctx := testCtx(t)
		first := create(t, inc.h, reaskModel, "go", nil)
		wait(t, inc.h, first.ID)
		second, err := answer(ctx, inc.h, reaskModel, first.ID, "q", "yes")
		if err != nil {
			t.Fatal(err)
		}
		wait(t, inc.h, second.ID)
		if err := inc.h.Delete(ctx, second.ID, ""); err != nil {
			t.Fatal(err)
		}
		before, err := inc.raw.RunGet(ctx, first.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if before.HeadResponseID != first.ID {
			t.Fatalf("head after delete %s, want %s", before.HeadResponseID, first.ID)
		}
		_, err = answer(ctx, inc.h, reaskModel, first.ID, "q", "again")
		var ie *host.InputError
		if !errors.As(err, &ie) || ie.Param != "previous_response_id" {
			t.Fatalf("continuing a response behind the run's last commit: %v, want an InputError", err)
		}
		after, err := inc.raw.RunGet(ctx, first.RunID)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := inc.raw.ResponseListByRun(ctx, first.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || after.LastStep != before.LastStep || after.HeadResponseID != first.ID ||
			after.Lease.Epoch != before.Lease.Epoch || after.Active {
			t.Fatalf("store changed: run %+v -> %+v, %d responses", before, after, len(rs))
		}
	})
}

// Conversations by previous_response_id, as OpenAI has them: continuing an
// earlier response of a conversation model branches (its context is that
// response's chain, not the later turns), also after its later turns were
// deleted; a workflow that completed runs again with the new input.
func TestHost_Conversation_BranchAndTurns(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if err := b.host.RegisterAgent("chat", historyAgent); err != nil {
		t.Fatal(err)
	}
	turn := func(prev, text string) *store.Response {
		t.Helper()
		r, err := b.host.Create(testCtx(t), &host.CreateParams{Model: "chat", Store: true, PreviousResponseID: prev,
			Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: text}}})
		if err != nil {
			t.Fatalf("turn %q after %s: %v", text, prev, err)
		}
		wait(t, b.host, r.ID)
		return r
	}
	first := turn("", "hi")
	second := turn(first.ID, "again")
	branch := turn(first.ID, "other")
	if got := outputs(collect(t, b.host, branch.ID, -1)); !slices.Equal(got, []string{"user:hi|assistant:user:hi|assistant:bye|user:other", "bye"}) {
		t.Fatalf("branch saw %q: its context must be the first response's chain only", got)
	}
	if branch.RunID == first.RunID {
		t.Fatal("the branch ran on the original run")
	}
	// The original conversation goes on from its head, unaffected.
	third := turn(second.ID, "more")
	if got := outputs(collect(t, b.host, third.ID, -1)); len(got) == 0 || !strings.HasSuffix(got[0], "user:again|assistant:user:hi|assistant:user:hi|assistant:bye|user:again|assistant:bye|user:more") {
		t.Fatalf("the original conversation after the branch: %q", got)
	}

	// Deleting the head of the original conversation: continuing its
	// predecessor branches from the predecessor's own state.
	if err := b.host.Delete(testCtx(t), third.ID, ""); err != nil {
		t.Fatal(err)
	}
	fourth := turn(second.ID, "after delete")
	if got := outputs(collect(t, b.host, fourth.ID, -1)); len(got) == 0 || strings.Contains(got[0], "more") ||
		!strings.HasSuffix(got[0], "|user:after delete") || fourth.RunID == second.RunID {
		t.Fatalf("continuing behind a deleted head: %q on run %s", got, fourth.RunID)
	}

	// A workflow that completed takes a new turn: demo.echo echoes it.
	e1 := create(t, b.host, examples.Echo, "one", nil)
	wait(t, b.host, e1.ID)
	e2, err := b.host.Create(testCtx(t), &host.CreateParams{Model: examples.Echo, Store: true, PreviousResponseID: e1.ID,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "two"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := wait(t, b.host, e2.ID); got.Status != store.StatusCompleted || e2.RunID != e1.RunID {
		t.Fatalf("second echo turn %s on run %s (first on %s)", got.Status, e2.RunID, e1.RunID)
	}
	if got := outputs(collect(t, b.host, e2.ID, -1)); len(got) != 1 || !strings.Contains(got[0], "two") {
		t.Fatalf("second echo turn outputs %q", got)
	}
}

// One turn per head at a time: while a continuation of a response runs, a
// second continuation of the same response is a ConflictError (409), and
// nothing is stored for it.
func TestHost_Conversation_ConcurrentTurnRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := &blockingAgent{started: make(chan struct{})}
	var calls atomic.Int32
	gate := agent.AgentFunc(func(ctx context.Context, s *agent.Session, in []agent.Message) iter.Seq2[agent.Update, error] {
		if calls.Add(1) == 1 { // the first turn answers at once
			return func(yield func(agent.Update, error) bool) {
				yield(agent.Update{Kind: agent.UpdateText, Text: "ok"}, nil)
			}
		}
		return a.Run(ctx, s, in) // the second blocks until cancelled
	})
	if err := b.host.RegisterAgent("gate", gate); err != nil {
		t.Fatal(err)
	}
	first := create(t, b.host, "gate", "hi", nil)
	wait(t, b.host, first.ID)
	second, err := b.host.Create(testCtx(t), &host.CreateParams{Model: "gate", Store: true, Background: true, PreviousResponseID: first.ID,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "slow"}}})
	if err != nil {
		t.Fatal(err)
	}
	<-a.started
	_, err = b.host.Create(testCtx(t), &host.CreateParams{Model: "gate", Store: true, PreviousResponseID: first.ID,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "racing"}}})
	var ce *host.ConflictError
	if !errors.As(err, &ce) || !strings.Contains(ce.Message, second.ID) {
		t.Fatalf("a second turn on a head in flight: %v, want a ConflictError naming %s", err, second.ID)
	}
	runs, err := b.store.RunList(testCtx(t), &store.RunListParams{})
	if err != nil || len(runs) != 1 {
		t.Fatalf("%d runs (%v), want 1: the refused turn must store nothing", len(runs), err)
	}
	if _, err := b.host.Cancel(testCtx(t), second.ID, ""); err != nil {
		t.Fatal(err)
	}
	wait(t, b.host, second.ID)
}

// Config.MaxSupersteps is a limit per response: a conversation whose
// turns together take more supersteps than it still works.
func TestHost_MaxSupersteps_PerResponse(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, db testDB) {
		// Steps: 1 (first), 2-3 (second), 4 (third): 4 in all, 2 at most
		// per response.
		inc := startIncarnation(t, db, host.Config{MaxSupersteps: 2}, registerReask, nil)
		ctx := testCtx(t)
		first := create(t, inc.h, reaskModel, "go", nil)
		wait(t, inc.h, first.ID)
		prev := first.ID
		for _, want := range [][]string{
			{"answer yes to first", `asker("second")`, "worked"},
			{"answer yes to second"},
		} {
			r, err := answer(ctx, inc.h, reaskModel, prev, "q", "yes")
			if err != nil {
				t.Fatal(err)
			}
			done := wait(t, inc.h, r.ID)
			evs := collect(t, inc.h, r.ID, -1)
			if done.Status != store.StatusCompleted || !slices.Equal(outputs(evs), want) {
				t.Fatalf("%s: %s %q, want completed %q (%s)", r.ID, done.Status, outputs(evs), want, done.Error)
			}
			prev = r.ID
		}
		run, err := inc.raw.RunGet(ctx, first.RunID)
		if err != nil || run.LastStep != 4 {
			t.Fatalf("run %+v %v, want last step 4", run, err)
		}
	})
}

// A response that ended incomplete (a reply cut short) can be continued,
// as on OpenAI.
func TestHost_Continue_Incomplete(t *testing.T) {
	t.Parallel()
	m := newLLMModels(t)
	forEachBackend(t, func(t *testing.T, db testDB) {
		inc := startIncarnation(t, db, host.Config{}, m.register, nil)
		ctx := testCtx(t)
		const model = "plain:llm.short"
		first := create(t, inc.h, model, "one two three", nil)
		if done := wait(t, inc.h, first.ID); done.Status != store.StatusIncomplete {
			t.Fatalf("first: %s, want incomplete", done.Status)
		}
		second, err := inc.h.Create(ctx, &host.CreateParams{Model: model, Store: true, PreviousResponseID: first.ID,
			Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "go on"}}})
		if err != nil {
			t.Fatalf("continue an incomplete response: %v", err)
		}
		done := wait(t, inc.h, second.ID)
		if !done.Status.Terminal() || done.Status == store.StatusFailed || second.RunID != first.RunID {
			t.Fatalf("second: %+v", done)
		}
	})
}

// A bad answer to a pending request (demo.approval answered with neither
// approve nor reject) is an InputError (HTTP 400) before anything is
// stored; the request stays pending and a good answer then works.
func TestHost_Continue_BadAnswerRefused(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, db testDB) {
		inc := startIncarnation(t, db, host.Config{}, registerDemos, nil)
		ctx := testCtx(t)
		for _, model := range []string{examples.Approval} {
			first := create(t, inc.h, model, "deploy?", nil)
			wait(t, inc.h, first.ID)
			evs := collect(t, inc.h, first.ID, -1)
			callID := evs[len(evs)-1].Response.Output[0].CallID
			before, err := inc.raw.RunGet(ctx, first.RunID)
			if err != nil {
				t.Fatal(err)
			}
			_, err = answer(ctx, inc.h, model, first.ID, callID, "maybe")
			var ie *host.InputError
			if !errors.As(err, &ie) || ie.Param != "input" || !strings.Contains(ie.Message, `"approve" or "reject"`) {
				t.Fatalf("%s: bad answer: %v, want an InputError", model, err)
			}
			after, err := inc.raw.RunGet(ctx, first.RunID)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := inc.raw.ResponseListByRun(ctx, first.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 || after.LastStep != before.LastStep || after.HeadResponseID != first.ID ||
				after.Lease.Epoch != before.Lease.Epoch {
				t.Fatalf("%s: store changed: run %+v -> %+v, %d responses", model, before, after, len(rs))
			}
			second, err := answer(ctx, inc.h, model, first.ID, callID, "approve")
			if err != nil {
				t.Fatalf("%s: good answer after a bad one: %v", model, err)
			}
			wait(t, inc.h, second.ID)
			if got := outputs(collect(t, inc.h, second.ID, -1)); !slices.Equal(got, []string{"approved"}) {
				t.Fatalf("%s: outputs %q", model, got)
			}
		}
	})
}

// A branch cancelled before its first commit ends cancelled at once: its
// run starts at the step the branched-from response left (not at 0), so the
// cancelled commit is the run's next step, not a refused one.
func TestHost_Conversation_BranchCancelledBeforeFirstCommit(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	b := setup(t, &setupOpts{noReg: true, cfg: &host.Config{Metrics: reg, CommitBackoff: time.Millisecond}})
	a := &blockingAgent{started: make(chan struct{})}
	var calls atomic.Int32
	gate := agent.AgentFunc(func(ctx context.Context, s *agent.Session, in []agent.Message) iter.Seq2[agent.Update, error] {
		if calls.Add(1) <= 2 { // the first two turns answer at once
			return func(yield func(agent.Update, error) bool) {
				yield(agent.Update{Kind: agent.UpdateText, Text: "ok"}, nil)
			}
		}
		return a.Run(ctx, s, in) // the branch blocks until cancelled
	})
	if err := b.host.RegisterAgent("gate", gate); err != nil {
		t.Fatal(err)
	}
	first := create(t, b.host, "gate", "hi", nil)
	wait(t, b.host, first.ID)
	second, err := b.host.Create(testCtx(t), &host.CreateParams{Model: "gate", Store: true, PreviousResponseID: first.ID,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "again"}}})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, b.host, second.ID)
	branch, err := b.host.Create(testCtx(t), &host.CreateParams{Model: "gate", Store: true, Background: true, PreviousResponseID: first.ID,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "other"}}})
	if err != nil {
		t.Fatal(err)
	}
	<-a.started
	if _, err := b.host.Cancel(testCtx(t), branch.ID, ""); err != nil {
		t.Fatal(err)
	}
	from, err := b.store.ResponseGet(testCtx(t), first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := wait(t, b.host, branch.ID); got.Status != store.StatusCancelled || got.CommitStep != from.CommitStep+1 {
		t.Fatalf("branch ended %s at step %d, want cancelled at step %d", got.Status, got.CommitStep, from.CommitStep+1)
	}
	if n := metricValue(t, reg, "superstep_host_commit_failures_total"); n != 0 {
		t.Fatalf("%v commit attempts failed: the cancelled commit was not the run's next step", n)
	}
}
