package host_test

import (
	"context"
	"errors"
	"iter"
	"slices"
	"strings"
	"testing"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/verify"
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
// commit: recovery appends a reset response.in_progress carrying the last
// committed output, then the superstep re-runs and streams again. Every
// client, resuming anywhere, sees the same append-only history.
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
		var resets []event
		for _, e := range evs[2:] {
			if e.Type == "response.in_progress" {
				resets = append(resets, e)
			}
		}
		if len(resets) != 1 || len(resets[0].Response.Output) != 1 ||
			resets[0].Response.Output[0].Content[0].Text != "x one two three" {
			t.Fatalf("resets %+v (events %s)", resets, types(evs))
		}
		// "done" streamed before the crash and again after the reset.
		if got := strings.Join(deltas(evs), "|"); got != "x |one |two |three|done|done" {
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
