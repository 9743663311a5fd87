package protocol

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The projector's transcripts: a step or live event in, frames out. Each
// frame is rendered as one line, "seq type [output_index] [item id]
// [text|delta|arguments] [status]", so a test reads as the stream a client
// sees.

var t0 = time.Unix(1_700_000_000, 0)

// created returns the state after Create: response.created at 0.
func created(t *testing.T) State {
	t.Helper()
	c, err := Create(&NewResponseParams{ID: "resp_t", Model: "m", Status: StatusInProgress, CreatedAt: t0, Store: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Frames) != 1 || c.Frames[0].Type != EventResponseCreated || c.Frames[0].Seq != 0 || c.Next.NextSeq != 1 {
		t.Fatalf("create: %s", render(c.Frames))
	}
	return c.Next
}

// render returns one line per frame.
func render(fs []Frame) string {
	var b strings.Builder
	for _, f := range fs {
		var ev struct {
			SequenceNumber int64           `json:"sequence_number"`
			OutputIndex    *int            `json:"output_index"`
			ItemID         string          `json:"item_id"`
			Item           *Item           `json:"item"`
			Delta          *string         `json:"delta"`
			Text           *string         `json:"text"`
			Arguments      *string         `json:"arguments"`
			Response       json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal(f.Payload, &ev); err != nil {
			fmt.Fprintf(&b, "bad payload %s\n", f.Payload)
			continue
		}
		if ev.SequenceNumber != f.Seq {
			fmt.Fprintf(&b, "seq mismatch %d/%d ", f.Seq, ev.SequenceNumber)
		}
		fmt.Fprintf(&b, "%d %s", f.Seq, strings.TrimPrefix(f.Type, "response."))
		if ev.OutputIndex != nil {
			fmt.Fprintf(&b, " [%d]", *ev.OutputIndex)
		}
		switch {
		case ev.Item != nil:
			fmt.Fprintf(&b, " %s %s", ev.Item.ID, ev.Item.Status)
			if ev.Item.Type == ItemFunctionCall && ev.Item.Status != ItemInProgress {
				fmt.Fprintf(&b, " %s(%s)", ev.Item.Name, ev.Item.Arguments)
			}
			if ev.Item.Type == ItemToolCall {
				fmt.Fprintf(&b, " tool %s(%s)", ev.Item.Name, ev.Item.Arguments)
				if ev.Item.Output != nil {
					fmt.Fprintf(&b, " -> %q", *ev.Item.Output)
				}
			}
			if len(ev.Item.Content) > 0 {
				fmt.Fprintf(&b, " %q", ev.Item.Content[0].Text)
			}
		case ev.Delta != nil && f.Type == EventFunctionCallArgDelta:
			fmt.Fprintf(&b, " %s %s", ev.ItemID, *ev.Delta)
		case ev.Delta != nil:
			fmt.Fprintf(&b, " %s %q", ev.ItemID, *ev.Delta)
		case ev.Text != nil:
			fmt.Fprintf(&b, " %s %q", ev.ItemID, *ev.Text)
		case ev.Arguments != nil:
			fmt.Fprintf(&b, " %s %s", ev.ItemID, *ev.Arguments)
		case ev.Response != nil:
			var r Response
			if err := json.Unmarshal(ev.Response, &r); err != nil {
				fmt.Fprintf(&b, " bad response %s", ev.Response)
				break
			}
			fmt.Fprintf(&b, " %s output=%d", r.Status, len(r.Output))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// want compares a transcript with its expected lines (leading tabs and
// blank lines of the literal ignored).
func want(t *testing.T, got []Frame, lines string) {
	t.Helper()
	var exp strings.Builder
	for _, l := range strings.Split(lines, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			exp.WriteString(l + "\n")
		}
	}
	if g := render(got); g != exp.String() {
		t.Fatalf("transcript:\n%s\nwant:\n%s", g, exp.String())
	}
}

func step(t *testing.T, st State, live Live, s *Step) Commit {
	t.Helper()
	c, err := ProjectStep(st, live, s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func liveEv(t *testing.T, st State, next int64, l Live, ev LiveEvent) ([]Frame, Live) {
	t.Helper()
	fs, nl, err := ProjectLive(st, next, l, &ev)
	if err != nil {
		t.Fatal(err)
	}
	return fs, nl
}

// snapshot returns the snapshot as it reads after c: the one c writes, or,
// when c writes none (nothing the Response shows changed), c's next state.
func snapshot(t *testing.T, c Commit) Response {
	t.Helper()
	data := c.Snapshot
	if data == nil {
		var err error
		if data, err = json.Marshal(c.Next.Response); err != nil {
			t.Fatal(err)
		}
	}
	var r Response
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// A silent running step writes response.in_progress once, nothing else; the
// next step adds nothing of the kind again.
func TestProjectStep_InProgressOnce(t *testing.T) {
	st := created(t)
	c := step(t, st, Live{}, &Step{Number: 1, Status: StatusInProgress})
	want(t, c.Frames, `1 in_progress in_progress output=0`)
	if c.Next.NextSeq != 2 || c.Next.Step != 1 || terminal(c) || c.Usage != nil {
		t.Fatalf("next %+v usage %s", c.Next, c.Usage)
	}
	c2 := step(t, c.Next, Live{}, &Step{Number: 2, Status: StatusInProgress})
	if len(c2.Frames) != 0 || c2.Next.NextSeq != 2 {
		t.Fatalf("second silent step: %s", render(c2.Frames))
	}
	// Nothing the Response shows changed: no snapshot to write.
	if c2.Snapshot != nil || c.Snapshot != nil {
		t.Fatalf("silent steps wrote snapshots %s / %s", c.Snapshot, c2.Snapshot)
	}
	if r := snapshot(t, c2); r.Status != StatusInProgress || r.Usage != nil {
		t.Fatalf("snapshot %+v", r)
	}
}

// Every output kind becomes one complete item, in order, and a completed
// step ends the response with its usage and completed_at.
func TestProjectStep_OutputsAndCompletion(t *testing.T) {
	st := created(t)
	c := step(t, st, Live{}, &Step{Number: 1, Status: StatusCompleted, At: t0.Add(time.Second),
		Usage: Usage{InputTokens: 3, OutputTokens: 2, TotalTokens: 5},
		Outputs: []Output{
			{Kind: OutputMessage, Executor: "a", Text: "hi"},
			{Kind: OutputToolCall, Executor: "a", CallID: "call_1", Name: "add", Arguments: `{"x":1}`, Text: "2"},
			{Kind: OutputRequest, Executor: "ask", CallID: "req_1", Name: "approve", Arguments: `{"q":"ok?"}`},
		}})
	want(t, c.Frames, `
		1 in_progress in_progress output=0
		2 output_item.added [0] msg_t_0 in_progress
		3 content_part.added [0]
		4 output_text.delta [0] msg_t_0 "hi"
		5 output_text.done [0] msg_t_0 "hi"
		6 content_part.done [0]
		7 output_item.done [0] msg_t_0 completed "hi"
		8 output_item.added [1] mcp_t_1 in_progress tool add({"x":1})
		9 output_item.done [1] mcp_t_1 completed tool add({"x":1}) -> "2"
		10 output_item.added [2] fc_t_2 in_progress
		11 function_call_arguments.delta [2] fc_t_2 {"q":"ok?"}
		12 function_call_arguments.done [2] fc_t_2 {"q":"ok?"}
		13 output_item.done [2] fc_t_2 completed approve({"q":"ok?"})
		14 completed completed output=3`)
	r := snapshot(t, c)
	if !terminal(c) || r.Status != StatusCompleted || r.CompletedAt == nil || *r.CompletedAt != t0.Unix()+1 ||
		r.Usage == nil || r.Usage.TotalTokens != 5 || r.Output[2].CallID != "req_1" ||
		r.Output[1].Type != ItemToolCall || r.Output[1].Output == nil || *r.Output[1].Output != "2" {
		t.Fatalf("snapshot %s", c.Snapshot)
	}
	if string(c.Usage) == "" || c.Error != nil {
		t.Fatalf("record fields usage %s error %s", c.Usage, c.Error)
	}
}

// Usage accumulates over steps and is kept in the record (Commit.Usage)
// while the snapshot shows null until the response ends.
func TestProjectStep_UsageAccumulates(t *testing.T) {
	st := created(t)
	c1 := step(t, st, Live{}, &Step{Number: 1, Status: StatusInProgress, Usage: Usage{InputTokens: 1, TotalTokens: 1}})
	if r := snapshot(t, c1); r.Usage != nil || string(c1.Usage) == "" {
		t.Fatalf("in progress: snapshot usage %+v record %s", r.Usage, c1.Usage)
	}
	c2 := step(t, c1.Next, Live{}, &Step{Number: 2, Status: StatusCompleted, Usage: Usage{OutputTokens: 4, TotalTokens: 4}})
	if r := snapshot(t, c2); r.Usage == nil || r.Usage.InputTokens != 1 || r.Usage.OutputTokens != 4 || r.Usage.TotalTokens != 5 {
		t.Fatalf("terminal usage %+v", r.Usage)
	}
}

// A reply cut short: the last text of that executor ends incomplete, the
// snapshot shows incomplete_details at once, and the response ends
// incomplete.
func TestProjectStep_Incomplete(t *testing.T) {
	st := created(t)
	c := step(t, st, Live{}, &Step{Number: 1, Status: StatusCompleted, Incomplete: &Incomplete{Executor: "w", Reason: "max_output_tokens"},
		Outputs: []Output{{Kind: OutputMessage, Executor: "w", Text: "long"}, {Kind: OutputMessage, Executor: "x", Text: "other"}}})
	want(t, c.Frames, `
		1 in_progress in_progress output=0
		2 output_item.added [0] msg_t_0 in_progress
		3 content_part.added [0]
		4 output_text.delta [0] msg_t_0 "long"
		5 output_text.done [0] msg_t_0 "long"
		6 content_part.done [0]
		7 output_item.done [0] msg_t_0 incomplete "long"
		8 output_item.added [1] msg_t_1 in_progress
		9 content_part.added [1]
		10 output_text.delta [1] msg_t_1 "other"
		11 output_text.done [1] msg_t_1 "other"
		12 content_part.done [1]
		13 output_item.done [1] msg_t_1 completed "other"
		14 incomplete incomplete output=2`)
	r := snapshot(t, c)
	if r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "max_output_tokens" {
		t.Fatalf("snapshot %s", c.Snapshot)
	}
}

// A reply cut short in a running step shows in the snapshot while in
// progress, and the response ends incomplete when a later step completes.
func TestProjectStep_IncompleteCarriesToTheEnd(t *testing.T) {
	st := created(t)
	c1 := step(t, st, Live{}, &Step{Number: 1, Status: StatusInProgress, Incomplete: &Incomplete{Executor: "w", Reason: "content_filter"},
		Outputs: []Output{{Kind: OutputMessage, Executor: "w", Text: "cut"}}})
	if r := snapshot(t, c1); r.Status != StatusInProgress || r.IncompleteDetails == nil {
		t.Fatalf("running snapshot %s", c1.Snapshot)
	}
	c2 := step(t, c1.Next, Live{}, &Step{Number: 2, Status: StatusCompleted})
	want(t, c2.Frames, `8 incomplete incomplete output=1`)
}

// A failed step shows its error, keeps no incomplete_details, and the
// record gets the encoded error.
func TestProjectStep_Failed(t *testing.T) {
	st := created(t)
	c := step(t, st, Live{}, &Step{Number: 1, Status: StatusFailed, Error: &Error{Code: "server_error", Message: "boom"},
		Incomplete: &Incomplete{Executor: "w", Reason: "max_output_tokens"}})
	want(t, c.Frames, `
		1 in_progress in_progress output=0
		2 failed failed output=0`)
	r := snapshot(t, c)
	if r.Error == nil || r.Error.Message != "boom" || r.IncompleteDetails != nil || r.CompletedAt != nil || r.Usage == nil {
		t.Fatalf("snapshot %s", c.Snapshot)
	}
	var e Error
	if err := json.Unmarshal(c.Error, &e); err != nil || e.Message != "boom" {
		t.Fatalf("record error %s (%v)", c.Error, err)
	}
}

// Live: deltas open a message and stream into it; the commit closes it with
// the committed text, without repeating the deltas.
func TestProjectLive_DeltasThenCommit(t *testing.T) {
	st := created(t)
	var all []Frame
	l := Live{}
	next := st.NextSeq
	for _, tok := range []string{"He", "llo"} {
		fs, nl := liveEv(t, st, next, l, LiveEvent{Step: 1, Executor: "w", Stream: "w#1", Kind: LiveTextDelta, Text: tok})
		all, l, next = append(all, fs...), nl, fs[len(fs)-1].Seq+1
	}
	want(t, all, `
		1 in_progress in_progress output=0
		2 output_item.added [0] msg_t_0 in_progress
		3 content_part.added [0]
		4 output_text.delta [0] msg_t_0 "He"
		5 output_text.delta [0] msg_t_0 "llo"`)
	if l.step != 1 || len(l.items) != 1 {
		t.Fatalf("live %d items at step %d", len(l.items), l.step)
	}
	st.NextSeq = next // durable
	c := step(t, st, l, &Step{Number: 1, Status: StatusCompleted, Outputs: []Output{{Kind: OutputMessage, Executor: "w", Text: "Hello"}}})
	want(t, c.Frames, `
		6 output_text.done [0] msg_t_0 "Hello"
		7 content_part.done [0]
		8 output_item.done [0] msg_t_0 completed "Hello"
		9 completed completed output=1`)
}

// ProjectLive leaves the Live it was given as it was: a caller keeps the
// durable one beside the queued one.
func TestProjectLive_DoesNotModifyItsArgument(t *testing.T) {
	st := created(t)
	_, l1 := liveEv(t, st, 1, Live{}, LiveEvent{Step: 1, Executor: "w", Stream: "w#1", Kind: LiveTextDelta, Text: "a"})
	_, l2 := liveEv(t, st, 5, l1, LiveEvent{Step: 1, Executor: "w", Stream: "w#1", Kind: LiveToolCall, CallID: "c", Name: "f", Arguments: "{}"})
	_, l3 := liveEv(t, st, 9, l2, LiveEvent{Step: 1, Executor: "w", Stream: "w#1", Kind: LiveToolResult, CallID: "c", Text: "r"})
	if len(l1.items) != 1 || l1.items[0].done || len(l2.items) != 2 || !l2.items[0].done || l2.items[1].done || !l3.items[1].done {
		t.Fatalf("l1 %+v l2 %+v", l1.items, l2.items)
	}
}

// An agent's own tool call closes the message its stream was writing and
// opens a tool call item (an extension type, not a function_call a client
// would run); its result closes it; text after it opens a new message. The
// commit takes the closed items over as they are.
func TestProjectLive_ToolCall(t *testing.T) {
	st := created(t)
	var all []Frame
	l := Live{}
	next := st.NextSeq
	for _, ev := range []LiveEvent{
		{Kind: LiveTextDelta, Text: "Let me add."},
		{Kind: LiveToolCall, CallID: "call_1", Name: "add", Arguments: `{"a":1}`},
		{Kind: LiveToolResult, CallID: "call_1", Text: "2"},
		{Kind: LiveTextDelta, Text: "2"},
	} {
		ev.Step, ev.Executor, ev.Stream = 1, "w", "w#1"
		fs, nl := liveEv(t, st, next, l, ev)
		all, l, next = append(all, fs...), nl, fs[len(fs)-1].Seq+1
	}
	want(t, all, `
		1 in_progress in_progress output=0
		2 output_item.added [0] msg_t_0 in_progress
		3 content_part.added [0]
		4 output_text.delta [0] msg_t_0 "Let me add."
		5 output_text.done [0] msg_t_0 "Let me add."
		6 content_part.done [0]
		7 output_item.done [0] msg_t_0 completed "Let me add."
		8 output_item.added [1] mcp_t_1 in_progress tool add({"a":1})
		9 output_item.done [1] mcp_t_1 completed tool add({"a":1}) -> "2"
		10 output_item.added [2] msg_t_2 in_progress
		11 content_part.added [2]
		12 output_text.delta [2] msg_t_2 "2"`)
	st.NextSeq = next
	c := step(t, st, l, &Step{Number: 1, Status: StatusCompleted, Outputs: []Output{
		{Kind: OutputMessage, Executor: "w", Text: "Let me add."},
		{Kind: OutputToolCall, Executor: "w", CallID: "call_1", Name: "add", Arguments: `{"a":1}`, Text: "2"},
		{Kind: OutputMessage, Executor: "w", Text: "2"},
	}})
	want(t, c.Frames, `
		13 output_text.done [2] msg_t_2 "2"
		14 content_part.done [2]
		15 output_item.done [2] msg_t_2 completed "2"
		16 completed completed output=3`)
	if r := snapshot(t, c); r.Output[1].Type != ItemToolCall || r.Output[1].Name != "add" || *r.Output[1].Output != "2" {
		t.Fatalf("snapshot %s", c.Snapshot)
	}
}

// A tool call whose result was not published live is closed by the commit
// with the output the step yielded.
func TestProjectLive_ToolCallClosedByCommit(t *testing.T) {
	st := created(t)
	fs, l := liveEv(t, st, 1, Live{}, LiveEvent{Step: 1, Executor: "w", Stream: "w#1", Kind: LiveToolCall, CallID: "c", Name: "f", Arguments: "{}"})
	st.NextSeq = fs[len(fs)-1].Seq + 1
	c := step(t, st, l, &Step{Number: 1, Status: StatusInProgress, Outputs: []Output{
		{Kind: OutputToolCall, Executor: "w", CallID: "c", Name: "f", Arguments: "{}", Text: "out"}}})
	want(t, c.Frames, `3 output_item.done [0] mcp_t_0 completed tool f({}) -> "out"`)
}

// A retried model call voids the message its stream was writing: a reset
// carrying the last committed output, then the other streams' items again
// as they stand; the retry streams anew after them.
func TestProjectLive_RetryVoidsOpenMessage(t *testing.T) {
	st := created(t)
	l := Live{}
	next := st.NextSeq
	var all []Frame
	for _, ev := range []LiveEvent{
		{Executor: "a", Stream: "a#1", Kind: LiveTextDelta, Text: "A"},
		{Executor: "b", Stream: "b#1", Kind: LiveTextDelta, Text: "B"},
		{Executor: "a", Stream: "a#1", Kind: LiveRetry},
		{Executor: "a", Stream: "a#1", Kind: LiveTextDelta, Text: "A2"},
	} {
		ev.Step = 1
		fs, nl := liveEv(t, st, next, l, ev)
		all, l = append(all, fs...), nl
		next = fs[len(fs)-1].Seq + 1
	}
	want(t, all, `
		1 in_progress in_progress output=0
		2 output_item.added [0] msg_t_0 in_progress
		3 content_part.added [0]
		4 output_text.delta [0] msg_t_0 "A"
		5 output_item.added [1] msg_t_1 in_progress
		6 content_part.added [1]
		7 output_text.delta [1] msg_t_1 "B"
		8 in_progress in_progress output=0
		9 output_item.added [0] msg_t_0 in_progress
		10 content_part.added [0]
		11 output_text.delta [0] msg_t_0 "B"
		12 output_item.added [1] msg_t_1 in_progress
		13 content_part.added [1]
		14 output_text.delta [1] msg_t_1 "A2"`)
	// The outputs come in executor order a, b: the live items (b, a) do
	// not line up, so the commit resets and adds complete items.
	st.NextSeq = next
	c := step(t, st, l, &Step{Number: 1, Status: StatusInProgress, Outputs: []Output{
		{Kind: OutputMessage, Executor: "a", Text: "A2"}, {Kind: OutputMessage, Executor: "b", Text: "B"}}})
	want(t, c.Frames, `
		15 in_progress in_progress output=0
		16 output_item.added [0] msg_t_0 in_progress
		17 content_part.added [0]
		18 output_text.delta [0] msg_t_0 "A2"
		19 output_text.done [0] msg_t_0 "A2"
		20 content_part.done [0]
		21 output_item.done [0] msg_t_0 completed "A2"
		22 output_item.added [1] msg_t_1 in_progress
		23 content_part.added [1]
		24 output_text.delta [1] msg_t_1 "B"
		25 output_text.done [1] msg_t_1 "B"
		26 content_part.done [1]
		27 output_item.done [1] msg_t_1 completed "B"`)
}

// A retry with no open message, or a discard of a stream that published
// nothing, adds no frame.
func TestProjectLive_NothingToVoid(t *testing.T) {
	st := created(t)
	for _, k := range []LiveKind{LiveRetry, LiveDiscard} {
		fs, l, err := ProjectLive(st, 1, Live{}, &LiveEvent{Step: 1, Executor: "a", Stream: "a#1", Kind: k})
		if err != nil || len(fs) != 0 || len(l.items) != 0 {
			t.Fatalf("kind %d: %v %s", k, err, render(fs))
		}
	}
}

// Nested sub-workflow streams: a discard of the outer attempt voids the
// items of the streams nested in it, not those of a sibling attempt
// whose name shares a prefix.
func TestProjectLive_DiscardVoidsNestedStreams(t *testing.T) {
	st := created(t)
	l := Live{}
	next := st.NextSeq
	var all []Frame
	for _, ev := range []LiveEvent{
		{Executor: "outer", Stream: "outer#1/1/inner#1", Kind: LiveTextDelta, Text: "nested"},
		{Executor: "outer1", Stream: "outer1#1", Kind: LiveTextDelta, Text: "sibling"},
		{Executor: "outer", Stream: "outer#1", Kind: LiveDiscard},
	} {
		ev.Step = 3
		fs, nl := liveEv(t, st, next, l, ev)
		all, l = append(all, fs...), nl
		next = fs[len(fs)-1].Seq + 1
	}
	want(t, all, `
		1 in_progress in_progress output=0
		2 output_item.added [0] msg_t_0 in_progress
		3 content_part.added [0]
		4 output_text.delta [0] msg_t_0 "nested"
		5 output_item.added [1] msg_t_1 in_progress
		6 content_part.added [1]
		7 output_text.delta [1] msg_t_1 "sibling"
		8 in_progress in_progress output=0
		9 output_item.added [0] msg_t_0 in_progress
		10 content_part.added [0]
		11 output_text.delta [0] msg_t_0 "sibling"`)
	if len(l.items) != 1 || l.items[0].executor != "outer1" {
		t.Fatalf("live after discard %+v", l.items)
	}
}

// An event of a new superstep starts from nothing: the previous step's
// items (committed since) are not its.
func TestProjectLive_NewStepStartsFresh(t *testing.T) {
	st := created(t)
	_, l := liveEv(t, st, 1, Live{}, LiveEvent{Step: 1, Executor: "w", Stream: "w#1", Kind: LiveTextDelta, Text: "x"})
	c := step(t, State{Response: st.Response, NextSeq: 5}, l, &Step{Number: 1, Status: StatusInProgress,
		Outputs: []Output{{Kind: OutputMessage, Executor: "w", Text: "x"}}})
	fs, l2 := liveEv(t, c.Next, c.Next.NextSeq, l, LiveEvent{Step: 2, Executor: "w", Stream: "w#1", Kind: LiveTextDelta, Text: "y"})
	want(t, fs, `
		8 output_item.added [1] msg_t_1 in_progress
		9 content_part.added [1]
		10 output_text.delta [1] msg_t_1 "y"`)
	if l2.step != 2 || len(l2.items) != 1 {
		t.Fatalf("live %d at %d", len(l2.items), l2.step)
	}
}

// The committed step cut short in live mode: the open message closes
// incomplete.
func TestProjectStep_LiveCutShort(t *testing.T) {
	st := created(t)
	fs, l := liveEv(t, st, 1, Live{}, LiveEvent{Step: 1, Executor: "w", Stream: "w#1", Kind: LiveTextDelta, Text: "lo"})
	st.NextSeq = fs[len(fs)-1].Seq + 1
	c := step(t, st, l, &Step{Number: 1, Status: StatusCompleted, Incomplete: &Incomplete{Executor: "w", Reason: "max_output_tokens"},
		Outputs: []Output{{Kind: OutputMessage, Executor: "w", Text: "lo"}}})
	want(t, c.Frames, `
		5 output_text.done [0] msg_t_0 "lo"
		6 content_part.done [0]
		7 output_item.done [0] msg_t_0 incomplete "lo"
		8 incomplete incomplete output=1`)
}

// A cancel with items open live: the closed ones are output as they are,
// the open message closes incomplete with the text so far, then
// response.cancelled; no response.in_progress is added for a cancel.
func TestProjectEnd_CancelClosesOpenItems(t *testing.T) {
	st := created(t)
	c0 := step(t, st, Live{}, &Step{Number: 1, Status: StatusInProgress, Outputs: []Output{{Kind: OutputMessage, Executor: "w", Text: "first"}}})
	st = c0.Next
	l := Live{}
	next := st.NextSeq
	for _, ev := range []LiveEvent{
		{Kind: LiveToolCall, CallID: "c1", Name: "f", Arguments: "{}"},
		{Kind: LiveTextDelta, Text: "par"},
	} {
		ev.Step, ev.Executor, ev.Stream = 2, "w", "w#1"
		fs, nl := liveEv(t, st, next, l, ev)
		l, next = nl, fs[len(fs)-1].Seq+1
	}
	st.NextSeq = next
	c, err := ProjectEnd(st, l, StatusCancelled, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	// The tool call never got its result: it ends incomplete, no output.
	want(t, c.Frames, `
		12 output_item.done [1] mcp_t_1 incomplete tool f({})
		13 output_text.done [2] msg_t_2 "par"
		14 content_part.done [2]
		15 output_item.done [2] msg_t_2 incomplete "par"
		16 cancelled cancelled output=3`)
	r := snapshot(t, c)
	if r.Output[1].Type != ItemToolCall || r.Output[1].Output != nil || r.Output[1].Status != ItemIncomplete ||
		r.Output[2].Status != ItemIncomplete || c.Next.Step != 2 || !terminal(c) {
		t.Fatalf("snapshot %s next %+v", c.Snapshot, c.Next)
	}
}

// A failure with no step behind it, before anything was published:
// response.in_progress then response.failed with the error; live items of
// another step than the interrupted one are not closed.
func TestProjectEnd_FailBeforeAnyEvent(t *testing.T) {
	st := created(t)
	_, stale := liveEv(t, st, 1, Live{}, LiveEvent{Step: 7, Executor: "w", Stream: "w#1", Kind: LiveTextDelta, Text: "x"})
	c, err := ProjectEnd(st, stale, StatusFailed, &Error{Code: "server_error", Message: "storage failed"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	want(t, c.Frames, `
		1 in_progress in_progress output=0
		2 failed failed output=0`)
	if c.Next.Step != 1 || string(c.Error) == "" {
		t.Fatalf("next %+v error %s", c.Next, c.Error)
	}
}

// RestateLive: a reset carrying the last committed state, in progress,
// then the live items published again as they stand: the closed message
// and tool call whole, the open message with its text so far. The items
// keep their ids and indexes, and the Live after it goes on from them. A
// zero Live gives the reset alone.
func TestRestateLive(t *testing.T) {
	st := created(t)
	c := step(t, st, Live{}, &Step{Number: 1, Status: StatusInProgress, Outputs: []Output{{Kind: OutputMessage, Executor: "w", Text: "kept"}}})
	st = c.Next
	l := Live{}
	next := st.NextSeq
	for _, ev := range []LiveEvent{
		{Executor: "a", Stream: "a#1", Kind: LiveTextDelta, Text: "A"},
		{Executor: "a", Stream: "a#1", Kind: LiveToolCall, CallID: "c1", Name: "f", Arguments: "{}"},
		{Executor: "a", Stream: "a#1", Kind: LiveToolResult, CallID: "c1", Text: "ok"},
		{Executor: "a", Stream: "a#1", Kind: LiveTextDelta, Text: "B"},
		{Executor: "a", Stream: "a#1", Kind: LiveTextDelta, Text: "C"},
	} {
		ev.Step = 2
		fs, nl := liveEv(t, st, next, l, ev)
		l, next = nl, fs[len(fs)-1].Seq+1
	}
	fs, l2, err := RestateLive(st, 42, l)
	if err != nil {
		t.Fatal(err)
	}
	want(t, fs, `
		42 in_progress in_progress output=1
		43 output_item.added [1] msg_t_1 in_progress
		44 content_part.added [1]
		45 output_text.delta [1] msg_t_1 "A"
		46 output_text.done [1] msg_t_1 "A"
		47 content_part.done [1]
		48 output_item.done [1] msg_t_1 completed "A"
		49 output_item.added [2] mcp_t_2 in_progress tool f({})
		50 output_item.done [2] mcp_t_2 completed tool f({}) -> "ok"
		51 output_item.added [3] msg_t_3 in_progress
		52 content_part.added [3]
		53 output_text.delta [3] msg_t_3 "BC"`)
	fs, _ = liveEv(t, st, 54, l2, LiveEvent{Step: 2, Executor: "a", Stream: "a#1", Kind: LiveTextDelta, Text: "D"})
	want(t, fs, `54 output_text.delta [3] msg_t_3 "D"`)
	fs, _, err = RestateLive(st, 7, Live{})
	if err != nil {
		t.Fatal(err)
	}
	want(t, fs, `7 in_progress in_progress output=1`)
}

// The cancelled view changes the status and nothing else.
func TestCancelledSnapshot(t *testing.T) {
	st := created(t)
	c := step(t, st, Live{}, &Step{Number: 1, Status: StatusInProgress, Outputs: []Output{{Kind: OutputMessage, Executor: "w", Text: "x"}}})
	data, err := CancelledSnapshot(c.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	var r Response
	if err := json.Unmarshal(data, &r); err != nil || r.Status != StatusCancelled || len(r.Output) != 1 || r.ID != "resp_t" {
		t.Fatalf("view %s (%v)", data, err)
	}
	if _, err := CancelledSnapshot([]byte("{")); err == nil {
		t.Fatal("a corrupt snapshot was accepted")
	}
}

// An output without a kind is the caller's bug: an error, not a frame.
func TestProjectStep_OutputWithoutKind(t *testing.T) {
	if _, err := ProjectStep(created(t), Live{}, &Step{Number: 1, Status: StatusInProgress, Outputs: []Output{{Text: "?"}}}); err == nil {
		t.Fatal("no error")
	}
}

// BuildRequest writes what the one reader reads back as the same items.
func TestBuildRequest_RoundTrip(t *testing.T) {
	in := []InputItem{{Type: InputMessage, Role: "user", Text: "hi"}, {Type: InputMessage, Text: "no role"},
		{Type: InputFunctionCallOutput, CallID: "call_1", Output: `{"ok":true}`}}
	got, err := ReadInput(BuildRequest(&RequestParams{Model: "m", Input: in, PreviousResponseID: "resp_p"}))
	if err != nil {
		t.Fatal(err)
	}
	in[1].Role = "user"
	if len(got) != len(in) {
		t.Fatalf("read %+v", got)
	}
	for i := range in {
		if !reflect.DeepEqual(got[i], in[i]) {
			t.Fatalf("item %d: %+v, want %+v", i, got[i], in[i])
		}
	}
	if _, err := ReadInput(BuildRequest(&RequestParams{Model: "m", Input: []InputItem{{Type: "bogus"}}})); err == nil {
		t.Fatal("an unknown item type was read back")
	}
}

// A reset keeps other streams' tool calls as they stand: a finished one
// whole with its output, one still running opened again without output.
func TestProjectLive_ResetKeepsToolCalls(t *testing.T) {
	st := created(t)
	l := Live{}
	next := st.NextSeq
	var all []Frame
	for _, ev := range []LiveEvent{
		{Executor: "a", Stream: "a#1", Kind: LiveToolCall, CallID: "c1", Name: "f", Arguments: "{}"},
		{Executor: "a", Stream: "a#1", Kind: LiveToolResult, CallID: "c1", Text: "done"},
		{Executor: "b", Stream: "b#1", Kind: LiveToolCall, CallID: "c2", Name: "g", Arguments: "{}"},
		{Executor: "c", Stream: "c#1", Kind: LiveTextDelta, Text: "x"},
		{Executor: "c", Stream: "c#1", Kind: LiveDiscard},
	} {
		ev.Step = 1
		fs, nl := liveEv(t, st, next, l, ev)
		all, l = append(all, fs...), nl
		next = fs[len(fs)-1].Seq + 1
	}
	want(t, all[len(all)-4:], `
		8 in_progress in_progress output=0
		9 output_item.added [0] mcp_t_0 in_progress tool f({})
		10 output_item.done [0] mcp_t_0 completed tool f({}) -> "done"
		11 output_item.added [1] mcp_t_1 in_progress tool g({})`)
}

// A step writes the snapshot exactly when the Response reads differently:
// a new item, a status change, incomplete details, the terminal fields.
func TestProjectStep_SnapshotOnlyWhenChanged(t *testing.T) {
	c, err := Create(&NewResponseParams{ID: "resp_t", Model: "m", Status: StatusQueued, CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	st := c.Next
	for _, tc := range []struct {
		name  string
		s     Step
		write bool
	}{
		{"queued to in progress", Step{Status: StatusInProgress}, true},
		{"silent", Step{Status: StatusInProgress, Usage: Usage{TotalTokens: 3}}, false},
		{"new item", Step{Status: StatusInProgress, Outputs: []Output{{Kind: OutputMessage, Executor: "w", Text: "x"}}}, true},
		{"silent again", Step{Status: StatusInProgress}, false},
		{"cut short", Step{Status: StatusInProgress, Incomplete: &Incomplete{Executor: "w", Reason: "max_output_tokens"}}, true},
		{"terminal", Step{Status: StatusCompleted}, true},
	} {
		tc.s.Number = st.Step + 1
		c := step(t, st, Live{}, &tc.s)
		if (c.Snapshot != nil) != tc.write {
			t.Fatalf("%s: snapshot written %v, want %v", tc.name, c.Snapshot != nil, tc.write)
		}
		st = c.Next
	}
}

// terminal reports whether c ends the response.
func terminal(c Commit) bool { return TerminalEventType(c.Next.Response.Status) != "" }
