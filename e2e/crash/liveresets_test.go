package crash

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/superstep/superstep/internal/testkit/verifytest"
	"github.com/superstep/superstep/verify"
)

// What kills cost a live client: the reset response.in_progress events
// they caused and what those took back of the stream a client had seen.
// TestCrash_Journal_* and TestCrash_Live_* log it in a fixed format, one
// line in all and one per config,
//
//	live-resets: kills=N resets=R voiding=V chars_taken_back=C items_taken_back=I primary_chars_taken_back=P commit_resets=K commit_chars=M responses=X resets_per_kill=R/N chars_per_kill=C/N
//	live-resets[CONFIG]: resets=R voiding=V chars_taken_back=C items_taken_back=I primary_chars_taken_back=P commit_resets=K commit_chars=M responses=X
//
// so that runs of one seed on different versions of the server can be set
// side by side (grep live-resets). Measured on each response's durable
// log, which is what a client following the stream from its start sees:
//
//   - resets: response.in_progress events after the first appended live
//     (store.Event.Step -1), outside a commit: what recovery appends to
//     void a live superstep a kill interrupted (or an agent's retry of a
//     model call, which the model servers here do not cause);
//   - voiding: those that came while an output item was open (added, not
//     done), i.e. while its text was streaming;
//   - chars_taken_back: characters (runes) of message text a client had
//     rendered before a reset that the reset did not keep: for each item
//     rendered, its length beyond the longest common prefix with the item
//     at the same index of the reset's output (all of it when the reset's
//     output is shorter);
//   - items_taken_back: rendered output items (messages, tool calls) the
//     reset's output does not have;
//   - primary_chars_taken_back: chars_taken_back over what the creating
//     clients actually received (across their reconnections), a check of
//     the log figure from the other side;
//   - commit_resets, commit_chars: response.in_progress events written by
//     a commit and the characters they took back. Crash-free runs have
//     them too: demo.orchestra's agents stream replies that are
//     intermediate results, withdrawn when their superstep commits.
//
// Nothing here is asserted: how many resets a kill costs is what the
// journal changes.

// resetCost is what resets took back, summed.
type resetCost struct {
	resetCounts
	primaryChars, responses int
}

// resetCounts are what resetCosts counts in one stream.
type resetCounts struct {
	resets, voiding, chars, items int
	commitResets, commitChars     int
}

func (c *resetCost) add(d resetCost) {
	c.resets += d.resets
	c.voiding += d.voiding
	c.chars += d.chars
	c.items += d.items
	c.commitResets += d.commitResets
	c.commitChars += d.commitChars
	c.primaryChars += d.primaryChars
	c.responses += d.responses
}

// renderedItem is one output item as a client renders it.
type renderedItem struct {
	typ, text string
}

// resetEvent is the part of a lifecycle or output event resetCosts reads.
type resetEvent struct {
	OutputIndex int    `json:"output_index"`
	Delta       string `json:"delta"`
	Item        *struct {
		Type string `json:"type"`
	} `json:"item"`
	Response *struct {
		Output []struct {
			Type string `json:"type"`
		} `json:"output"`
	} `json:"response"`
}

// streamEvent is one event of a stream: its type and payload, and the
// step of the commit that wrote it (-1: appended live).
type streamEvent struct {
	typ  string
	data []byte
	step int64
}

// resetCosts renders a stream as a client would (see render) and counts
// its resets, those that voided open items, and the characters of message
// text and output items they took back; and the in_progress events of
// commits and the characters they took back. Events it cannot read are
// skipped.
func resetCosts(events []streamEvent) (n resetCounts) {
	var rendered []renderedItem
	open := map[int]bool{}
	seen := false
	for _, e := range events {
		var ev resetEvent
		if json.Unmarshal(e.data, &ev) != nil {
			continue
		}
		switch e.typ {
		case "response.created", "response.in_progress":
			out, err := verify.OutcomeOf(e.data)
			if err != nil || ev.Response == nil || len(ev.Response.Output) != len(out.Output) {
				continue
			}
			next := make([]renderedItem, len(out.Output))
			for i, text := range out.Output {
				next[i] = renderedItem{typ: ev.Response.Output[i].Type, text: text}
			}
			if e.typ == "response.in_progress" && seen {
				chars, items := takenBack(rendered, next)
				if e.step == -1 {
					n.resets++
					if len(open) > 0 {
						n.voiding++
					}
					n.chars += chars
					n.items += items
				} else {
					n.commitResets++
					n.commitChars += chars
				}
			}
			seen = seen || e.typ == "response.in_progress"
			rendered = next
			clear(open)
		case "response.output_item.added":
			if ev.Item == nil {
				continue
			}
			text, _, _ := verify.ItemOutcome(mustItem(e.data))
			for len(rendered) <= ev.OutputIndex {
				rendered = append(rendered, renderedItem{})
			}
			rendered[ev.OutputIndex] = renderedItem{typ: ev.Item.Type, text: text}
			open[ev.OutputIndex] = true
		case "response.output_text.delta":
			if ev.OutputIndex >= 0 && ev.OutputIndex < len(rendered) {
				rendered[ev.OutputIndex].text += ev.Delta
			}
		case "response.output_item.done":
			if ev.OutputIndex >= 0 && ev.OutputIndex < len(rendered) {
				if text, _, err := verify.ItemOutcome(mustItem(e.data)); err == nil {
					rendered[ev.OutputIndex].text = text
				}
			}
			delete(open, ev.OutputIndex)
		}
	}
	return n
}

// takenBack returns the characters of message text and the items of
// rendered that a reset to next takes back.
func takenBack(rendered, next []renderedItem) (chars, items int) {
	for i, it := range rendered {
		keep := 0
		if i < len(next) {
			keep = commonPrefix(it.text, next[i].text)
		} else {
			items++
		}
		if it.typ == "message" {
			chars += utf8.RuneCountInString(it.text[keep:])
		}
	}
	return chars, items
}

// mustItem returns the raw "item" of an event payload (nil when absent).
func mustItem(data []byte) []byte {
	var ev struct {
		Item json.RawMessage `json:"item"`
	}
	_ = json.Unmarshal(data, &ev)
	return ev.Item
}

// commonPrefix returns the length in bytes of the longest common prefix
// of a and b that ends on a rune boundary.
func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	for n > 0 && n < len(a) && !utf8.RuneStart(a[n]) {
		n--
	}
	return n
}

// logLiveResets logs the cost of the kills in live streams (see the top of
// this file), in all and by config.
func logLiveResets(ch *chaos, in *verify.Input) {
	byConfig := map[string]*resetCost{}
	var all resetCost
	for _, r := range in.Responses {
		events := make([]streamEvent, len(r.Log))
		steps := map[int64]int64{}
		for i, e := range r.Log {
			events[i] = streamEvent{typ: e.Type, data: e.Payload, step: e.Step}
			steps[e.Seq] = e.Step
		}
		c := resetCost{resetCounts: resetCosts(events), responses: 1}
		for _, v := range r.Clients {
			if v.StartAt != 0 || !strings.HasSuffix(v.Name, "-primary") {
				continue
			}
			events := make([]streamEvent, len(v.Events))
			for i, e := range v.Events {
				events[i] = streamEvent{typ: e.Type, data: e.Data, step: steps[e.Seq]}
			}
			c.primaryChars += resetCosts(events).chars
		}
		name := "unknown"
		if r.Record != nil {
			name = verifytest.WorkloadOf(r.Record.Request)
		}
		if byConfig[name] == nil {
			byConfig[name] = &resetCost{}
		}
		byConfig[name].add(c)
		all.add(c)
	}
	per := func(n int) float64 { return float64(n) / float64(max(ch.kills, 1)) }
	ch.t.Logf("live-resets: kills=%d resets=%d voiding=%d chars_taken_back=%d items_taken_back=%d primary_chars_taken_back=%d commit_resets=%d commit_chars=%d responses=%d resets_per_kill=%.2f chars_per_kill=%.1f",
		ch.kills, all.resets, all.voiding, all.chars, all.items, all.primaryChars, all.commitResets, all.commitChars, all.responses, per(all.resets), per(all.chars))
	for _, name := range slices.Sorted(maps.Keys(byConfig)) {
		c := byConfig[name]
		ch.t.Logf("live-resets[%s]: resets=%d voiding=%d chars_taken_back=%d items_taken_back=%d primary_chars_taken_back=%d commit_resets=%d commit_chars=%d responses=%d",
			name, c.resets, c.voiding, c.chars, c.items, c.primaryChars, c.commitResets, c.commitChars, c.responses)
	}
}
