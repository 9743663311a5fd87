package protocol

import (
	"bytes"
	"strings"
)

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
	// stale: the log holds live frames of this superstep that could not
	// be read back (LiveFromLog); the next projection withdraws them.
	stale bool
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
	// What a recovered superstep still owes an item read back from the log
	// (LiveFromLog), which clients saw before the crash: stream is "" until
	// a stream of the re-run claims the item; pend is how many bytes at the
	// end of text that stream has not streamed again; pendDone says the log
	// closed the item (a message) or holds its output (a tool call) and
	// the stream has not yet. An item the re-run made itself owes nothing.
	pend     int
	pendDone bool
	// follows is, for a tool call read back from the log, 1 + the index of
	// the message whose close came right before it in the log (the same
	// stream closed that message by this call), and 0 when none did.
	follows int
}

// owed reports whether the re-run has not reproduced all the log shows of it.
func (it *liveItem) owed() bool { return it.stream == "" || it.pend > 0 || it.pendDone }

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

// prefix returns the text's first n bytes (sharing the buffer).
func (t liveText) prefix(n int) liveText {
	if n == 0 {
		return liveText{}
	}
	t.n = n
	return t
}

// from returns the text from byte off on, without copying it; the caller
// must not write to it.
func (t liveText) from(off int) []byte {
	if t.n <= off {
		return nil
	}
	return t.buf.b[off:t.n]
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
// nothing. An event with no frames returns none and the Live after it:
// live itself, unless ev reproduced part of what the log of a recovered
// superstep holds (see LiveFromLog).
func ProjectLive(st State, next int64, live Live, ev *LiveEvent) ([]Frame, Live, error) {
	if live.step != ev.Step {
		live = Live{step: ev.Step}
	}
	l := Live{step: live.step, items: append([]liveItem(nil), live.items...)}
	seq := &Seq{Next: next}
	resp := st.Response
	var err error
	if live.stale {
		// The log holds live frames that could not be read back: withdraw
		// them before anything else.
		if err := appendReset(seq, resp); err != nil {
			return nil, live, err
		}
		l.items = nil
	}
	switch ev.Kind {
	case LiveTextDelta:
		err = liveDelta(seq, resp, &l, ev)
	case LiveToolCall:
		err = liveToolCall(seq, resp, &l, ev)
	case LiveToolResult:
		err = liveToolResult(seq, resp, &l, ev)
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
		// Nothing to append; l differs from live only when ev reproduced
		// what a recovered superstep's log holds (liveItem.pend).
		return nil, l, nil
	}
	return seq.Frames, l, nil
}

// liveDelta appends a text delta to its stream's open message, opening one
// when there is none. In a recovered superstep, a delta that is the text
// the log already shows of the stream's message is reproduced, not
// appended (reproduce).
func liveDelta(seq *Seq, resp *Response, l *Live, ev *LiveEvent) error {
	if err := beginLive(seq, resp); err != nil {
		return err
	}
	x := ev.Text
	it := l.open(ev.Stream)
	if it == nil {
		it = l.claim(ev, func(c *liveItem) bool { return !c.tool && c.continuedBy(x) })
	}
	if it != nil && it.owed() {
		var err error
		if x, err = reproduce(seq, resp, l, ev, it, x); err != nil || x == "" {
			return err
		}
		it = l.open(ev.Stream)
	}
	if it == nil {
		idx := len(resp.Output) + len(l.items)
		l.items = append(l.items, liveItem{executor: ev.Executor, stream: ev.Stream, id: MessageID(resp.ID, idx), index: idx})
		it = &l.items[len(l.items)-1]
		if err := seq.MessageStart(it.id, it.index); err != nil {
			return err
		}
	}
	it.text = it.text.append(x)
	return seq.MessageDelta(it.id, it.index, x)
}

// reproduce matches delta x of ev's stream against the text the log shows
// of it, the stream's message read back from the log (LiveFromLog). It
// returns what of x is new: "" when the log holds all of x already (only
// it.pend shrinks), the rest of x when x goes on past the log's open
// message. When x differs from the log's text (the call in flight at the
// crash, made again, streamed something else) or the log closed the
// message where x goes on, the message is taken back to where they agree
// by a reset that publishes every item again as it stands (restate), and
// the rest of x is returned to be appended after it.
func reproduce(seq *Seq, resp *Response, l *Live, ev *LiveEvent, it *liveItem, x string) (string, error) {
	it.stream, it.executor = ev.Stream, ev.Executor
	off := it.text.n - it.pend
	p := commonPrefix(it.text.from(off), x)
	switch {
	case p == len(x):
		it.pend -= p
		return "", nil
	case p == it.pend && !it.pendDone:
		// x goes on past the log's open message. Unless the log holds a
		// message with all of it that another stream took (streams that
		// began alike), the text continues from where clients were.
		if c := l.reclaim(it, string(it.text.from(0)[:off])+x, fitWithin); c != nil {
			return reproduce(seq, resp, l, ev, c, x)
		}
		it.pend = 0
		return x[p:], nil
	}
	// Streams that began alike may have claimed each other's messages.
	if c := l.reclaim(it, string(it.text.from(0)[:off])+x, fitPrefix); c != nil {
		return reproduce(seq, resp, l, ev, c, x)
	}
	return x[p:], takeBack(seq, resp, l, it, off+p)
}

// fit is how a message read back from the log must fit a stream's text so
// far for reclaim: be it exactly, begin with it, or either of those or (while
// open) be begun by it.
type fit uint8

const (
	fitPrefix fit = iota
	fitExact
	fitWithin
)

// reclaim finds another message that it's stream can be writing instead of
// it, a message read back from the log that the stream claimed because it
// began alike (two agents' replies that start with the same words): one
// whose text fits the stream's text so far, want (see fit), and that
// comes after the stream's item before it. The other message is
// unclaimed, or open in a stream that has written no more of it than it's
// text begins with, and whose item before it comes before it: the two
// swap. It returns the stream's new message, or nil.
func (l *Live) reclaim(it *liveItem, want string, how fit) *liveItem {
	fits := func(c *liveItem, want string, how fit) bool {
		t := string(c.text.from(0))
		switch how {
		case fitExact:
			return t == want
		case fitWithin:
			return strings.HasPrefix(t, want)
		}
		return strings.HasPrefix(t, want) || (!c.done && strings.HasPrefix(want, t))
	}
	before := func(m *liveItem) int { // the index of m's stream's item before m
		b := -1
		for i := range l.items {
			if c := &l.items[i]; c.index < m.index && c.stream == m.stream {
				b = c.index
			}
		}
		return b
	}
	from := before(it)
	got := it.text.n - it.pend // what it's stream reproduced of it
	for i := range l.items {
		c := &l.items[i]
		// c must hold all the stream reproduced (want begins with it).
		if c == it || c.tool || c.index <= from || c.text.n < got || !fits(c, want, how) {
			continue
		}
		switch {
		case c.stream == "":
			c.stream, c.executor = it.stream, it.executor
			c.pend, c.pendDone = c.text.n-got, c.done
			it.stream, it.executor, it.pend, it.pendDone = "", "", it.text.n, it.done
			return c
		case l.open(c.stream) == c && it.index > before(c) &&
			fits(it, string(c.text.from(0)[:c.text.n-c.pend]), fitWithin):
			cGot := c.text.n - c.pend
			c.stream, it.stream = it.stream, c.stream
			c.executor, it.executor = it.executor, c.executor
			c.pend, it.pend = c.text.n-got, it.text.n-cGot
			c.pendDone, it.pendDone = c.done, it.done
			return c
		}
	}
	return nil
}

// takeBack withdraws what the log shows of item it past cut bytes of its
// text (and its close, for a message the log closed): a reset, then every
// item again as it stands, it as an open message of its first cut bytes
// that its stream goes on writing.
func takeBack(seq *Seq, resp *Response, l *Live, it *liveItem, cut int) error {
	keep := append([]liveItem(nil), l.items...)
	k := &keep[it.index-len(resp.Output)]
	k.text = k.text.prefix(cut)
	k.pend, k.pendDone, k.done, k.item = 0, false, false, Item{}
	return restate(seq, resp, l, keep)
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a []byte, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// liveToolCall opens the tool call item of an agent's own tool call, after
// closing the message the stream was writing: the call comes after that
// text, and the text after the call is a new message. Its result closes it
// (liveToolResult), or the commit does. In a recovered superstep, a close
// and a call the log holds already are reproduced, not appended.
func liveToolCall(seq *Seq, resp *Response, l *Live, ev *LiveEvent) error {
	if err := beginLive(seq, resp); err != nil {
		return err
	}
	closed := 0 // 1 + the index of the message the call closes
	if it := l.open(ev.Stream); it != nil {
		if it.pend > 0 {
			// The log shows more text than the stream wrote before the
			// call: another message than the one it claimed may be its.
			if c := l.reclaim(it, string(it.text.from(0)[:it.text.n-it.pend]), fitExact); c != nil {
				it = c
			} else if err := takeBack(seq, resp, l, it, it.text.n-it.pend); err != nil {
				return err
			} else {
				it = l.open(ev.Stream)
			}
		}
		if it.pendDone { // the log closed it with this text already
			it.pendDone = false
		} else {
			item, err := seq.MessageFinish(it.id, it.index, it.text.String())
			if err != nil {
				return err
			}
			it.done, it.item = true, item
		}
		closed = it.index + 1
	}
	// A call the log added right after closing a message is the call of
	// that message's stream (one event made both), and a call added after
	// no close is one of a stream that had no message open: calls alike
	// (the same tool, arguments) of agents running at once are told apart.
	if c := l.claim(ev, func(c *liveItem) bool {
		return c.tool && c.follows == closed && c.item.Name == ev.Name && c.item.Arguments == ev.Arguments
	}); c != nil {
		// The log holds the call's item (and maybe its output: pendDone);
		// its call id, which the wire does not carry, pairs the result.
		c.item.CallID = ev.CallID
		return nil
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
// stream with its output; a result of no open call adds nothing. An output
// the log holds already is reproduced; another one than the log's takes
// the log's back (a reset) and closes the call with it.
func liveToolResult(seq *Seq, resp *Response, l *Live, ev *LiveEvent) error {
	for i := len(l.items) - 1; i >= 0; i-- {
		it := &l.items[i]
		if !it.tool || (it.done && !it.pendDone) || it.stream != ev.Stream || it.item.CallID != ev.CallID {
			continue
		}
		out := ev.Text
		if it.pendDone {
			if it.item.Output != nil && *it.item.Output == out {
				it.pendDone = false
				return nil
			}
			start := it.item
			start.Status, start.Output = ItemInProgress, nil
			keep := append([]liveItem(nil), l.items...)
			keep[i].done, keep[i].pendDone, keep[i].item = false, false, start
			if err := restate(seq, resp, l, keep); err != nil {
				return err
			}
			it = &l.items[i]
		}
		item, err := seq.ToolCallEnd(it.item, it.index, &out, ItemCompleted)
		if err != nil {
			return err
		}
		it.done, it.item = true, item
		return nil
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
// item, unless that one is a tool call or closed (by the stream: a message
// the log closed that the re-run's stream has not is still open to it).
func (l *Live) open(stream string) *liveItem {
	for i := len(l.items) - 1; i >= 0; i-- {
		it := &l.items[i]
		if it.stream == stream {
			if it.tool || (it.done && !it.pendDone) {
				return nil
			}
			return it
		}
	}
	return nil
}

// claim gives ev's stream the first item read back from the log that no
// stream claimed yet, comes after the stream's own items (a stream's items
// are in the order it made them), and that fits says is what ev makes; nil
// when there is none. The claimed item is the stream's from then on.
func (l *Live) claim(ev *LiveEvent, fits func(*liveItem) bool) *liveItem {
	from := 0
	for i := range l.items {
		if l.items[i].stream == ev.Stream {
			from = i + 1
		}
	}
	for i := from; i < len(l.items); i++ {
		if c := &l.items[i]; c.stream == "" && fits(c) {
			c.stream, c.executor = ev.Stream, ev.Executor
			return c
		}
	}
	return nil
}

// continuedBy reports whether a message read back from the log can be the
// one a stream writes starting with x: its text begins with x, or, while
// open, x begins with its text.
func (it *liveItem) continuedBy(x string) bool {
	t := it.text.from(0)
	return bytes.HasPrefix(t, []byte(x)) || (!it.done && strings.HasPrefix(x, string(t)))
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
	moved := map[int]int{} // index before → after, for follows
	for _, it := range keep {
		idx := len(resp.Output) + len(l.items)
		moved[it.index+1] = idx + 1
		n := liveItem{executor: it.executor, stream: it.stream, index: idx, text: it.text, tool: it.tool, done: it.done,
			pend: it.pend, pendDone: it.pendDone, follows: moved[it.follows]}
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
	if live.Owes() && !linesUp(outs, items) {
		// A recovered superstep whose outputs do not line up with what the
		// log shows may with what it streamed again: keep that.
		if again := live.reproduced(); linesUp(outs, again) {
			l := Live{step: live.step}
			if err := restate(seq, resp, &l, again); err != nil {
				return err
			}
			items = l.items
		}
	}
	if !linesUp(outs, items) {
		l := Live{step: live.step, items: append([]liveItem(nil), items...)}
		if err := voidLive(seq, resp, &l, func(*liveItem) bool { return true }); err != nil {
			return err
		}
		items = nil
	}
	for i, o := range outs {
		if i >= len(items) {
			id := outputID(idPrefix(o.Kind), resp.ID, len(resp.Output))
			if err := appendItem(seq, resp, o, id, itemStatus(i, cut)); err != nil {
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
			if it.tool && it.stream == "" {
				item.CallID = o.CallID // read back from the log, which does not carry it
			}
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

// reproduced returns the items as a recovered superstep streamed them
// again: without what the log shows that it did not reproduce.
func (l Live) reproduced() []liveItem {
	var keep []liveItem
	for _, it := range l.items {
		if it.stream == "" {
			continue
		}
		it.text, it.pend = it.text.prefix(it.text.n-it.pend), 0
		if it.pendDone {
			it.done, it.pendDone = false, false
			if it.tool {
				it.item.Status, it.item.Output = ItemInProgress, nil
			}
		}
		keep = append(keep, it)
	}
	return keep
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
		// An item read back from the log that no stream of the re-run
		// claimed (its executor's completion was replayed from the
		// journal) has no executor: its content decides.
		if it.stream != "" && o.Executor != it.executor {
			return false
		}
		switch {
		case it.tool:
			if o.Kind != OutputToolCall || (it.stream != "" && o.CallID != it.item.CallID) || o.Name != it.item.Name ||
				o.Arguments != it.item.Arguments || (it.done && (it.item.Output == nil || *it.item.Output != o.Text)) {
				return false
			}
		case !it.done:
			// What clients saw of a message the re-run did not write again
			// must begin the text that closes it.
			if o.Kind != OutputMessage || (it.owed() && !strings.HasPrefix(o.Text, string(it.text.from(0)))) {
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
