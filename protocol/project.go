package protocol

import (
	"encoding/json"
	"fmt"
	"time"
)

// This file is the projector: what a response's stream and snapshot become
// when a superstep commits, when an executor publishes live, and when a
// response ends with no superstep behind it. It knows nothing of workflows,
// storage or HTTP: the host turns a workflow step into a Step and a live
// event into a LiveEvent, and stores the Commit it gets back.

// OutputKind says what one output of a superstep is.
type OutputKind uint8

// Output kinds.
const (
	// OutputMessage is a message item.
	OutputMessage OutputKind = iota + 1
	// OutputRequest is a function_call item the client answers: a
	// workflow's request for input (its call_id is the request id).
	OutputRequest
	// OutputToolCall is a call of a tool the server ran itself (an agent's
	// own tool): an ItemToolCall item with its output, which no client
	// answers.
	OutputToolCall
)

// Output is one output of a superstep, in the order the step produced it.
type Output struct {
	Kind OutputKind
	// Executor is the executor of the hosted workflow the output came from
	// (for one nested in sub-workflows, the outermost).
	Executor string
	// Text is the message's text (OutputMessage) or the tool call's output
	// (OutputToolCall).
	Text string
	// CallID, Name and Arguments (JSON) are a function call's.
	CallID    string
	Name      string
	Arguments string
}

// Step is one committed superstep as the projector needs it.
type Step struct {
	Number  int64
	Outputs []Output
	// Status is the response's status after the step: StatusInProgress,
	// StatusCompleted (the run finished or waits for input) or
	// StatusFailed. A completed step whose Incomplete is set ends the
	// response incomplete.
	Status string
	// Error is what a failed response shows.
	Error *Error
	// Incomplete is the reply an agent cut short in this step, if any:
	// the last text output of Incomplete.Executor ends incomplete.
	Incomplete *Incomplete
	// Usage is what the step's model calls used.
	Usage Usage
	// At is when the step ended: a completed response's completed_at.
	At time.Time
}

// Incomplete says which executor's reply was cut short, and why (the
// Responses API's incomplete_details.reason: "max_output_tokens",
// "content_filter").
type Incomplete struct {
	Executor string
	Reason   string
}

// State is a response's projection as of its last commit: what the next
// commit builds on. A State is never modified in place.
type State struct {
	// Response is the snapshot.
	Response *Response
	// NextSeq is the sequence number after the last durable event
	// (committed or appended live).
	NextSeq int64
	// Step is the run's last committed superstep.
	Step int64
	// Usage is the response's usage so far; the snapshot shows it only
	// once the response is terminal (null before, as the API has it).
	Usage Usage
}

// Commit is what a commit writes: the frames to append to the log, the
// state after them, and the record's encoded fields.
type Commit struct {
	Frames []Frame
	Next   State
	// Snapshot is Next.Response encoded, or nil when the step changed
	// nothing the Response object shows (a silent superstep): the store
	// keeps the snapshot it has (store.CommitParams.Snapshot).
	Snapshot []byte
	// Error is the response's error object encoded, for a failed one.
	Error []byte
	// Usage is Next.Usage encoded, once there is any (nil before).
	Usage []byte
}

// Create returns the commit that creates a response: response.created
// (sequence 0) carrying the new snapshot.
func Create(p *NewResponseParams) (Commit, error) {
	resp := NewResponse(p)
	seq := &Seq{}
	if err := seq.Lifecycle(EventResponseCreated, resp); err != nil {
		return Commit{}, err
	}
	return seal(seq, State{Response: resp, NextSeq: seq.Next}, false, true)
}

// ProjectStep returns the commit of step s on top of st. live is what s
// published live so far (the zero Live in committed mode): its items are
// closed by the step's outputs when they line up, and voided by a reset
// when they do not.
func ProjectStep(st State, live Live, s *Step) (Commit, error) {
	resp := st.Response.clone(len(s.Outputs))
	seq := &Seq{Next: st.NextSeq, Frames: make([]Frame, 0, frameCount(s.Outputs))}
	if err := begin(seq, resp); err != nil {
		return Commit{}, err
	}
	cut := -1
	if inc := s.Incomplete; inc != nil && inc.Reason != "" {
		cut = lastText(s.Outputs, inc.Executor)
		resp.IncompleteDetails = &IncompleteDetails{Reason: inc.Reason}
	}
	if live.step == s.Number && live.stale {
		// Live events of the step the log holds but could not be read
		// back (LiveFromLog): withdrawn.
		if err := appendReset(seq, resp); err != nil {
			return Commit{}, err
		}
	}
	var err error
	if live.step == s.Number && len(live.items) > 0 {
		err = closeLiveWith(seq, resp, s.Outputs, live, cut)
	} else {
		err = appendOutputs(seq, resp, s.Outputs, cut)
	}
	if err != nil {
		return Commit{}, err
	}
	usage := st.Usage
	usage.Add(s.Usage)
	status := s.Status
	if status == StatusCompleted && resp.IncompleteDetails != nil {
		status = StatusIncomplete
	}
	if status != StatusInProgress {
		if err := finish(seq, resp, status, s.At, s.Error, usage); err != nil {
			return Commit{}, err
		}
	}
	next := State{Response: resp, NextSeq: seq.Next, Step: s.Number, Usage: usage}
	return seal(seq, next, usage != Usage{}, !sameShape(st.Response, resp))
}

// frameCount is about how many frames a step with outs appends: each
// output's item, the step's lifecycle events and some slack.
func frameCount(outs []Output) int {
	n := 4
	for _, o := range outs {
		switch o.Kind {
		case OutputMessage:
			n += 6
		case OutputRequest:
			n += 4
		default:
			n += 2
		}
	}
	return n
}

// sameShape reports whether next reads as prev does: same status, output
// items, incomplete details, usage and error. Items are compared by count:
// a step that changes an item adds one (items are final once in the
// output).
func sameShape(prev, next *Response) bool {
	return prev.Status == next.Status && len(prev.Output) == len(next.Output) &&
		(prev.IncompleteDetails == nil) == (next.IncompleteDetails == nil) &&
		(prev.IncompleteDetails == nil || *prev.IncompleteDetails == *next.IncompleteDetails) &&
		prev.Usage == nil && next.Usage == nil && prev.Error == nil && next.Error == nil
}

// ProjectEnd returns the commit that ends the response in status with no
// superstep behind it (a cancel, a failure of the run), at step st.Step+1.
// Items the interrupted step published live (live, when it is that step's)
// are closed first, as the log holds them: every item a client saw added is
// done before the terminal event, and the snapshot holds what the stream
// showed.
func ProjectEnd(st State, live Live, status string, e *Error, at time.Time) (Commit, error) {
	resp := st.Response.Clone()
	seq := &Seq{Next: st.NextSeq}
	if status != StatusCancelled {
		if err := begin(seq, resp); err != nil {
			return Commit{}, err
		}
	}
	if live.step == st.Step+1 && live.stale {
		if err := appendReset(seq, resp); err != nil { // as in ProjectStep
			return Commit{}, err
		}
	}
	if live.step == st.Step+1 {
		for _, it := range live.items {
			var (
				item Item
				err  error
			)
			switch {
			case it.done:
				item = it.item
			case it.tool: // the call did not finish: no output
				item, err = seq.ToolCallEnd(it.item, it.index, nil, ItemIncomplete)
			default:
				item, err = seq.MessageEnd(it.id, it.index, it.text.String(), ItemIncomplete)
			}
			if err != nil {
				return Commit{}, err
			}
			resp.Output = append(resp.Output, item)
		}
	}
	if err := finish(seq, resp, status, at, e, st.Usage); err != nil {
		return Commit{}, err
	}
	return seal(seq, State{Response: resp, NextSeq: seq.Next, Step: st.Step + 1, Usage: st.Usage}, st.Usage != Usage{}, true)
}

// finish sets resp's terminal fields and appends its terminal event.
func finish(seq *Seq, resp *Response, status string, at time.Time, e *Error, usage Usage) error {
	u := usage
	resp.Usage = &u
	resp.Finish(status, at, e)
	return seq.Lifecycle(TerminalEventType(status), resp)
}

// seal makes the Commit of seq's frames, leading to next; the snapshot is
// encoded when it changed. A snapshot that the last frame carries (a
// terminal or created event of next.Response, the last thing encoded) is
// that frame's bytes, not a second encoding: the store keeps it by
// reference to them (store/internal/snapref) in any case.
func seal(seq *Seq, next State, withUsage, snapshot bool) (Commit, error) {
	c := Commit{Frames: seq.Frames, Next: next}
	var err error
	if snapshot {
		if n := len(seq.Frames); n > 0 && seq.resp == next.Response {
			p := seq.Frames[n-1].Payload
			c.Snapshot = p[seq.respAt : len(p)-1 : len(p)-1]
		} else if c.Snapshot, err = next.Response.appendJSON(make([]byte, 0, next.Response.sizeHint(&sizer{}))); err != nil {
			return Commit{}, fmt.Errorf("protocol: encode response snapshot: %w", err)
		}
	}
	if next.Response.Error != nil {
		c.Error = next.Response.Error.appendJSON(make([]byte, 0, 64+len(next.Response.Error.Message)))
	}
	if withUsage || next.Response.Usage != nil {
		c.Usage = next.Usage.appendJSON(make([]byte, 0, 192))
	}
	return c, nil
}

// begin sets resp in progress and appends response.in_progress when the
// log has no event past response.created yet (committed or live).
func begin(seq *Seq, resp *Response) error {
	resp.Status = StatusInProgress
	if seq.Next > 1 {
		return nil
	}
	return seq.Lifecycle(EventResponseInProgress, resp.Clone())
}

// lastText returns the index of the last text output of executor, or -1.
func lastText(outs []Output, executor string) int {
	for i := len(outs) - 1; i >= 0; i-- {
		if outs[i].Kind == OutputMessage && outs[i].Executor == executor {
			return i
		}
	}
	return -1
}

// itemStatus is the final status of the item of the i-th output when the
// cut-th was cut short.
func itemStatus(i, cut int) string {
	if i == cut {
		return ItemIncomplete
	}
	return ItemCompleted
}

// appendOutputs appends one complete item per output; the cut-th (-1:
// none) ends incomplete. The items' ids are made at once, substrings of
// one string rather than a string each (a step of 200 outputs: 200
// allocations).
func appendOutputs(seq *Seq, resp *Response, outs []Output, cut int) error {
	var (
		bufA  [256]byte
		endsA [16]int
		buf   = bufA[:0]
		ends  = endsA[:0]
	)
	for i, o := range outs {
		buf = appendOutputID(buf, idPrefix(o.Kind), resp.ID, len(resp.Output)+i)
		ends = append(ends, len(buf))
	}
	ids, start := string(buf), 0
	for i, o := range outs {
		if err := appendItem(seq, resp, o, ids[start:ends[i]], itemStatus(i, cut)); err != nil {
			return err
		}
		start = ends[i]
	}
	return nil
}

// idPrefix is the prefix of the ids of the items of outputs of kind k.
func idPrefix(k OutputKind) string {
	switch k {
	case OutputRequest:
		return "fc_"
	case OutputToolCall:
		return "mcp_"
	}
	return "msg_"
}

// appendItem appends one complete output item for o, of id: a message for
// text, a function_call for a request (call_id = the request id) or for an
// agent's own tool call (call_id = the model's).
func appendItem(seq *Seq, resp *Response, o Output, id, status string) error {
	var (
		item Item
		err  error
	)
	idx := len(resp.Output)
	switch o.Kind {
	case OutputMessage:
		item, err = seq.MessageWithStatus(id, idx, o.Text, status)
	case OutputRequest:
		item, err = seq.FunctionCall(id, idx, o.CallID, o.Name, o.Arguments)
	case OutputToolCall:
		item, err = seq.ToolCall(id, idx, o.CallID, o.Name, o.Arguments, o.Text)
	default:
		return fmt.Errorf("protocol: output %d has no kind", idx)
	}
	if err != nil {
		return err
	}
	resp.Output = append(resp.Output, item)
	return nil
}

// appendReset appends a reset response.in_progress carrying resp (the last
// committed state).
func appendReset(seq *Seq, resp *Response) error {
	c := resp.Clone()
	c.Status = StatusInProgress
	return seq.Lifecycle(EventResponseInProgress, c)
}

// CancelledSnapshot returns snapshot, an encoded Response, as it reads once
// its cancel is committed: status cancelled, the rest as it was. A reader
// shows it while a recorded cancel waits for the run's cancelled commit.
func CancelledSnapshot(snapshot []byte) ([]byte, error) {
	var r Response
	if err := json.Unmarshal(snapshot, &r); err != nil {
		return nil, fmt.Errorf("protocol: decode response snapshot: %w", err)
	}
	r.Status = StatusCancelled
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("protocol: encode response snapshot: %w", err)
	}
	return data, nil
}
