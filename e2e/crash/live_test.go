package crash

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/testkit/pgtest"
	"github.com/superstep/superstep/internal/testkit/proctest"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/verify"
)

// liveInput is the writer's topic: the local model echoes it, so the
// writer streams about 25 tokens and the reviewer about 30.
const liveInput = "write a short story about a lighthouse keeper who finds a message in a bottle " +
	"and sails across the grey sea to answer it before the winter storms arrive"

// liveConfigs are the LLM demos on the server's local model server
// (--model-server local), with token delays small enough that kills land
// while tokens stream: demo.writer-reviewer in its default live mode (also
// with a slower reviewer, and once in committed mode for contrast) and
// demo.tools (a tool call, then a reply).
var liveConfigs = []config{
	{name: "writer-reviewer", model: "demo.writer-reviewer", input: liveInput,
		meta: map[string]string{"token_delay_ms": "2", "step_delay_ms": "0"}},
	{name: "writer-reviewer-slow-review", model: "demo.writer-reviewer", input: liveInput,
		meta: map[string]string{"writer.token_delay_ms": "1", "reviewer.token_delay_ms": "5", "step_delay_ms": "0"}},
	{name: "writer-reviewer-committed", model: "demo.writer-reviewer", input: liveInput,
		meta: map[string]string{"publication": "committed", "token_delay_ms": "2", "step_delay_ms": "0"}},
	{name: "tools", model: "demo.tools", input: `please calculate {"a":6,"op":"*","b":7} for the keeper's log`,
		meta: map[string]string{"token_delay_ms": "2", "step_delay_ms": "0"}},
}

// liveSuite kills the server (and with it its local model server, which
// comes back on a new port) while the LLM demos stream tokens. It makes a
// third of -kills: each kill waits for tokens to flow after the restart
// (on PostgreSQL, for the killed server's leases to expire first), so each
// gets 4 s of the time budget.
func liveSuite() *suite {
	return &suite{configs: liveConfigs, kills: max(1, (*flagKills+2)/3), serveArgs: []string{"--model-server", "local"},
		killAfterDelta: true, jitterMS: 150, killBudget: 4 * time.Second, check: checkLive}
}

func TestCrash_Live_SQLite(t *testing.T) {
	t.Parallel()
	db := filepath.Join(proctest.WorkDir(t, *flagKeep, "superstep-crash"), "superstep.db")
	runSuite(t, &backend{
		dbArg: db,
		open:  func(ctx context.Context) (store.Store, error) { return sqlite.Open(ctx, db, nil) },
	}, liveSuite())
}

func TestCrash_Live_Postgres(t *testing.T) {
	t.Parallel()
	db := pgtest.Database(t, "superstep_crash")
	runSuite(t, &backend{
		dbArg:     db,
		open:      func(ctx context.Context) (store.Store, error) { return postgres.Open(ctx, db, nil) },
		extraArgs: postgresServeArgs,
	}, liveSuite())
}

// checkLive checks what live mode promises a client across kills, beyond
// verify's invariants: a client that renders the stream as it comes (text
// deltas appended to their item, a reset response.in_progress bringing
// the output back to its last committed state) sees every message item's
// deltas add up to the item's final text, and ends with exactly the final
// output. It also requires that kills did land while tokens streamed: some
// client resumed with starting_after from inside a message item it had
// seen streaming (its item was not done yet) and rendered the whole stream
// right. Resets are counted, not required: a recovered superstep that
// streams what the log holds again (the journal, a deterministic executor)
// needs none.
func checkLive(ch *chaos, in *verify.Input) {
	t := ch.t
	resets, voiding := 0, 0
	for _, r := range in.Responses {
		rs, vs := logResets(r.Log)
		resets, voiding = resets+rs, voiding+vs
	}
	seenOnResume, midItem, rendered := 0, 0, 0
	for _, r := range in.Responses {
		for _, v := range r.Clients {
			if resumedBeforeReset(v) {
				seenOnResume++
			}
			if v.StartAt != 0 || len(v.Events) == 0 || !verify.IsTerminal(v.Events[len(v.Events)-1].Type) {
				continue
			}
			rendered++
			if err := render(v.Events); err != nil {
				t.Errorf("seed %d: response %s, client %s: %v", ch.seed, r.ID, v.Name, err)
				continue
			}
			if resumedMidItem(v) {
				midItem++
			}
		}
	}
	t.Logf("live: %d resets in the logs, %d of them voiding streamed items; %d client views received a reset after resuming; %d resumed inside a streaming item; %d views rendered from the start",
		resets, voiding, seenOnResume, midItem, rendered)
	logLiveResets(ch, in)
	if midItem == 0 {
		t.Errorf("seed %d: no client resumed inside an item it saw streaming (%d resets voiding streamed items): the test did not test live recovery",
			ch.seed, voiding)
	}
}

// resumedMidItem reports whether the client's first resume cursor fell
// inside a message item: after its output_item.added, before its
// output_item.done (a kill landed while its tokens streamed).
func resumedMidItem(v verify.ClientView) bool {
	if len(v.ResumedAt) == 0 {
		return false
	}
	first := slices.Min(v.ResumedAt)
	open := map[int]bool{}
	for _, e := range v.Events {
		if e.Seq > first {
			break
		}
		ev, err := parseLiveEvent(e.Data)
		if err != nil {
			return false
		}
		switch e.Type {
		case "response.in_progress":
			clear(open)
		case "response.output_item.added":
			open[ev.OutputIndex] = true
		case "response.output_item.done":
			delete(open, ev.OutputIndex)
		}
	}
	return len(open) > 0
}

// logResets counts the reset response.in_progress events of a log (any
// after the first) and those that voided message items left open by
// streamed deltas.
func logResets(log []store.Event) (resets, voiding int) {
	seen := false
	open := map[int]bool{}
	for _, e := range log {
		ev, err := parseLiveEvent(e.Payload)
		if err != nil {
			continue
		}
		switch e.Type {
		case "response.in_progress":
			if seen {
				resets++
				if len(open) > 0 {
					voiding++
				}
			}
			seen = true
			clear(open)
		case "response.output_item.added":
			open[ev.OutputIndex] = true
		case "response.output_item.done":
			delete(open, ev.OutputIndex)
		}
	}
	return resets, voiding
}

// resumedBeforeReset reports whether the client received a reset
// response.in_progress on a connection it resumed with starting_after
// from before that reset.
func resumedBeforeReset(v verify.ClientView) bool {
	if len(v.ResumedAt) == 0 {
		return false
	}
	first := slices.Min(v.ResumedAt)
	for _, e := range v.Events {
		if e.Type == "response.in_progress" && e.Seq > 1 && first < e.Seq {
			return true
		}
	}
	return false
}

// liveEvent is the part of a stream event the renderer reads.
type liveEvent struct {
	OutputIndex int             `json:"output_index"`
	Delta       string          `json:"delta"`
	Item        json.RawMessage `json:"item"`
}

func parseLiveEvent(data []byte) (*liveEvent, error) {
	var ev liveEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, fmt.Errorf("event payload is not JSON: %w", err)
	}
	return &ev, nil
}

// render plays a client's events from sequence 0 as a UI would and checks
// that each message item's deltas add up to its text when it is done and
// that the rendering ends equal to the terminal event's output.
func render(events []verify.ReceivedEvent) error {
	var items []string
	for _, e := range events {
		ev, err := parseLiveEvent(e.Data)
		if err != nil {
			return fmt.Errorf("seq %d: %w", e.Seq, err)
		}
		switch e.Type {
		case "response.created", "response.in_progress":
			// The first shows the empty output; a reset shows the last
			// committed one, withdrawing what was streamed since.
			out, err := verify.OutcomeOf(e.Data)
			if err != nil {
				return fmt.Errorf("seq %d: %w", e.Seq, err)
			}
			items = append(items[:0], out.Output...)
		case "response.output_item.added":
			text, _, err := verify.ItemOutcome(ev.Item)
			if err != nil || ev.OutputIndex != len(items) {
				return fmt.Errorf("seq %d: item added at output_index %d with %d items rendered (%v)", e.Seq, ev.OutputIndex, len(items), err)
			}
			items = append(items, text)
		case "response.output_text.delta":
			if ev.OutputIndex < 0 || ev.OutputIndex >= len(items) {
				return fmt.Errorf("seq %d: delta for output_index %d with %d items rendered", e.Seq, ev.OutputIndex, len(items))
			}
			items[ev.OutputIndex] += ev.Delta
		case "response.output_item.done":
			done, typ, err := verify.ItemOutcome(ev.Item)
			if err != nil || ev.OutputIndex < 0 || ev.OutputIndex >= len(items) {
				return fmt.Errorf("seq %d: item done at output_index %d with %d items rendered (%v)", e.Seq, ev.OutputIndex, len(items), err)
			}
			if typ == "message" && items[ev.OutputIndex] != done {
				return fmt.Errorf("seq %d: the deltas of item %d add up to %q, its done event says %q",
					e.Seq, ev.OutputIndex, items[ev.OutputIndex], done)
			}
			items[ev.OutputIndex] = done
		}
		if verify.IsTerminal(e.Type) {
			out, err := verify.OutcomeOf(e.Data)
			if err != nil {
				return fmt.Errorf("seq %d: %w", e.Seq, err)
			}
			if !slices.Equal(items, out.Output) {
				return fmt.Errorf("the rendered stream ends with %q, the final output is %q", items, out.Output)
			}
		}
	}
	return nil
}
