package protocol

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestLiveText_ValueSemantics checks that Live values sharing a message's
// buffer never see each other's text: a holder behind the buffer's end that
// appends other bytes gets its own buffer, one that appends the same bytes
// shares them, and nothing an older value reads ever changes.
func TestLiveText_ValueSemantics(t *testing.T) {
	var zero liveText
	a := zero.append("hello")
	b := a.append(" world") // at the end: in place
	c := a.append(" there") // behind: other bytes, so a copy
	d := a.append(" world") // behind: the same bytes, shared
	e := b.append("!")
	f := d.append("?") // d is behind e's end now: other bytes, a copy
	for _, tc := range []struct {
		got  liveText
		want string
	}{{zero, ""}, {a, "hello"}, {b, "hello world"}, {c, "hello there"}, {d, "hello world"}, {e, "hello world!"}, {f, "hello world?"}} {
		if tc.got.String() != tc.want || !tc.got.equal(tc.want) || tc.got.equal(tc.want+"x") {
			t.Errorf("text %q, want %q", tc.got.String(), tc.want)
		}
	}
	if d.buf != b.buf {
		t.Error("the same delta from a holder behind the end copied the buffer instead of sharing it")
	}
	if c.buf == b.buf || f.buf == e.buf {
		t.Error("a different delta from a holder behind the end wrote into the shared buffer")
	}
}

// TestProjectLive_OlderLiveKeepsItsText projects two different deltas on
// top of one Live (as the host does when it takes queued frames back and
// the superstep goes on) and closes each branch's message with a tool call:
// each message closes with its own text.
func TestProjectLive_OlderLiveKeepsItsText(t *testing.T) {
	c, err := Create(&NewResponseParams{ID: "resp_lt", Model: "m", Status: StatusInProgress, CreatedAt: time.Unix(1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	st := c.Next
	project := func(live Live, next int64, ev *LiveEvent) ([]Frame, Live, int64) {
		t.Helper()
		ev.Step, ev.Executor, ev.Stream = 1, "w", "w#1"
		fs, l, err := ProjectLive(st, next, live, ev)
		if err != nil {
			t.Fatal(err)
		}
		return fs, l, fs[len(fs)-1].Seq + 1
	}
	_, base, next := project(Live{}, st.NextSeq, &LiveEvent{Kind: LiveTextDelta, Text: "abc"})
	_, long, nextLong := project(base, next, &LiveEvent{Kind: LiveTextDelta, Text: strings.Repeat("x", 100)})
	_, other, nextOther := project(base, next, &LiveEvent{Kind: LiveTextDelta, Text: "def"})
	for _, tc := range []struct {
		live Live
		next int64
		text string
	}{{long, nextLong, "abc" + strings.Repeat("x", 100)}, {other, nextOther, "abcdef"}, {base, next, "abc"}} {
		fs, _, _ := project(tc.live, tc.next, &LiveEvent{Kind: LiveToolCall, CallID: "call_1", Name: "f", Arguments: "{}"})
		closed := ""
		for _, f := range fs {
			var ev struct{ Type, Text string }
			if err := json.Unmarshal(f.Payload, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Type == "response.output_text.done" {
				closed = ev.Text
			}
		}
		if closed != tc.text {
			t.Errorf("the message closed with text %q, want %q", closed, tc.text)
		}
	}
}
