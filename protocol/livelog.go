package protocol

import (
	"encoding/json"
	"fmt"
)

// LiveFromLog returns the Live a client that followed the log sees after
// frames: the live events the log holds past st, the last commit, which a
// superstep (st.Step+1) appended before it was interrupted by a crash or a
// lost lease. The superstep re-runs on top of it, and ProjectLive
// reconciles what the re-run publishes with what clients saw, item by item
// rather than frame by frame, since executors running at once interleave
// their events differently on each run:
//
//   - A stream's new message or tool call claims the first item of the log
//     no stream claimed yet that comes after the stream's own items and
//     holds what it makes (a message whose text begins with the delta, or
//     that the delta continues; a tool call of the same name and
//     arguments: the wire's mcp_call has no call id), and writes nothing.
//   - A delta that is the claimed message's next text in the log, a close
//     or a tool output the log holds, are reproduced: nothing is appended.
//     A delta past the end of an open message is appended as usual: the
//     text goes on from where clients were.
//   - A delta that differs from the log's text (the call that was in
//     flight, made again, streamed something else) takes that message back
//     to where they agree: a reset, and every item published again as it
//     stands (other items keep all the log shows of them), then the delta.
//   - An item no stream claims (an executor whose completion was replayed
//     from the journal publishes nothing live) stays as the log shows it;
//     the commit closes it like any live item when its content lines up
//     with the step's outputs, and voids it by a reset otherwise.
//
// A log this function cannot read (not frames the projector makes) gives a
// Live that withdraws all of it, by a reset, before the re-run's first
// frame or the commit.
func LiveFromLog(st State, frames []Frame) (Live, error) {
	l := Live{step: st.Step + 1}
	if err := l.readLog(len(st.Response.Output), frames); err != nil {
		return Live{step: st.Step + 1, stale: true}, err
	}
	for i := range l.items {
		it := &l.items[i]
		it.pend, it.pendDone = it.text.n, it.done
	}
	return l, nil
}

// readLog applies frames to l, whose items start at output index base.
func (l *Live) readLog(base int, frames []Frame) error {
	item := func(f Frame, index int) (*liveItem, error) {
		i := index - base
		if i < 0 || i >= len(l.items) {
			return nil, fmt.Errorf("protocol: live event %d (%s) names output %d, not live", f.Seq, f.Type, index)
		}
		return &l.items[i], nil
	}
	closedMsg := 0 // 1 + the index of the message the previous frame closed
	for _, f := range frames {
		prevClosed := closedMsg
		closedMsg = 0
		switch f.Type {
		case EventResponseInProgress: // the first live event, or a reset
			l.items = nil
		case EventOutputItemAdded, EventOutputItemDone:
			var ev OutputItemEvent
			if err := json.Unmarshal(f.Bytes(), &ev); err != nil {
				return fmt.Errorf("protocol: live event %d: %w", f.Seq, err)
			}
			if f.Type == EventOutputItemAdded {
				if ev.OutputIndex != base+len(l.items) {
					return fmt.Errorf("protocol: live event %d adds output %d after %d", f.Seq, ev.OutputIndex, base+len(l.items))
				}
				it := liveItem{id: ev.Item.ID, index: ev.OutputIndex}
				switch ev.Item.Type {
				case ItemMessage:
				case ItemToolCall:
					it.tool, it.item, it.follows = true, ev.Item, prevClosed
				default:
					return fmt.Errorf("protocol: live event %d adds a %s item", f.Seq, ev.Item.Type)
				}
				l.items = append(l.items, it)
				continue
			}
			it, err := item(f, ev.OutputIndex)
			if err != nil {
				return err
			}
			if it.tool && ev.Item.Output == nil {
				// A closed tool call shows its output; the commit compares
				// with it (linesUp).
				return fmt.Errorf("protocol: live event %d closes tool call %d without its output", f.Seq, ev.OutputIndex)
			}
			it.done, it.item = true, ev.Item
			if !it.tool {
				closedMsg = ev.OutputIndex + 1
				if len(ev.Item.Content) == 1 && !it.text.equal(ev.Item.Content[0].Text) {
					it.text = liveText{}.append(ev.Item.Content[0].Text)
				}
			}
		case EventOutputTextDelta:
			var ev OutputTextEvent
			if err := json.Unmarshal(f.Bytes(), &ev); err != nil {
				return fmt.Errorf("protocol: live event %d: %w", f.Seq, err)
			}
			it, err := item(f, ev.OutputIndex)
			if err != nil {
				return err
			}
			if ev.Delta != nil {
				it.text = it.text.append(*ev.Delta)
			}
		case EventContentPartAdded, EventContentPartDone, EventOutputTextDone:
			// Carried by the item's own events.
		default:
			return fmt.Errorf("protocol: live event %d is a %s", f.Seq, f.Type)
		}
	}
	return nil
}

// Owes reports whether the Live holds items read back from the log
// (LiveFromLog) that the re-run has not reproduced in full yet.
func (l Live) Owes() bool {
	for i := range l.items {
		if l.items[i].owed() {
			return true
		}
	}
	return false
}
