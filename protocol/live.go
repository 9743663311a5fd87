package protocol

import "strings"

// LiveKind says what a live event carries.
type LiveKind uint8

// Live event kinds.
const (
	// LiveTextDelta is a piece of a message being streamed (Text): it
	// opens a message item for its stream, or continues the open one.
	LiveTextDelta LiveKind = iota + 1
	// LiveToolCall is a call of one of the agent's own tools (CallID,
	// Name, Arguments): it opens a tool call item (ItemToolCall) and closes
	// the message its stream was writing (the text after the call is a new
	// message).
	LiveToolCall
	// LiveToolResult is the output (Text) of the tool call CallID: it
	// closes that call's item.
	LiveToolResult
	// LiveRetry says the model call that streamed the open message of its
	// stream is retried: that message is void.
	LiveRetry
	// LiveDiscard says the attempt failed: everything it, and every
	// stream nested in it, published is void.
	LiveDiscard
)

// LiveEvent is one event an executor published while its superstep runs.
type LiveEvent struct {
	// Step is the superstep it belongs to.
	Step int64
	// Executor is the executor of the hosted workflow it came from (for
	// an event nested in sub-workflows, the outermost: its outputs are
	// that executor's).
	Executor string
	// Stream names the emitting attempt down the nesting, and is what
	// items belong to: "exec#attempt", then "/step/exec#attempt" per
	// nested level: a discard voids the
	// stream's items and those of the streams nested in it.
	Stream string
	Kind   LiveKind
	Text   string
	// CallID, Name and Arguments are a tool call's.
	CallID    string
	Name      string
	Arguments string
}

// Live is what the running superstep published live on top of a State:
// messages still open and items closed live, none of them committed yet.
// The zero Live holds nothing. A Live is a value: ProjectLive returns a new
// one and leaves its argument as it was, so a caller can keep the Live
// that matches what is durable beside the one that counts queued frames.
type Live struct {
	step  int64
	items []liveItem
}

// liveItem is an output item published live by one executor attempt, not
// yet part of the output: a message opened by text deltas (open until the
// commit, or until the attempt's next tool call closes it) or the
// function_call item of an agent's own tool call (published whole).
type liveItem struct {
	executor string
	stream   string
	id       string
	index    int
	text     liveText // a message's deltas so far
	tool     bool     // a tool call item (else a message)
	done     bool     // closed live: item is final
	item     Item     // the final item, when done; a tool call's opened item before
}

// liveText is a message's text streamed so far. Live values are copied on
// every delta (ProjectLive leaves its argument as it was), so a string
// grown by concatenation would copy the whole message per delta: quadratic
// in its length (36 MB copied for a 16 KB reply of 4,000 deltas). Instead
// the Live values of one message share an append-only buffer and each
// holds its length: bytes below any holder's length are never written
// again. A holder at the buffer's end appends in place; one behind it (the
// durable Live, or one taken back after dropped frames) shares the bytes
// when its next delta is what the buffer already holds there, and copies
// them into a buffer of its own otherwise. A Live is used by one goroutine
// at a time (the host holds its run's lock).
type liveText struct {
	buf *textBuf
	n   int
}

// textBuf is the shared buffer of liveText.
type textBuf struct{ b []byte }

// append returns t with s after it.
func (t liveText) append(s string) liveText {
	if s == "" {
		return t
	}
	switch {
	case t.buf == nil:
		t.buf = &textBuf{b: append(make([]byte, 0, max(64, 2*len(s))), s...)}
	case len(t.buf.b) == t.n:
		t.buf.b = append(t.buf.b, s...)
	case len(t.buf.b)-t.n >= len(s) && string(t.buf.b[t.n:t.n+len(s)]) == s:
		// another holder appended the same bytes already
	default:
		b := make([]byte, t.n, 2*(t.n+len(s)))
		copy(b, t.buf.b[:t.n])
		t.buf = &textBuf{b: append(b, s...)}
	}
	t.n += len(s)
	return t
}

// String returns the text (a copy).
func (t liveText) String() string {
	if t.n == 0 {
		return ""
	}
	return string(t.buf.b[:t.n])
}

// equal reports whether the text is s, without copying it.
func (t liveText) equal(s string) bool {
	if t.n == 0 {
		return s == ""
	}
	return string(t.buf.b[:t.n]) == s
}

// within reports whether stream is prefix or one of the streams nested in it.
func within(stream, prefix string) bool {
	return stream == prefix || strings.HasPrefix(stream, prefix+"/")
}

// ProjectLive returns the frames of ev, numbered from next (the sequence
// number after every frame already appended or queued), on top of st (the
// last commit) and live (what ev's superstep published so far), and the
// Live after them. An event of another superstep than live's starts from
// nothing. An event with no frames returns none and live unchanged.
func ProjectLive(st State, next int64, live Live, ev *LiveEvent) ([]Frame, Live, error) {
	if live.step != ev.Step {
		live = Live{step: ev.Step}
	}
	l := Live{step: live.step, items: append([]liveItem(nil), live.items...)}
	seq := &Seq{Next: next}
	resp := st.Response
	var err error
	switch ev.Kind {
	case LiveTextDelta:
		err = liveDelta(seq, resp, &l, ev)
	case LiveToolCall:
		err = liveToolCall(seq, resp, &l, ev)
	case LiveToolResult:
		err = liveToolResult(seq, &l, ev)
	case LiveRetry:
		open := l.open(ev.Stream)
		err = voidLive(seq, resp, &l, func(it *liveItem) bool { return it == open })
	case LiveDiscard:
		err = voidLive(seq, resp, &l, func(it *liveItem) bool { return within(it.stream, ev.Stream) })
	}
	if err != nil {
		return nil, live, err
	}
	if len(seq.Frames) == 0 {
		return nil, live, nil
	}
	return seq.Frames, l, nil
}

// liveDelta appends a text delta to its stream's open message, opening one
// when there is none.
func liveDelta(seq *Seq, resp *Response, l *Live, ev *LiveEvent) error {
	if err := beginLive(seq, resp); err != nil {
		return err
	}
	it := l.open(ev.Stream)
	if it == nil {
		idx := len(resp.Output) + len(l.items)
		l.items = append(l.items, liveItem{executor: ev.Executor, stream: ev.Stream, id: MessageID(resp.ID, idx), index: idx})
		it = &l.items[len(l.items)-1]
		if err := seq.MessageStart(it.id, it.index); err != nil {
			return err
		}
	}
	it.text = it.text.append(ev.Text)
	return seq.MessageDelta(it.id, it.index, ev.Text)
}

// liveToolCall opens the tool call item of an agent's own tool call, after
// closing the message the stream was writing: the call comes after that
// text, and the text after the call is a new message. Its result closes it
// (liveToolResult), or the commit does.
func liveToolCall(seq *Seq, resp *Response, l *Live, ev *LiveEvent) error {
	if err := beginLive(seq, resp); err != nil {
		return err
	}
	if it := l.open(ev.Stream); it != nil {
		item, err := seq.MessageFinish(it.id, it.index, it.text.String())
		if err != nil {
			return err
		}
		it.done, it.item = true, item
	}
	idx := len(resp.Output) + len(l.items)
	id := ToolCallID(resp.ID, idx)
	item, err := seq.ToolCallStart(id, idx, ev.CallID, ev.Name, ev.Arguments)
	if err != nil {
		return err
	}
	l.items = append(l.items, liveItem{executor: ev.Executor, stream: ev.Stream, id: id, index: idx, tool: true, item: item})
	return nil
}

// liveToolResult closes the open tool call item of call ev.CallID of the
// stream with its output; a result of no open call adds nothing.
func liveToolResult(seq *Seq, l *Live, ev *LiveEvent) error {
	for i := len(l.items) - 1; i >= 0; i-- {
		it := &l.items[i]
		if it.tool && !it.done && it.stream == ev.Stream && it.item.CallID == ev.CallID {
			out := ev.Text
			item, err := seq.ToolCallEnd(it.item, it.index, &out, ItemCompleted)
			if err != nil {
				return err
			}
			it.done, it.item = true, item
			return nil
		}
	}
	return nil
}

// beginLive appends response.in_progress when nothing followed
// response.created yet.
func beginLive(seq *Seq, resp *Response) error {
	if seq.Next > 1 {
		return nil
	}
	c := resp.Clone()
	c.Status = StatusInProgress
	return seq.Lifecycle(EventResponseInProgress, c)
}

// open returns the message item a stream is writing, if any: its last
// item, unless that one is closed or a tool call.
func (l *Live) open(stream string) *liveItem {
	for i := len(l.items) - 1; i >= 0; i-- {
		it := &l.items[i]
		if it.stream == stream {
			if it.done || it.tool {
				return nil
			}
			return it
		}
	}
	return nil
}

// voidLive withdraws the live items void says are void. The log is
// append-only, so that takes a reset response.in_progress whose output is
// the last committed output; the items that stay valid are then published
// again after it as they stand (a closed item whole, an open message with
// its text so far), so that what follows the reset is a coherent history
// by itself. When no item is void, nothing is appended.
func voidLive(seq *Seq, resp *Response, l *Live, void func(*liveItem) bool) error {
	var keep []liveItem
	for i := range l.items {
		if !void(&l.items[i]) {
			keep = append(keep, l.items[i])
		}
	}
	if len(keep) == len(l.items) {
		return nil
	}
	return restate(seq, resp, l, keep)
}

// restate appends a reset response.in_progress (the last committed output)
// and publishes the items keep again after it as they stand (a closed item
// whole, an open message with its text so far), as l's items: what follows
// the reset is a coherent history by itself.
func restate(seq *Seq, resp *Response, l *Live, keep []liveItem) error {
	if err := appendReset(seq, resp); err != nil {
		return err
	}
	l.items = nil
	for _, it := range keep {
		idx := len(resp.Output) + len(l.items)
		n := liveItem{executor: it.executor, stream: it.stream, index: idx, text: it.text, tool: it.tool, done: it.done}
		var err error
		switch {
		case it.tool && it.done:
			n.id = ToolCallID(resp.ID, idx)
			n.item, err = seq.ToolCall(n.id, idx, it.item.CallID, it.item.Name, it.item.Arguments, *it.item.Output)
		case it.tool:
			n.id = ToolCallID(resp.ID, idx)
			n.item, err = seq.ToolCallStart(n.id, idx, it.item.CallID, it.item.Name, it.item.Arguments)
		case it.done:
			n.id = MessageID(resp.ID, idx)
			n.item, err = seq.Message(n.id, idx, it.text.String())
		default:
			n.id = MessageID(resp.ID, idx)
			if err = seq.MessageStart(n.id, idx); err == nil && it.text.n > 0 {
				err = seq.MessageDelta(n.id, idx, it.text.String())
			}
		}
		if err != nil {
			return err
		}
		l.items = append(l.items, n)
	}
	return nil
}

// closeLiveWith appends the items of a step's outputs, committed on top of
// the items the step published live: they take over the live items, in
// order (closing the open messages with the committed text; the cut-th
// output, -1 for none, ends incomplete); when they do not line up (an
// executor yielded something else, or in another order), the live items
// are voided by a reset and the outputs added as complete items.
func closeLiveWith(seq *Seq, resp *Response, outs []Output, live Live, cut int) error {
	items := live.items
	if !linesUp(outs, items) {
		l := Live{step: live.step, items: append([]liveItem(nil), items...)}
		if err := voidLive(seq, resp, &l, func(*liveItem) bool { return true }); err != nil {
			return err
		}
		items = nil
	}
	for i, o := range outs {
		if i >= len(items) {
			if err := appendItem(seq, resp, o, itemStatus(i, cut)); err != nil {
				return err
			}
			continue
		}
		it := &items[i]
		var (
			item Item
			err  error
		)
		switch {
		case it.done: // its events are all in the log already
			item = it.item
		case it.tool: // the commit has the call's output
			out := o.Text
			item, err = seq.ToolCallEnd(it.item, it.index, &out, ItemCompleted)
		default:
			item, err = seq.MessageEnd(it.id, it.index, o.Text, itemStatus(i, cut))
		}
		if err != nil {
			return err
		}
		resp.Output = append(resp.Output, item)
	}
	return nil
}

// linesUp reports whether the k-th live item is the k-th output: a text of
// the same executor (for a message closed live, the same text), or the same
// tool call of the same executor.
func linesUp(outs []Output, items []liveItem) bool {
	if len(items) > len(outs) {
		return false
	}
	for i, it := range items {
		o := outs[i]
		if o.Executor != it.executor {
			return false
		}
		switch {
		case it.tool:
			if o.Kind != OutputToolCall || o.CallID != it.item.CallID || o.Name != it.item.Name ||
				o.Arguments != it.item.Arguments || (it.done && *it.item.Output != o.Text) {
				return false
			}
		case !it.done:
			if o.Kind != OutputMessage {
				return false
			}
		default:
			if o.Kind != OutputMessage || !it.text.equal(o.Text) {
				return false
			}
		}
	}
	return true
}
