package protocol

import (
	"encoding/json"
	"fmt"
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
type Frame struct {
	Type    string
	Seq     int64
	Payload []byte
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
}

// add marshals ev (which must carry seq) into a frame.
func (s *Seq) add(typ string, ev any) error {
	ev, err := wireEvent(ev)
	if err != nil {
		return fmt.Errorf("protocol: encode %s: %w", typ, err)
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("protocol: encode %s: %w", typ, err)
	}
	s.Frames = append(s.Frames, Frame{Type: typ, Seq: s.Next, Payload: data})
	s.Next++
	return nil
}

// Lifecycle appends a response.* event carrying r.
func (s *Seq) Lifecycle(typ string, r *Response) error {
	return s.add(typ, LifecycleEvent{Type: typ, SequenceNumber: s.Next, Response: r})
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
	if err := s.add(EventOutputItemAdded, OutputItemEvent{EventOutputItemAdded, s.Next, outputIndex, item}); err != nil {
		return err
	}
	part := ContentPartEvent{EventContentPartAdded, s.Next, id, outputIndex, 0, OutputText("")}
	return s.add(EventContentPartAdded, part)
}

// MessageDelta appends an output_text.delta of the open message item id.
func (s *Seq) MessageDelta(id string, outputIndex int, delta string) error {
	ev := OutputTextEvent{Type: EventOutputTextDelta, SequenceNumber: s.Next, ItemID: id,
		OutputIndex: outputIndex, Delta: &delta, Logprobs: []json.RawMessage{}}
	return s.add(EventOutputTextDelta, ev)
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
	done := OutputTextEvent{Type: EventOutputTextDone, SequenceNumber: s.Next, ItemID: id,
		OutputIndex: outputIndex, Text: &text, Logprobs: []json.RawMessage{}}
	if err := s.add(EventOutputTextDone, done); err != nil {
		return Item{}, err
	}
	part := ContentPartEvent{EventContentPartDone, s.Next, id, outputIndex, 0, OutputText(text)}
	if err := s.add(EventContentPartDone, part); err != nil {
		return Item{}, err
	}
	item := Item{ID: id, Type: ItemMessage, Status: status, Role: "assistant",
		Content: []ContentPart{OutputText(text)}}
	return item, s.add(EventOutputItemDone, OutputItemEvent{EventOutputItemDone, s.Next, outputIndex, item})
}

// ToolCallStart appends the output_item.added of a tool call the server
// runs (ItemToolCall, in progress, output null) and returns the item.
func (s *Seq) ToolCallStart(id string, outputIndex int, callID, name, arguments string) (Item, error) {
	item := Item{ID: id, Type: ItemToolCall, Status: ItemInProgress, CallID: callID, Name: name, Arguments: arguments}
	return item, s.add(EventOutputItemAdded, OutputItemEvent{EventOutputItemAdded, s.Next, outputIndex, item})
}

// ToolCallEnd appends the output_item.done of the tool call item with its
// output (nil: none, for a call that did not finish) and final status, and
// returns the final item.
func (s *Seq) ToolCallEnd(item Item, outputIndex int, output *string, status string) (Item, error) {
	item.Status, item.Output = status, output
	return item, s.add(EventOutputItemDone, OutputItemEvent{EventOutputItemDone, s.Next, outputIndex, item})
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
	if err := s.add(EventOutputItemAdded, OutputItemEvent{EventOutputItemAdded, s.Next, outputIndex, item}); err != nil {
		return Item{}, err
	}
	delta := FunctionCallArgumentsEvent{Type: EventFunctionCallArgDelta, SequenceNumber: s.Next,
		ItemID: id, OutputIndex: outputIndex, Delta: &arguments}
	if err := s.add(EventFunctionCallArgDelta, delta); err != nil {
		return Item{}, err
	}
	done := FunctionCallArgumentsEvent{Type: EventFunctionCallArgDone, SequenceNumber: s.Next,
		ItemID: id, OutputIndex: outputIndex, Name: name, Arguments: &arguments}
	if err := s.add(EventFunctionCallArgDone, done); err != nil {
		return Item{}, err
	}
	item.Status = ItemCompleted
	item.Arguments = arguments
	return item, s.add(EventOutputItemDone, OutputItemEvent{EventOutputItemDone, s.Next, outputIndex, item})
}
