package host_test

import (
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/verify"
	"github.com/superstep/superstep/workflow"
)

// The recovery scenarios of DESIGN.md §2, each run for native hosting and
// for workflow-as-agent hosting, on a real SQLite file that every restart
// reopens with a fresh handle and a fresh Host. verify checks every
// response's log, record and final outcome, every client's view and the
// executor journal against the crashes.

// Reference outcomes of crash-free runs of the demos.
var (
	twoOutputsRef = verify.Outcome{Status: "completed", Output: []string{"first-2", "second-2", "done"}}
	approvalAsk   = verify.Outcome{Status: "completed", Output: []string{`function_call approve {"question":"deploy?"}`}}
)

func silentRef(n int) verify.Outcome {
	return verify.Outcome{Status: "completed", Output: []string{"done after " + strconv.Itoa(n)}}
}

// stepIs matches fault arrivals of one step.
func stepIs(step int64) func(*host.Fault) bool {
	return func(f *host.Fault) bool { return f.Step == step }
}

// requireJournal asserts how often each superstep of a response ran.
func requireJournal(t *testing.T, sc *scenario, id string, want map[int64]int) {
	t.Helper()
	got := map[int64]int{}
	for _, e := range sc.journalEntries() {
		if e.ResponseID == id {
			got[e.Step]++
		}
	}
	for step, n := range want {
		if got[step] != n {
			t.Fatalf("superstep %d ran %d times, want %d (journal %v)", step, got[step], n, got)
		}
	}
}

// 1. k silent supersteps committed, crash in k+1: no committed silent
// superstep runs again.
func TestHost_Recover_SilentPrefix(t *testing.T) {
	t.Parallel()
	forEachHosting(t, examples.Silent, func(t *testing.T, model string) {
		sc := newScenario(t, host.Config{})
		const k = 3
		sc.arm(&faultRule{point: host.FaultCommitBefore, mode: modeCrash, match: stepIs(k + 1)})
		r := sc.create(model, "x", map[string]string{"steps": "6"})
		c := newClient("streaming", r.ID)
		done := sc.followAsync(c)
		sc.crashAtFault()
		done()
		sc.check(map[string]verify.Outcome{r.ID: silentRef(6)}, c)
		if sc.marks[0].Committed[r.ID] != k {
			t.Fatalf("committed at the crash: %d, want %d", sc.marks[0].Committed[r.ID], k)
		}
		// Steps 1..k ran once; k+1 ran before the crash and once after.
		requireJournal(t, sc, r.ID, map[int64]int{1: 1, 2: 1, 3: 1, 4: 2, 5: 1, 6: 1, 7: 1})
	})
}

// 2. A workflow that yields only at its end, crashed mid-way while a
// superstep runs: it resumes mid-way and yields its output once.
func TestHost_Recover_OutputOnlyAtEnd(t *testing.T) {
	t.Parallel()
	forEachHosting(t, examples.Silent, func(t *testing.T, model string) {
		sc := newScenario(t, host.Config{})
		r := sc.create(model, "x", map[string]string{"steps": "6", "step_delay_ms": "20"})
		for sc.host().WaitCommitted(t) < 3 {
		}
		sc.restart(true) // killed while superstep 4 sleeps
		c := newClient("late", r.ID)
		sc.waitDone(r.ID)
		if _, err := c.connect(testCtx(t), sc.host()); err != nil {
			t.Fatal(err)
		}
		sc.check(map[string]verify.Outcome{r.ID: silentRef(6)}, c)
		if got := clientOutputs(t, c); !slices.Equal(got, []string{"done after 6"}) {
			t.Fatalf("outputs %q", got)
		}
		if sc.marks[0].Committed[r.ID] < 3 {
			t.Fatalf("committed at the crash: %d", sc.marks[0].Committed[r.ID])
		}
	})
}

// 3. Two outputs in one superstep; the client's connection is cut after the
// first; the host crashes after the next commit. The client resumes with
// starting_after and gets the second: nothing lost or repeated.
func TestHost_Recover_TwoOutputsCutAfterFirst(t *testing.T) {
	t.Parallel()
	forEachHosting(t, examples.TwoOutputs, func(t *testing.T, model string) {
		sc := newScenario(t, host.Config{})
		sc.arm(&faultRule{point: host.FaultCommitAfter, mode: modeCrash, match: stepIs(3)})
		r := sc.create(model, "x", map[string]string{"step_delay_ms": "30"})
		c := newClient("cut", r.ID)
		c.cut = func(e *store.Event) bool {
			return e.Type == "response.output_item.done" && strings.Contains(string(e.Payload), "first-2")
		}
		if _, err := c.connect(testCtx(t), sc.host()); !errors.Is(err, errCut) {
			t.Fatalf("first connection: %v", err)
		}
		c.cut = nil
		sc.crashAtFault()
		if _, err := c.connect(testCtx(t), sc.host()); err != nil {
			t.Fatalf("resume with starting_after=%d: %v", c.view.ResumedAt[0], err)
		}
		if got := clientOutputs(t, c); !slices.Equal(got, twoOutputsRef.Output) {
			t.Fatalf("client saw %q", got)
		}
		sc.check(map[string]verify.Outcome{r.ID: twoOutputsRef}, c)
		requireJournal(t, sc, r.ID, map[int64]int{1: 1, 2: 1, 3: 1}) // step 3 committed before the crash
	})
}

// 4. The first commit fails: the run never skips ahead of durable output.
// Injected once (retried) and as a crash (recovery from step 0).
func TestHost_Recover_FirstCommitFails(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name string
		mode faultMode
	}{{"Fail", modeFail}, {"Crash", modeCrash}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			forEachHosting(t, examples.TwoOutputs, func(t *testing.T, model string) {
				// Every checkpoint kept: the test reads the whole history.
				sc := newScenario(t, host.Config{KeepCheckpoints: -1})
				sc.arm(&faultRule{point: host.FaultCommitBefore, mode: mode.mode, match: stepIs(1)})
				r := sc.create(model, "x", nil)
				c := newClient("streaming", r.ID)
				done := sc.followAsync(c)
				if mode.mode == modeCrash {
					sc.crashAtFault()
				}
				done()
				sc.check(map[string]verify.Outcome{r.ID: twoOutputsRef}, c)
				cps, err := sc.store().CheckpointList(testCtx(t), r.RunID)
				if err != nil {
					t.Fatal(err)
				}
				for i, cp := range cps {
					if cp.Step != int64(i) {
						t.Fatalf("checkpoint history %+v skips a step", cps)
					}
				}
				if mode.mode == modeFail {
					if n := sc.metric("superstep_host_commit_failures_total", ""); n != 1 {
						t.Fatalf("commit failures metric %v, want 1", n)
					}
					sc.requireLogged("host: commit failed; retrying", "injected")
				}
			})
		})
	}
}

// 5. Crash after commit k, during commit k+1: the run resumes from k.
func TestHost_Recover_CrashDuringNextCommit(t *testing.T) {
	t.Parallel()
	forEachHosting(t, examples.TwoOutputs, func(t *testing.T, model string) {
		sc := newScenario(t, host.Config{})
		sc.arm(&faultRule{point: host.FaultCommitBefore, mode: modeCrash, match: stepIs(3)})
		r := sc.create(model, "x", nil)
		sc.crashAtFault()
		if got := sc.marks[0].Committed[r.ID]; got != 2 {
			t.Fatalf("committed at the crash: %d, want 2", got)
		}
		sc.waitDone(r.ID)
		c := newClient("replay", r.ID)
		if _, err := c.connect(testCtx(t), sc.host()); err != nil {
			t.Fatal(err)
		}
		sc.check(map[string]verify.Outcome{r.ID: twoOutputsRef}, c)
		requireJournal(t, sc, r.ID, map[int64]int{1: 1, 2: 1, 3: 2})
	})
}

// 6. A failure injected once at each named fault point: nothing is lost,
// and the failure shows in the logs and the metrics.
func TestHost_Recover_FaultAtEachPoint(t *testing.T) {
	t.Parallel()
	for _, p := range host.FaultPoints() {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			demo := examples.TwoOutputs
			switch p {
			case host.FaultCreateAfterRecord:
				demo = examples.Echo
			case host.FaultHITLDeliver:
				demo = examples.Approval
			case host.FaultLeaseRenew:
				demo = examples.Silent
			case host.FaultAppendAfter:
				demo = examples.Stream // live appends are made in live mode only
			}
			forEachHosting(t, demo, func(t *testing.T, model string) { testFaultOnce(t, p, model) })
		})
	}
}

// faultOps maps fault points to the op label of superstep_host_failures_total.
var faultOps = map[host.FaultPoint]string{
	host.FaultCreateAfterRecord: "create", host.FaultCommitBefore: "commit", host.FaultCommitAfter: "commit",
	host.FaultPublish: "publish", host.FaultAppendAfter: "publish", host.FaultHITLDeliver: "deliver", host.FaultLeaseRenew: "lease_renew",
}

func testFaultOnce(t *testing.T, p host.FaultPoint, model string) {
	cfg := host.Config{}
	if p == host.FaultLeaseRenew {
		cfg.LeaseDuration = 1500 * time.Millisecond // renewed every 500ms
	}
	sc := newScenario(t, cfg)
	rule := &faultRule{point: p, mode: modeFail}
	if p == host.FaultPublish {
		rule.match = func(f *host.Fault) bool { return f.Seq == 3 }
	}
	sc.arm(rule)
	refs := map[string]verify.Outcome{}
	var clients []*client
	switch p {
	case host.FaultCreateAfterRecord:
		refs[faultCreate(t, sc, model)] = verify.Outcome{Status: "completed", Output: []string{"x"}}
	case host.FaultHITLDeliver:
		first, second := faultDeliver(t, sc, model)
		refs[first], refs[second] = approvalAsk, verify.Outcome{Status: "completed", Output: []string{"approved"}}
	case host.FaultLeaseRenew:
		r := sc.create(model, "x", map[string]string{"steps": "6", "step_delay_ms": "200"})
		refs[r.ID] = silentRef(6)
	case host.FaultAppendAfter:
		r := sc.create(model, "x", liveMD)
		refs[r.ID] = streamRef
		c := newClient("streaming", r.ID)
		sc.followAsync(c)()
		clients = append(clients, c)
	default:
		r := sc.create(model, "x", nil)
		refs[r.ID] = twoOutputsRef
		c := newClient("streaming", r.ID)
		sc.followAsync(c)()
		clients = append(clients, c)
	}
	for id := range refs {
		sc.waitDone(id)
	}
	sc.check(refs, clients...)
	if n := sc.firedAt(p); n != 1 {
		t.Fatalf("fault fired %d times at %s", n, p)
	}
	if n := sc.metric("superstep_host_failures_total", faultOps[p]); n < 1 {
		t.Fatalf("superstep_host_failures_total{op=%q} = %v", faultOps[p], n)
	}
	sc.requireLogged("injected fault at " + string(p))
}

// faultCreate: Create fails after the record was stored; the response is
// durable and runs to completion anyway.
func faultCreate(t *testing.T, sc *scenario, model string) string {
	_, err := sc.host().Create(testCtx(t), &host.CreateParams{Model: model, Store: true, Background: true,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "x"}}})
	if !errors.Is(err, host.ErrInjected) {
		t.Fatalf("Create: %v, want the injected failure", err)
	}
	runs, err := sc.store().RunList(testCtx(t), &store.RunListParams{})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %v: %v", runs, err)
	}
	return runs[0].HeadResponseID
}

// faultDeliver: delivering the answer of a continuation fails; nothing is
// stored by the failed attempt and the retried one continues the run.
func faultDeliver(t *testing.T, sc *scenario, model string) (string, string) {
	first := sc.create(model, "deploy?", nil)
	evs := collect(t, sc.host(), first.ID, -1)
	callID := evs[len(evs)-1].Response.Output[0].CallID
	answer := func() (*store.Response, error) {
		return sc.host().Create(testCtx(t), &host.CreateParams{Model: model, Store: true, PreviousResponseID: first.ID,
			Input: []host.InputItem{{Type: host.InputFunctionCallOutput, CallID: callID, Output: "approve"}}})
	}
	var ie *host.InputError
	if _, err := answer(); !errors.Is(err, host.ErrInjected) || errors.As(err, &ie) {
		t.Fatalf("first answer: %v, want the injected failure (not an input error)", err)
	}
	run, err := sc.store().RunGet(testCtx(t), first.RunID)
	if err != nil || run.HeadResponseID != first.ID {
		t.Fatalf("the failed delivery changed the run: %+v %v", run, err)
	}
	second, err := answer()
	if err != nil {
		t.Fatalf("second answer: %v", err)
	}
	sc.track(second)
	return first.ID, second.ID
}

// 7. Several crashes in one run: a client following it across every
// restart sees sequence numbers keep increasing, with no gap or repeat.
func TestHost_Recover_SeveralCrashes(t *testing.T) {
	t.Parallel()
	forEachHosting(t, examples.Silent, func(t *testing.T, model string) {
		sc := newScenario(t, host.Config{})
		for _, step := range []int64{3, 5, 7} {
			sc.arm(&faultRule{point: host.FaultCommitBefore, mode: modeCrash, match: stepIs(step)})
		}
		r := sc.create(model, "x", map[string]string{"steps": "8"})
		c := newClient("streaming", r.ID)
		done := sc.followAsync(c)
		for range 3 {
			sc.crashAtFault()
		}
		done()
		if len(sc.marks) != 3 {
			t.Fatalf("%d crashes", len(sc.marks))
		}
		for i := 1; i < len(c.view.Events); i++ {
			if c.view.Events[i].Seq != c.view.Events[i-1].Seq+1 {
				t.Fatalf("client saw seq %d after %d", c.view.Events[i].Seq, c.view.Events[i-1].Seq)
			}
		}
		sc.check(map[string]verify.Outcome{r.ID: silentRef(8)}, c)
		requireJournal(t, sc, r.ID, map[int64]int{1: 1, 2: 1, 3: 2, 4: 1, 5: 2, 6: 1, 7: 2, 8: 1, 9: 1})
	})
}

// 8. Human in the loop across crashes: the pending request survives a
// crash; the answer given after the restart is delivered again by
// recovery when the next crash hits before its first commit.
func TestHost_Recover_HITLAcrossCrash(t *testing.T) {
	t.Parallel()
	forEachHosting(t, examples.Approval, func(t *testing.T, model string) {
		sc := newScenario(t, host.Config{})
		first := sc.create(model, "deploy?", nil)
		sc.waitDone(first.ID)
		sc.restart(true)
		evs := collect(t, sc.host(), first.ID, -1)
		fc := evs[len(evs)-1].Response.Output[0]
		if fc.Type != "function_call" {
			t.Fatalf("after the restart the pending request is %+v", fc)
		}
		sc.arm(&faultRule{point: host.FaultCommitBefore, mode: modeCrash})
		second, err := sc.host().Create(testCtx(t), &host.CreateParams{Model: model, Store: true, PreviousResponseID: first.ID,
			Input: []host.InputItem{{Type: host.InputFunctionCallOutput, CallID: fc.CallID, Output: "approve"}}})
		if err != nil {
			t.Fatal(err)
		}
		sc.track(second)
		sc.crashAtFault()
		sc.waitDone(second.ID)
		sc.check(map[string]verify.Outcome{first.ID: approvalAsk,
			second.ID: {Status: "completed", Output: []string{"approved"}}})
	})
}

// 9. Cancel across a crash: a cancel recorded just before the host died
// holds after the restart; no superstep runs after it.
func TestHost_Recover_CancelAcrossCrash(t *testing.T) {
	t.Parallel()
	forEachHosting(t, examples.Silent, func(t *testing.T, model string) {
		sc := newScenario(t, host.Config{})
		r := sc.create(model, "x", map[string]string{"steps": "50", "step_delay_ms": "20"})
		for sc.host().WaitCommitted(t) < 2 {
		}
		sc.cur.cs.crashAfterCancel.Store(true)
		got, err := sc.host().Cancel(testCtx(t), r.ID, "")
		if err != nil || got.Status != store.StatusCancelled {
			t.Fatalf("Cancel: %v %v", got, err)
		}
		sc.restart(true)
		final := sc.waitDone(r.ID)
		if final.Status != store.StatusCancelled {
			t.Fatalf("after the restart the response is %s", final.Status)
		}
		sc.check(map[string]verify.Outcome{r.ID: {Status: "cancelled"}})
		if n := len(sc.journalEntries()); n != sc.marks[0].JournalLen {
			t.Fatalf("%d supersteps ran after the restart of a cancelled run", n-sc.marks[0].JournalLen)
		}
	})
}

// 10. Every restart is a fresh process: a new Host and a new store handle
// on the same file, graceful or crashed, with hour-long leases that no
// restart waits for.
func TestHost_Recover_FreshHandleSameFile(t *testing.T) {
	t.Parallel()
	forEachHosting(t, examples.Silent, func(t *testing.T, model string) {
		sc := newScenario(t, host.Config{})
		sc.arm(&faultRule{point: host.FaultCommitBefore, mode: modeCrash, match: stepIs(8)})
		r := sc.create(model, "x", map[string]string{"steps": "10", "step_delay_ms": "10"})
		c := newClient("streaming", r.ID)
		done := sc.followAsync(c)
		for sc.host().WaitCommitted(t) < 2 {
		}
		sc.restart(false) // graceful: the superstep in flight commits first
		for sc.host().WaitCommitted(t) < 5 {
		}
		sc.restart(true)  // killed mid-superstep
		sc.crashAtFault() // killed in commit 8
		done()
		if sc.incarnation != 4 {
			t.Fatalf("%d incarnations", sc.incarnation)
		}
		// Each restart resumed the run at once: every later incarnation
		// recovered it.
		for i, reg := range sc.regs[1:] {
			if n := metricValue(t, reg, "superstep_host_runs_recovered_total"); n != 1 {
				t.Fatalf("incarnation %d recovered %v runs", i+2, n)
			}
		}
		sc.check(map[string]verify.Outcome{r.ID: silentRef(10)}, c)
	})
}

// The input a continuation carried is re-delivered after a crash from the
// response's record (store.Response.Input, as the host read it at create),
// not re-read from the raw request: here the stored request no longer reads
// at all, and recovery still delivers the answer once.
func TestHost_Recover_InputFromRecord(t *testing.T) {
	t.Parallel()
	sc := newScenario(t, host.Config{})
	first := sc.create(examples.Approval, "deploy?", nil)
	sc.waitDone(first.ID)
	evs := collect(t, sc.host(), first.ID, -1)
	fc := evs[len(evs)-1].Response.Output[0]
	sc.arm(&faultRule{point: host.FaultCommitBefore, mode: modeCrash})
	second, err := sc.host().Create(testCtx(t), &host.CreateParams{Model: examples.Approval, Store: true, PreviousResponseID: first.ID,
		Input: []host.InputItem{{Type: host.InputFunctionCallOutput, CallID: fc.CallID, Output: "approve"}}})
	if err != nil {
		t.Fatal(err)
	}
	sc.track(second)
	sc.waitCrash()
	sc.stop(true)
	sc.mark()
	db, err := sql.Open("sqlite3", sc.path)
	if err != nil {
		t.Fatal(err)
	}
	var input []byte
	if err := db.QueryRow(`SELECT input FROM responses WHERE id = ?`, second.ID).Scan(&input); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(input), fc.CallID) {
		t.Fatalf("the record's input %s does not hold the answer", input)
	}
	if _, err := db.Exec(`UPDATE responses SET request = '{"unreadable":' WHERE id = ?`, second.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	sc.start()
	sc.waitDone(second.ID)
	sc.check(map[string]verify.Outcome{first.ID: approvalAsk,
		second.ID: {Status: "completed", Output: []string{"approved"}}})
}

// The publication mode decided at create is in the response's record: a
// response created live (the model's default then) is recovered live by a
// host where the model is registered committed, so the superstep that
// crashed streams its deltas live again: they are the ones the log holds,
// so nothing is appended again and no reset is needed (recovered in
// committed mode, the superstep would stream nothing live: a reset would
// void its deltas, and its commit would add the text whole).
func TestHost_Recover_PublicationFromRecord(t *testing.T) {
	t.Parallel()
	incarnation := 0
	sc := newScenarioWith(t, host.Config{}, func(t *testing.T, h *host.Host) {
		incarnation++
		var opts []host.ModelOption
		if incarnation == 1 {
			opts = append(opts, host.WithPublication(host.PublicationLive))
		}
		streamABCEx := streamABC()
		wf, err := workflow.NewBuilder("streamy").SetStart(streamABCEx).Outputs(streamABCEx).Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := h.RegisterWorkflow("streamy", wf, opts...); err != nil {
			t.Fatal(err)
		}
	})
	sc.arm(&faultRule{point: host.FaultCommitBefore, mode: modeCrash, match: stepIs(1)})
	r := sc.create("streamy", "go", nil)
	sc.crashAtFault()
	sc.waitDone(r.ID)
	evs := collect(t, sc.host(), r.ID, -1)
	if rs := resets(evs); len(rs) != 0 {
		t.Fatalf("%d resets: %s", len(rs), types(evs))
	}
	if got := deltas(evs); !slices.Equal(got, []string{"a ", "b ", "c"}) {
		t.Fatalf("the superstep streamed %q, want it live again, matching the log (%s)", got, types(evs))
	}
	if incarnation != 2 {
		t.Fatalf("%d incarnations", incarnation)
	}
}

// A branch (a conversation continued from an earlier response) that
// crashes before its first commit is recovered on its own run from the
// state it was copied from: its input is re-delivered once, and its reply
// has the earlier response's context only.
func TestHost_Recover_BranchBeforeFirstCommit(t *testing.T) {
	t.Parallel()
	sc := newScenarioWith(t, host.Config{}, func(t *testing.T, h *host.Host) {
		if err := h.RegisterAgent("chat", historyAgent); err != nil {
			t.Fatal(err)
		}
	})
	turn := func(prev, text string) *store.Response {
		t.Helper()
		r, err := sc.host().Create(testCtx(t), &host.CreateParams{Model: "chat", Store: true, Background: true,
			PreviousResponseID: prev, Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: text}}})
		if err != nil {
			t.Fatal(err)
		}
		sc.track(r)
		return r
	}
	first := turn("", "hi")
	sc.waitDone(first.ID)
	second := turn(first.ID, "again")
	sc.waitDone(second.ID)
	sc.arm(&faultRule{point: host.FaultCommitBefore, mode: modeCrash})
	branch := turn(first.ID, "other")
	if branch.RunID == first.RunID {
		t.Fatal("the branch was created on the original run")
	}
	sc.crashAtFault()
	sc.waitDone(branch.ID)
	sc.check(map[string]verify.Outcome{
		branch.ID: {Status: "completed", Output: []string{"user:hi|assistant:user:hi|assistant:bye|user:other", "bye"}},
		second.ID: {Status: "completed", Output: []string{"user:hi|assistant:user:hi|assistant:bye|user:again", "bye"}},
	})
}
