package protocol

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A recovered superstep's live events are reconciled with what its log
// holds item by item (LiveFromLog): executors running at once interleave
// differently on every run, and an executor whose completion is replayed
// from the journal publishes nothing live.

// script is what one executor's stream publishes in a superstep.
func script(stream string, parts ...string) []LiveEvent {
	exec, _, _ := strings.Cut(stream, "#")
	var evs []LiveEvent
	for _, p := range parts {
		ev := LiveEvent{Step: 1, Executor: exec, Stream: stream}
		switch {
		case strings.HasPrefix(p, "call:"):
			ev.Kind, ev.CallID, ev.Name, ev.Arguments = LiveToolCall, stream+p, "calc", p[5:]
		case strings.HasPrefix(p, "result:"):
			prev := evs[len(evs)-1]
			ev.Kind, ev.CallID, ev.Text = LiveToolResult, prev.CallID, p[7:]
		default:
			ev.Kind, ev.Text = LiveTextDelta, p
		}
		evs = append(evs, ev)
	}
	return evs
}

// orchestra is four agents' scripts: text, a tool call and its result,
// more text. With same, the agents write the same text and make the same
// calls (as the local model server's replies do); otherwise each agent's
// messages begin with its name.
func orchestra(same bool) [][]LiveEvent {
	var ss [][]LiveEvent
	for _, a := range []string{"analyst", "planner", "critic", "scribe"} {
		name := a + ": "
		if same {
			name = ""
		}
		ss = append(ss, script(a+"#1", name+"let ", "me ", "compute. ", "call:{\"a\":6}", "result:42",
			name+"The ", "answer ", "is ", "42."))
	}
	return ss
}

// interleave merges scripts in a random order that keeps each one's order.
func interleave(r *rand.Rand, ss [][]LiveEvent) []LiveEvent {
	pos := make([]int, len(ss))
	var out []LiveEvent
	for {
		var open []int
		for i, s := range ss {
			if pos[i] < len(s) {
				open = append(open, i)
			}
		}
		if len(open) == 0 {
			return out
		}
		i := open[r.IntN(len(open))]
		out = append(out, ss[i][pos[i]])
		pos[i]++
	}
}

// publish projects evs on top of st from seq next and live l.
func publish(t *testing.T, st State, next int64, l Live, evs []LiveEvent) ([]Frame, Live) {
	t.Helper()
	var all []Frame
	for _, ev := range evs {
		fs, nl, err := ProjectLive(st, next, l, &ev)
		if err != nil {
			t.Fatal(err)
		}
		l = nl
		if len(fs) > 0 {
			all, next = append(all, fs...), fs[len(fs)-1].Seq+1
		}
	}
	return all, l
}

// seen returns the items a client that read frames sees: "text" or
// "tool name(args) -> output", in output order.
func seen(t *testing.T, st State, frames []Frame) []string {
	t.Helper()
	l, err := LiveFromLog(st, frames)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, it := range l.items {
		s := it.text.String()
		if it.tool {
			s = fmt.Sprintf("tool %s(%s)", it.item.Name, it.item.Arguments)
			if it.item.Output != nil {
				s += " -> " + *it.item.Output
			}
		}
		if it.done {
			s += " [done]"
		}
		out = append(out, s)
	}
	return out
}

// resets counts the response.in_progress frames past seq 1 (resets).
func resets(frames []Frame) int {
	n := 0
	for _, f := range frames {
		if f.Type == EventResponseInProgress && f.Seq > 1 {
			n++
		}
	}
	return n
}

// The live state read back from the log is the one ProjectLive built:
// same items, ids, indexes, texts, closes and tool outputs.
func TestLiveFromLog_ReadsWhatProjectLiveWrote(t *testing.T) {
	st := created(t)
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		evs := interleave(r, orchestra(false))
		// A retry of one open message and a discard, too: resets in the log.
		evs = slices.Insert(evs, r.IntN(len(evs)), LiveEvent{Step: 1, Executor: "critic", Stream: "critic#1", Kind: LiveRetry})
		frames, l := publish(t, st, st.NextSeq, Live{}, evs)
		got, err := LiveFromLog(st, frames)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.items) != len(l.items) || got.step != 1 {
			t.Fatalf("read back %d items at step %d, want %d", len(got.items), got.step, len(l.items))
		}
		for i, w := range l.items {
			g := got.items[i]
			wi, gi := w.item, g.item
			wi.CallID = "" // not on the wire
			wo, gO := "", ""
			if wi.Output != nil {
				wo = *wi.Output
			}
			if gi.Output != nil {
				gO = *gi.Output
			}
			wi.Output, gi.Output = nil, nil
			if g.id != w.id || g.index != w.index || g.text.String() != w.text.String() || g.tool != w.tool ||
				g.done != w.done || fmt.Sprint(gi) != fmt.Sprint(wi) || wo != gO {
				t.Fatalf("item %d read back as %+v, want %+v", i, g, w)
			}
			if g.stream != "" || g.pend != g.text.n || g.pendDone != g.done {
				t.Fatalf("item %d read back claimed or reproduced: %+v", i, g)
			}
		}
	}
}

// Four agents at once, killed at any point: the re-run publishes the same
// events per agent in another interleaving. Nothing the log holds is
// appended again, no reset is made, what follows the log continues each
// item, and the commit closes every item without a reset.
func TestProjectLive_RecoveredInterleavingNoReset(t *testing.T) {
	t.Run("own texts", func(t *testing.T) { recoveredInterleaving(t, orchestra(false)) })
	t.Run("same texts", func(t *testing.T) { recoveredInterleaving(t, orchestra(true)) })
}

func recoveredInterleaving(t *testing.T, ss [][]LiveEvent) {
	st := created(t)
	r := rand.New(rand.NewPCG(3, 4))
	whole, _ := publish(t, st, st.NextSeq, Live{}, interleave(r, ss))
	want := seen(t, st, whole)
	for trial := range 200 {
		first := interleave(r, ss)
		cut := r.IntN(len(first) + 1) // the kill: events after it were not appended
		logged, _ := publish(t, st, st.NextSeq, Live{}, first[:cut])
		l, err := LiveFromLog(st, logged)
		if err != nil {
			t.Fatal(err)
		}
		next := st.NextSeq + int64(len(logged))
		again, l := publish(t, st, next, l, interleave(r, ss))
		if n := resets(again); n != 0 {
			t.Fatalf("trial %d (cut %d): %d resets:\nlogged:\n%s\nagain:\n%s", trial, cut, n, render(logged), render(again))
		}
		if l.Owes() {
			t.Fatalf("trial %d (cut %d): the re-run reproduced all, yet the live state owes: %+v\nlogged:\n%s\nagain:\n%s", trial, cut, l.items, render(logged), render(again))
		}
		got := seen(t, st, append(slices.Clone(logged), again...))
		slices.Sort(got)
		w := slices.Clone(want)
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Fatalf("trial %d (cut %d): a client sees\n%q\nwant (any order)\n%q", trial, cut, got, w)
		}
		// Appended frames are new text only: the log's frames are not repeated.
		for _, f := range again {
			if f.Type == EventOutputItemAdded || f.Type == EventOutputTextDelta {
				for _, g := range logged {
					if g.Type == f.Type && string(g.Payload[strings.Index(string(g.Payload), `"output_index"`):]) ==
						string(f.Payload[strings.Index(string(f.Payload), `"output_index"`):]) && f.Type == EventOutputItemAdded {
						t.Fatalf("trial %d: item added again: %s", trial, f.Payload)
					}
				}
			}
		}
	}
}

// Only the call in flight is taken back: its message is cut to where the
// re-made call agrees with the log; every other agent's items are
// published again whole (the client keeps all it saw of them), including
// what their streams have not reproduced yet.
func TestProjectLive_RecoveredDivergenceTakesBackOnlyTheCallInFlight(t *testing.T) {
	st := created(t)
	a := script("a#1", "Alpha ", "says ", "one.")
	b := script("b#1", "Beta ", "says ", "two.")
	logged, _ := publish(t, st, st.NextSeq, Live{}, []LiveEvent{a[0], b[0], a[1], b[1], a[2]})
	l, err := LiveFromLog(st, logged)
	if err != nil {
		t.Fatal(err)
	}
	// b's call was in flight: made again, it streams "Beta sings" instead.
	b2 := script("b#1", "Beta ", "sings ", "three.")
	again, _ := publish(t, st, st.NextSeq+int64(len(logged)), l, []LiveEvent{b2[0], a[0], b2[1], a[1], a[2], b2[2]})
	want(t, again, `
		11 in_progress in_progress output=0
		12 output_item.added [0] msg_t_0 in_progress
		13 content_part.added [0]
		14 output_text.delta [0] msg_t_0 "Alpha says one."
		15 output_item.added [1] msg_t_1 in_progress
		16 content_part.added [1]
		17 output_text.delta [1] msg_t_1 "Beta s"
		18 output_text.delta [1] msg_t_1 "ings "
		19 output_text.delta [1] msg_t_1 "three."`)
}

// An executor whose completion was replayed from the journal publishes
// nothing live: its items stay as the log shows them and the commit
// closes them with its outputs, without a reset, when they line up.
func TestProjectStep_UnclaimedLoggedItemsLineUp(t *testing.T) {
	st := created(t)
	a := script("a#1", "Alpha ", "done.", "call:{}", "result:ok")
	b := script("b#1", "Beta ", "goes ")
	logged, _ := publish(t, st, st.NextSeq, Live{}, []LiveEvent{a[0], b[0], a[1], a[2], a[3]})
	l, err := LiveFromLog(st, logged)
	if err != nil {
		t.Fatal(err)
	}
	next := st.NextSeq + int64(len(logged))
	// Only b runs again, and streams on.
	again, l := publish(t, st, next, l, append(script("b#1", "Beta ", "goes "), script("b#1", "on.")...))
	want(t, again, `
		14 output_text.delta [1] msg_t_1 "goes "
		15 output_text.delta [1] msg_t_1 "on."`)
	st.NextSeq = next + int64(len(again))
	c := step(t, st, l, &Step{Number: 1, Status: StatusCompleted, Outputs: []Output{
		{Kind: OutputMessage, Executor: "a", Text: "Alpha done."},
		{Kind: OutputMessage, Executor: "b", Text: "Beta goes on."},
		{Kind: OutputToolCall, Executor: "a", CallID: "c9", Name: "calc", Arguments: "{}", Text: "ok"},
	}})
	want(t, c.Frames, `
		16 output_text.done [1] msg_t_1 "Beta goes on."
		17 content_part.done [1]
		18 output_item.done [1] msg_t_1 completed "Beta goes on."
		19 completed completed output=3`)
	if got := c.Next.Response.Output[2].CallID; got != "c9" {
		t.Fatalf("the unclaimed tool call closes with call id %q", got)
	}
	// Outputs that do not line up with what the log shows void it.
	c = step(t, st, l, &Step{Number: 1, Status: StatusCompleted, Outputs: []Output{
		{Kind: OutputMessage, Executor: "a", Text: "Alpha changed its mind."},
		{Kind: OutputMessage, Executor: "b", Text: "Beta goes on."},
	}})
	if resets(c.Frames) != 1 {
		t.Fatalf("outputs that do not line up: %d resets:\n%s", resets(c.Frames), render(c.Frames))
	}
}

// A delta past a message the log closed, a shorter message before a tool
// call, and another tool output than the log's each take back only what
// differs.
func TestProjectLive_RecoveredCloseAndToolOutputDiffer(t *testing.T) {
	st := created(t)
	a := script("a#1", "Hello ", "world", "call:{}", "result:1")
	logged, _ := publish(t, st, st.NextSeq, Live{}, a)
	l, err := LiveFromLog(st, logged)
	if err != nil {
		t.Fatal(err)
	}
	next := st.NextSeq + int64(len(logged))
	// The re-run's message stops short of the log's before its tool call,
	// and the tool returns 2.
	again, _ := publish(t, st, next, l, script("a#1", "Hello ", "call:{}", "result:2"))
	want(t, again, `
		11 in_progress in_progress output=0
		12 output_item.added [0] msg_t_0 in_progress
		13 content_part.added [0]
		14 output_text.delta [0] msg_t_0 "Hello "
		15 output_item.added [1] mcp_t_1 in_progress tool calc({})
		16 output_item.done [1] mcp_t_1 completed tool calc({}) -> "1"
		17 output_text.done [0] msg_t_0 "Hello "
		18 content_part.done [0]
		19 output_item.done [0] msg_t_0 completed "Hello "
		20 in_progress in_progress output=0
		21 output_item.added [0] msg_t_0 in_progress
		22 content_part.added [0]
		23 output_text.delta [0] msg_t_0 "Hello "
		24 output_text.done [0] msg_t_0 "Hello "
		25 content_part.done [0]
		26 output_item.done [0] msg_t_0 completed "Hello "
		27 output_item.added [1] mcp_t_1 in_progress tool calc({})
		28 output_item.done [1] mcp_t_1 completed tool calc({}) -> "2"`)
}

// A log that cannot be read back is withdrawn whole, once, before the
// re-run's first frame.
func TestLiveFromLog_Unreadable(t *testing.T) {
	st := created(t)
	l, err := LiveFromLog(st, []Frame{{Type: EventOutputTextDelta, Seq: 1, Payload: []byte(`{"output_index":0,"delta":"x"}`)}})
	if err == nil {
		t.Fatal("a delta of no item read back")
	}
	fs, _ := liveEv(t, st, 2, l, LiveEvent{Step: 1, Executor: "a", Stream: "a#1", Kind: LiveTextDelta, Text: "y"})
	want(t, fs, `
		2 in_progress in_progress output=0
		3 output_item.added [0] msg_t_0 in_progress
		4 content_part.added [0]
		5 output_text.delta [0] msg_t_0 "y"`)
	c := step(t, State{Response: st.Response, NextSeq: 2}, l, &Step{Number: 1, Status: StatusCompleted})
	if resets(c.Frames) != 1 {
		t.Fatalf("commit on an unreadable log: %s", render(c.Frames))
	}
}

// A tool call the log closes without an output (a damaged or foreign
// log) is unreadable, not a panic when the commit lines outputs up.
func TestLiveFromLog_ToolCallClosedWithoutOutput(t *testing.T) {
	st := created(t)
	logged := []Frame{
		{Type: EventResponseInProgress, Seq: 1, Payload: []byte(`{"response":{}}`)},
		{Type: EventOutputItemAdded, Seq: 2, Payload: []byte(`{"output_index":0,"item":{"type":"mcp_call","id":"mcp_1","name":"f","arguments":"{}"}}`)},
		{Type: EventOutputItemDone, Seq: 3, Payload: []byte(`{"output_index":0,"item":{"type":"mcp_call","id":"mcp_1","name":"f","arguments":"{}","output":null}}`)},
	}
	l, err := LiveFromLog(st, logged)
	if err == nil {
		t.Fatal("a tool call closed without its output read back")
	}
	c := step(t, State{Response: st.Response, NextSeq: 4}, l, &Step{Number: 1, Status: StatusCompleted,
		Outputs: []Output{{Kind: OutputToolCall, Executor: "a", Name: "f", Arguments: "{}", Text: "x"}}})
	if resets(c.Frames) != 1 {
		t.Fatalf("commit on an unreadable log: %s", render(c.Frames))
	}
}

// A re-run that streamed less than the log shows and yields what it
// streamed: one reset in the commit keeps what it streamed again, and
// only the rest is taken back.
func TestProjectStep_RecoveredFewerKeepsWhatWasStreamedAgain(t *testing.T) {
	st := created(t)
	logged, _ := publish(t, st, st.NextSeq, Live{}, script("w#1", "a ", "b ", "c"))
	l, err := LiveFromLog(st, logged)
	if err != nil {
		t.Fatal(err)
	}
	next := st.NextSeq + int64(len(logged))
	again, l := publish(t, st, next, l, script("w#1", "a "))
	if len(again) != 0 {
		t.Fatalf("reproduced text appended: %s", render(again))
	}
	st.NextSeq = next
	c := step(t, st, l, &Step{Number: 1, Status: StatusCompleted, Outputs: []Output{{Kind: OutputMessage, Executor: "w", Text: "a "}}})
	want(t, c.Frames, `
		7 in_progress in_progress output=0
		8 output_item.added [0] msg_t_0 in_progress
		9 content_part.added [0]
		10 output_text.delta [0] msg_t_0 "a "
		11 output_text.done [0] msg_t_0 "a "
		12 content_part.done [0]
		13 output_item.done [0] msg_t_0 completed "a "
		14 completed completed output=1`)
}

// Random streams over a tiny alphabet (texts that begin alike, calls
// alike), killed anywhere, re-run with other interleavings and, in some
// streams, other text: projection never fails, what it appends is a log a
// client can follow (LiveFromLog reads it), and after the re-run every
// message a stream wrote to the end reads as that stream's text.
func TestProjectLive_RecoveredRandom(t *testing.T) {
	st := created(t)
	r := rand.New(rand.NewPCG(7, 8))
	words := []string{"a", "b", "ab", " "}
	gen := func(stream string) []LiveEvent {
		var parts []string
		for k := range 2 + r.IntN(6) {
			switch {
			case k > 0 && r.IntN(4) == 0:
				parts = append(parts, "call:{}", "result:"+words[r.IntN(2)])
			default:
				parts = append(parts, words[r.IntN(len(words))])
			}
		}
		return script(stream, parts...)
	}
	for trial := range 3000 {
		n := 1 + r.IntN(4)
		first, again := make([][]LiveEvent, n), make([][]LiveEvent, n)
		for i := range n {
			first[i] = gen(fmt.Sprintf("s%d#1", i))
			again[i] = first[i]
			if r.IntN(3) == 0 { // the call in flight answers otherwise from some point
				cut := r.IntN(len(first[i]) + 1)
				again[i] = append(slices.Clone(first[i][:cut]), gen(fmt.Sprintf("s%d#1", i))...)
			}
		}
		evs := interleave(r, first)
		logged, _ := publish(t, st, st.NextSeq, Live{}, evs[:r.IntN(len(evs)+1)])
		l, err := LiveFromLog(st, logged)
		if err != nil {
			t.Fatal(err)
		}
		next := st.NextSeq + int64(len(logged))
		var out []Frame
		for _, ev := range interleave(r, again) {
			fs, nl, err := ProjectLive(st, next, l, &ev)
			if err != nil {
				t.Fatalf("trial %d: %v", trial, err)
			}
			l = nl
			if len(fs) > 0 {
				out, next = append(out, fs...), fs[len(fs)-1].Seq+1
			}
		}
		if _, err := LiveFromLog(st, append(slices.Clone(logged), out...)); err != nil {
			t.Fatalf("trial %d: the log does not read back: %v\n%s\n--\n%s", trial, err, render(logged), render(out))
		}
		for _, it := range l.items {
			if it.stream == "" || it.tool || it.pend > 0 {
				continue
			}
			i, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(it.stream, "s"), "#1"))
			if !strings.Contains(textsOf(again[i]), "|"+it.text.String()+"|") {
				t.Fatalf("trial %d: %s's message reads %q, not one it wrote (%q)", trial, it.stream, it.text.String(), textsOf(again[i]))
			}
		}
	}
}

// textsOf returns the messages a script writes, each between bars.
func textsOf(evs []LiveEvent) string {
	var b strings.Builder
	b.WriteString("|")
	open := false
	for _, ev := range evs {
		switch ev.Kind {
		case LiveTextDelta:
			b.WriteString(ev.Text)
			open = true
		case LiveToolCall:
			if open {
				b.WriteString("|")
				open = false
			}
		}
	}
	if open {
		b.WriteString("|")
	}
	return b.String()
}
