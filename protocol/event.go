package protocol

import (
	"encoding/json"
	"fmt"
	"io"
	"iter"
)

// Stream event types.
const (
	EventResponseCreated      = "response.created"
	EventResponseQueued       = "response.queued"
	EventResponseInProgress   = "response.in_progress"
	EventResponseCompleted    = "response.completed"
	EventResponseFailed       = "response.failed"
	EventResponseIncomplete   = "response.incomplete"
	EventResponseCancelled    = "response.cancelled"
	EventOutputItemAdded      = "response.output_item.added"
	EventOutputItemDone       = "response.output_item.done"
	EventContentPartAdded     = "response.content_part.added"
	EventContentPartDone      = "response.content_part.done"
	EventOutputTextDelta      = "response.output_text.delta"
	EventOutputTextDone       = "response.output_text.done"
	EventFunctionCallArgDelta = "response.function_call_arguments.delta"
	EventFunctionCallArgDone  = "response.function_call_arguments.done"
)

// IsTerminal reports whether an event of type t ends a response's stream.
func IsTerminal(t string) bool {
	switch t {
	case EventResponseCompleted, EventResponseFailed, EventResponseIncomplete, EventResponseCancelled:
		return true
	}
	return false
}

// TerminalEventType returns the terminal event type for a terminal response
// status ("" for a non-terminal one).
func TerminalEventType(status string) string {
	switch status {
	case StatusCompleted:
		return EventResponseCompleted
	case StatusFailed:
		return EventResponseFailed
	case StatusIncomplete:
		return EventResponseIncomplete
	case StatusCancelled:
		return EventResponseCancelled
	}
	return ""
}

// Frame is one stream event ready for the log: its type (the SSE event
// name) and its payload (the SSE data JSON, with type and sequence_number).
//
// A long text (SpliceMin bytes or more) is held apart from the
// payloads of the frames that repeat it: a message's delta, its text's
// done, its part's done and its item's done share one encoding of its
// text, each through a Splice, instead of holding four copies (an 8 MiB
// reply was 32 MiB of frames). Payload is then the bytes around the
// splices; Bytes returns the whole payload. Lifecycle events (which carry
// the whole Response, snapshot included) are never spliced.
type Frame struct {
	Type    string
	Seq     int64
	Payload []byte
	Splices []Splice
}

// Splice is a piece of a frame's payload held apart: Bytes go at offset At
// of Payload. A frame's splices are in order of At; their Bytes are
// shared and never written to.
type Splice struct {
	At    int
	Bytes []byte
}

// SpliceMin is the length of a text from which it is spliced into the
// frames that hold it rather than copied into each.
const SpliceMin = 16 << 10

// Len returns the length of the frame's whole payload.
func (f *Frame) Len() int {
	n := len(f.Payload)
	for _, sp := range f.Splices {
		n += len(sp.Bytes)
	}
	return n
}

// Bytes returns the frame's whole payload: Payload itself when the frame
// has no splices, else a new slice.
func (f *Frame) Bytes() []byte {
	if len(f.Splices) == 0 {
		return f.Payload
	}
	return f.AppendTo(make([]byte, 0, f.Len()))
}

// Pieces yields the frame's whole payload in order, piece by piece: the
// bytes of Payload between splices and each splice's Bytes, as held.
func (f *Frame) Pieces() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		at := 0
		for _, sp := range f.Splices {
			if !yield(f.Payload[at:sp.At]) || !yield(sp.Bytes) {
				return
			}
			at = sp.At
		}
		yield(f.Payload[at:])
	}
}

// AppendTo appends the frame's whole payload to b.
func (f *Frame) AppendTo(b []byte) []byte {
	for p := range f.Pieces() {
		b = append(b, p...)
	}
	return b
}

// WriteTo writes the frame's whole payload to w piece by piece, never
// joined: a long reply's text is written from where it is held.
func (f *Frame) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for p := range f.Pieces() {
		m, err := w.Write(p)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// LifecycleEvent is a response.* event carrying the whole Response.
type LifecycleEvent struct {
	Type           string    `json:"type"`
	SequenceNumber int64     `json:"sequence_number"`
	Response       *Response `json:"response"`
}

// OutputItemEvent is response.output_item.added / .done.
type OutputItemEvent struct {
	Type           string `json:"type"`
	SequenceNumber int64  `json:"sequence_number"`
	OutputIndex    int    `json:"output_index"`
	Item           Item   `json:"item"`
}

// ContentPartEvent is response.content_part.added / .done.
type ContentPartEvent struct {
	Type           string      `json:"type"`
	SequenceNumber int64       `json:"sequence_number"`
	ItemID         string      `json:"item_id"`
	OutputIndex    int         `json:"output_index"`
	ContentIndex   int         `json:"content_index"`
	Part           ContentPart `json:"part"`
}

// OutputTextEvent is response.output_text.delta (Delta) / .done (Text).
type OutputTextEvent struct {
	Type           string            `json:"type"`
	SequenceNumber int64             `json:"sequence_number"`
	ItemID         string            `json:"item_id"`
	OutputIndex    int               `json:"output_index"`
	ContentIndex   int               `json:"content_index"`
	Delta          *string           `json:"delta,omitempty"`
	Text           *string           `json:"text,omitempty"`
	Logprobs       []json.RawMessage `json:"logprobs"`
}

// FunctionCallArgumentsEvent is response.function_call_arguments.delta
// (Delta) / .done (Name, Arguments).
type FunctionCallArgumentsEvent struct {
	Type           string  `json:"type"`
	SequenceNumber int64   `json:"sequence_number"`
	ItemID         string  `json:"item_id"`
	OutputIndex    int     `json:"output_index"`
	Delta          *string `json:"delta,omitempty"`
	Name           string  `json:"name,omitempty"`
	Arguments      *string `json:"arguments,omitempty"`
}

// Seq numbers events of one response contiguously.
type Seq struct {
	Next   int64   // the next event's sequence number
	Frames []Frame // the frames built so far

	// buf holds the payloads of the frames: each is a slice of it capped
	// at its end (an append to one never writes into the next), so that a
	// step's frames take a few allocations rather than one or more per
	// event. A full buf is replaced, not grown: the frames keep the old one.
	buf []byte
	// resp and respAt say the last frame is a lifecycle event carrying
	// resp, encoded at respAt of its payload (seal takes the snapshot from
	// there).
	resp   *Response
	respAt int
	// parts backs the content of the messages MessageEnd closes, a
	// one-part slice each, capped (the items of a step share a few arrays).
	parts []ContentPart
	// z sizes the frames: the long text of a message is measured once for
	// its frames, each presized (not grown by copies).
	z sizer
	// q encodes the id and text of the item being written once for its
	// frames.
	q quoteCache
}

// maxChunk bounds the buffers frames are encoded into (bigger for a frame
// that needs more): a frame that outlives the others (the tail a host
// keeps for readers) keeps its whole buffer alive.
const maxChunk = 64 << 10

// reserve makes room for about n more bytes of payload and returns where
// the next payload starts in s.buf.
func (s *Seq) reserve(n int) int {
	if cap(s.buf)-len(s.buf) < n {
		s.buf = make([]byte, 0, max(n, min(2*cap(s.buf), maxChunk)))
	}
	return len(s.buf)
}

// push records the payload b[start:] (b is s.buf after an append) as the
// next frame, of type typ.
func (s *Seq) push(typ string, b []byte, start int) {
	s.buf = b
	fr := Frame{Type: typ, Seq: s.Next, Payload: b[start:len(b):len(b)]}
	if len(s.q.pend) > 0 {
		fr.Splices = make([]Splice, len(s.q.pend))
		for i, sp := range s.q.pend {
			fr.Splices[i] = Splice{At: sp.At - start, Bytes: sp.Bytes}
		}
		s.q.pend = s.q.pend[:0]
	}
	s.Frames = append(s.Frames, fr)
	s.resp = nil
	s.Next++
}

// zq is s's sizer for a frame written through the quote cache, whose long
// texts are spliced (they take no room in its payload).
func (s *Seq) zq() *sizer {
	s.z.splice = !s.q.noSplice
	return &s.z
}

// zall is s's sizer for a frame that holds every string.
func (s *Seq) zall() *sizer {
	s.z.splice = false
	return &s.z
}

// Lifecycle appends a response.* event carrying r.
func (s *Seq) Lifecycle(typ string, r *Response) error {
	ev := LifecycleEvent{Type: typ, SequenceNumber: s.Next, Response: r}
	start := s.reserve(r.sizeHint(s.zall()))
	b, off, err := ev.appendJSON(s.buf)
	if err != nil {
		return fmt.Errorf("protocol: encode %s: %w", typ, err)
	}
	s.push(typ, b, start)
	s.resp, s.respAt = r, off-start
	return nil
}

// addItem appends an output_item event of item.
func (s *Seq) addItem(typ string, outputIndex int, item *Item) error {
	ev := OutputItemEvent{Type: typ, SequenceNumber: s.Next, OutputIndex: outputIndex, Item: *item}
	start := s.reserve(96 + item.sizeHint(s.zq()))
	b, err := ev.appendJSON(s.buf, &s.q)
	if err != nil {
		s.q.forget()
		return fmt.Errorf("protocol: encode %s: %w", typ, err)
	}
	s.push(typ, b, start)
	return nil
}

// addPart appends a content_part event of the first part of item id.
func (s *Seq) addPart(typ, id string, outputIndex int, text string) error {
	ev := ContentPartEvent{Type: typ, SequenceNumber: s.Next, ItemID: id, OutputIndex: outputIndex, Part: OutputText(text)}
	start := s.reserve(192 + len(id) + s.zq().text(text))
	b, err := ev.appendJSON(s.buf, &s.q)
	if err != nil {
		s.q.forget()
		return fmt.Errorf("protocol: encode %s: %w", typ, err)
	}
	s.push(typ, b, start)
	return nil
}

// addText appends an output_text event of item id: its delta, or its
// done with the whole text. It writes what OutputTextEvent.appendJSON
// writes for it (content index 0, logprobs []), from text itself: through
// the event's pointer to it, text escaped to the heap once the cache kept
// it (two allocations per message).
func (s *Seq) addText(typ, id string, outputIndex int, text string) error {
	start := s.reserve(160 + len(id) + s.zq().text(text))
	b := appendItemHead(s.buf, typ, s.Next, id, outputIndex, &s.q)
	if typ == EventOutputTextDelta {
		b = append(b, `,"content_index":0,"delta":`...)
	} else {
		b = append(b, `,"content_index":0,"text":`...)
	}
	b = s.q.text(b, text)
	b = append(b, `,"logprobs":[]}`...)
	s.push(typ, b, start)
	return nil
}

// addArgs appends a function_call_arguments event (its delta, or its
// done with the whole arguments).
func (s *Seq) addArgs(ev *FunctionCallArgumentsEvent) {
	ev.SequenceNumber = s.Next
	n, z := 160+len(ev.ItemID)+len(ev.Name), s.zq()
	if ev.Delta != nil {
		n += z.text(*ev.Delta)
	}
	if ev.Arguments != nil {
		n += z.text(*ev.Arguments)
	}
	start := s.reserve(n)
	s.push(ev.Type, ev.appendJSON(s.buf, &s.q), start)
}

// Message appends the events of one complete message item holding text at
// outputIndex (output_item.added, content_part.added, output_text.delta with
// the whole text, output_text.done, content_part.done, output_item.done) and
// returns the final item.
func (s *Seq) Message(id string, outputIndex int, text string) (Item, error) {
	return s.MessageWithStatus(id, outputIndex, text, ItemCompleted)
}

// MessageWithStatus is Message with the item's final status: ItemCompleted,
// or ItemIncomplete for a message that was cut short.
func (s *Seq) MessageWithStatus(id string, outputIndex int, text, status string) (Item, error) {
	if err := s.MessageStart(id, outputIndex); err != nil {
		return Item{}, err
	}
	if err := s.MessageDelta(id, outputIndex, text); err != nil {
		return Item{}, err
	}
	return s.MessageEnd(id, outputIndex, text, status)
}

// MessageStart appends the events that open a message item at outputIndex
// (output_item.added, content_part.added), for text streamed with
// MessageDelta and closed with MessageFinish.
func (s *Seq) MessageStart(id string, outputIndex int) error {
	item := Item{ID: id, Type: ItemMessage, Status: ItemInProgress, Role: "assistant"}
	if err := s.addItem(EventOutputItemAdded, outputIndex, &item); err != nil {
		return err
	}
	return s.addPart(EventContentPartAdded, id, outputIndex, "")
}

// MessageDelta appends an output_text.delta of the open message item id.
func (s *Seq) MessageDelta(id string, outputIndex int, delta string) error {
	return s.addText(EventOutputTextDelta, id, outputIndex, delta)
}

// MessageFinish appends the events that close the open message item id
// with its whole text (output_text.done, content_part.done,
// output_item.done) and returns the final item.
func (s *Seq) MessageFinish(id string, outputIndex int, text string) (Item, error) {
	return s.MessageEnd(id, outputIndex, text, ItemCompleted)
}

// MessageEnd is MessageFinish with the item's final status: ItemCompleted,
// or ItemIncomplete for a message that was cut short (by the model's limit,
// a cancel or a failure).
func (s *Seq) MessageEnd(id string, outputIndex int, text, status string) (Item, error) {
	if err := s.addText(EventOutputTextDone, id, outputIndex, text); err != nil {
		return Item{}, err
	}
	if err := s.addPart(EventContentPartDone, id, outputIndex, text); err != nil {
		return Item{}, err
	}
	if len(s.parts) == cap(s.parts) {
		s.parts = make([]ContentPart, 0, min(max(2*cap(s.parts), 4), 256))
	}
	s.parts = append(s.parts, OutputText(text))
	n := len(s.parts)
	item := Item{ID: id, Type: ItemMessage, Status: status, Role: "assistant", Content: s.parts[n-1 : n : n]}
	return item, s.addItem(EventOutputItemDone, outputIndex, &item)
}

// ToolCallStart appends the output_item.added of a tool call the server
// runs (ItemToolCall, in progress, output null) and returns the item.
func (s *Seq) ToolCallStart(id string, outputIndex int, callID, name, arguments string) (Item, error) {
	item := Item{ID: id, Type: ItemToolCall, Status: ItemInProgress, CallID: callID, Name: name, Arguments: arguments}
	return item, s.addItem(EventOutputItemAdded, outputIndex, &item)
}

// ToolCallEnd appends the output_item.done of the tool call item with its
// output (nil: none, for a call that did not finish) and final status, and
// returns the final item.
func (s *Seq) ToolCallEnd(item Item, outputIndex int, output *string, status string) (Item, error) {
	item.Status, item.Output = status, output
	return item, s.addItem(EventOutputItemDone, outputIndex, &item)
}

// ToolCall appends the events of one complete tool call item (added, then
// done with its output) and returns the final item.
func (s *Seq) ToolCall(id string, outputIndex int, callID, name, arguments, output string) (Item, error) {
	item, err := s.ToolCallStart(id, outputIndex, callID, name, arguments)
	if err != nil {
		return Item{}, err
	}
	return s.ToolCallEnd(item, outputIndex, &output, ItemCompleted)
}

// FunctionCall appends the events of one complete function_call item
// (output_item.added with arguments "", function_call_arguments.delta and
// .done, output_item.done) and returns the final item.
func (s *Seq) FunctionCall(id string, outputIndex int, callID, name, arguments string) (Item, error) {
	item := Item{ID: id, Type: ItemFunctionCall, Status: ItemInProgress, CallID: callID, Name: name}
	if err := s.addItem(EventOutputItemAdded, outputIndex, &item); err != nil {
		return Item{}, err
	}
	s.addArgs(&FunctionCallArgumentsEvent{Type: EventFunctionCallArgDelta, ItemID: id, OutputIndex: outputIndex, Delta: &arguments})
	s.addArgs(&FunctionCallArgumentsEvent{Type: EventFunctionCallArgDone, ItemID: id, OutputIndex: outputIndex,
		Name: name, Arguments: &arguments})
	item.Status = ItemCompleted
	item.Arguments = arguments
	return item, s.addItem(EventOutputItemDone, outputIndex, &item)
}
