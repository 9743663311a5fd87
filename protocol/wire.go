package protocol

import (
	"fmt"
	"strconv"

	"github.com/superstep/superstep/internal/jsonstr"
)

// The encoded forms of content parts, items, responses and the stream
// events holding them, appended to a buffer (jsonenc.go has the
// primitives), also by the types' MarshalJSON methods. The bytes are those
// encoding/json writes for the types' fields and tags, with the nested
// values encoded as their MarshalJSON methods had them: the fields, their
// order and their escaping (encode_test.go compares them with
// encoding/json, and fuzzes them).

// appendJSON appends the part: annotations and logprobs [] when empty.
// q encodes its text (nil: each time).
func (c *ContentPart) appendJSON(dst []byte, q *quoteCache) ([]byte, error) {
	dst = append(dst, `{"type":`...)
	dst = jsonstr.Append(dst, c.Type)
	dst = append(dst, `,"text":`...)
	dst = q.text(dst, c.Text)
	dst = append(dst, `,"annotations":`...)
	var err error
	if dst, err = appendRawList(dst, nonNil(c.Annotations)); err != nil {
		return dst, err
	}
	dst = append(dst, `,"logprobs":`...)
	if dst, err = appendRawList(dst, nonNil(c.Logprobs)); err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}

// appendJSON appends the fields of the item's type ("content": [] for an
// empty message, "arguments": "" for a function call being opened). q
// encodes its id and text (nil: each time).
func (it *Item) appendJSON(dst []byte, q *quoteCache) ([]byte, error) {
	dst = append(dst, `{"id":`...)
	dst = q.id(dst, it.ID)
	dst = append(dst, `,"type":`...)
	dst = jsonstr.Append(dst, it.Type)
	dst = append(dst, `,"status":`...)
	dst = jsonstr.Append(dst, it.Status)
	switch it.Type {
	case ItemMessage:
		dst = append(dst, `,"role":`...)
		dst = jsonstr.Append(dst, it.Role)
		dst = append(dst, `,"content":[`...)
		for i := range it.Content {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = it.Content[i].appendJSON(dst, q); err != nil {
				return dst, err
			}
		}
		dst = append(dst, ']')
	case ItemFunctionCall:
		dst = append(dst, `,"call_id":`...)
		dst = jsonstr.Append(dst, it.CallID)
		dst = append(dst, `,"name":`...)
		dst = jsonstr.Append(dst, it.Name)
		dst = append(dst, `,"arguments":`...)
		dst = q.text(dst, it.Arguments)
	case ItemToolCall:
		// The model's call id stays in the host (live items pair by it); an
		// mcp_call has none on the wire.
		dst = append(dst, `,"server_label":`...)
		dst = jsonstr.Append(dst, ToolServerLabel)
		dst = append(dst, `,"name":`...)
		dst = jsonstr.Append(dst, it.Name)
		dst = append(dst, `,"arguments":`...)
		dst = q.text(dst, it.Arguments)
		dst = append(dst, `,"output":`...)
		if it.Output == nil {
			dst = append(dst, "null"...)
		} else {
			dst = q.text(dst, *it.Output)
		}
		dst = append(dst, `,"error":null,"approval_request_id":null`...)
	default:
		return dst, fmt.Errorf("protocol: unknown item type %q", it.Type)
	}
	return append(dst, '}'), nil
}

// sizeHint is about the encoded size of the item, for sizing buffers; z
// measures its long strings (nil: taken at their length).
func (it *Item) sizeHint(z *sizer) int {
	n := 160 + len(it.ID) + len(it.CallID) + len(it.Name) + z.text(it.Arguments)
	if it.Output != nil {
		n += z.text(*it.Output)
	}
	for i := range it.Content {
		n += 64 + z.text(it.Content[i].Text)
	}
	return n
}

// appendJSON appends the response with object "response" and non-nil
// collections ("output": [], "metadata": {}), as clients expect.
func (r *Response) appendJSON(dst []byte) ([]byte, error) {
	var err error
	dst = append(dst, `{"id":`...)
	dst = jsonstr.Append(dst, r.ID)
	dst = append(dst, `,"object":"response","created_at":`...)
	dst = strconv.AppendInt(dst, r.CreatedAt, 10)
	dst = append(dst, `,"completed_at":`...)
	dst = appendIntPtr(dst, r.CompletedAt)
	dst = append(dst, `,"status":`...)
	dst = jsonstr.Append(dst, r.Status)
	dst = append(dst, `,"incomplete_details":`...)
	if r.IncompleteDetails == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, `{"reason":`...)
		dst = jsonstr.Append(dst, r.IncompleteDetails.Reason)
		dst = append(dst, '}')
	}
	dst = append(dst, `,"model":`...)
	dst = jsonstr.Append(dst, r.Model)
	dst = append(dst, `,"previous_response_id":`...)
	dst = appendStringPtr(dst, r.PreviousResponseID)
	dst = append(dst, `,"instructions":`...)
	if dst, err = appendRaw(dst, r.Instructions); err != nil {
		return dst, err
	}
	dst = append(dst, `,"output":[`...)
	for i := range r.Output {
		if i > 0 {
			dst = append(dst, ',')
		}
		// Not through a cache: each item's strings are its own.
		if dst, err = r.Output[i].appendJSON(dst, nil); err != nil {
			return dst, err
		}
	}
	dst = append(dst, `],"error":`...)
	dst = r.Error.appendJSON(dst)
	dst = append(dst, `,"tools":`...)
	if dst, err = appendRaw(dst, r.Tools); err != nil {
		return dst, err
	}
	dst = append(dst, `,"tool_choice":`...)
	if dst, err = appendRaw(dst, r.ToolChoice); err != nil {
		return dst, err
	}
	dst = append(dst, `,"truncation":`...)
	dst = jsonstr.Append(dst, r.Truncation)
	dst = append(dst, `,"parallel_tool_calls":`...)
	dst = appendBool(dst, r.ParallelToolCalls)
	dst = append(dst, `,"text":`...)
	if dst, err = appendRaw(dst, r.Text); err != nil {
		return dst, err
	}
	for _, f := range [...]struct {
		name string
		v    *float64
	}{{`,"top_p":`, r.TopP}, {`,"presence_penalty":`, r.PresencePenalty}, {`,"frequency_penalty":`, r.FrequencyPenalty}} {
		dst = append(dst, f.name...)
		if dst, err = appendFloatPtr(dst, f.v); err != nil {
			return dst, err
		}
	}
	dst = append(dst, `,"top_logprobs":`...)
	dst = appendIntPtr(dst, r.TopLogprobs)
	dst = append(dst, `,"temperature":`...)
	if dst, err = appendFloatPtr(dst, r.Temperature); err != nil {
		return dst, err
	}
	dst = append(dst, `,"reasoning":`...)
	if dst, err = appendRaw(dst, r.Reasoning); err != nil {
		return dst, err
	}
	dst = append(dst, `,"user":`...)
	dst = appendStringPtr(dst, r.User)
	dst = append(dst, `,"usage":`...)
	dst = r.Usage.appendJSON(dst)
	dst = append(dst, `,"max_output_tokens":`...)
	dst = appendIntPtr(dst, r.MaxOutputTokens)
	dst = append(dst, `,"max_tool_calls":`...)
	dst = appendIntPtr(dst, r.MaxToolCalls)
	dst = append(dst, `,"store":`...)
	dst = appendBool(dst, r.Store)
	dst = append(dst, `,"background":`...)
	dst = appendBool(dst, r.Background)
	dst = append(dst, `,"service_tier":`...)
	dst = jsonstr.Append(dst, r.ServiceTier)
	dst = append(dst, `,"metadata":`...)
	if r.Metadata == nil {
		dst = append(dst, "{}"...)
	} else {
		dst = appendStringMap(dst, r.Metadata)
	}
	dst = append(dst, `,"safety_identifier":`...)
	dst = appendStringPtr(dst, r.SafetyIdentifier)
	dst = append(dst, `,"prompt_cache_key":`...)
	dst = appendStringPtr(dst, r.PromptCacheKey)
	if r.Conversation != nil {
		dst = append(dst, `,"conversation":{"id":`...)
		dst = jsonstr.Append(dst, r.Conversation.ID)
		dst = append(dst, '}')
	}
	return append(dst, '}'), nil
}

// sizeHint is about the encoded size of the response; z measures its long
// strings.
func (r *Response) sizeHint(z *sizer) int {
	n := 1024 + len(r.ID) + len(r.Model) + len(r.Instructions) + len(r.Tools) + len(r.ToolChoice) + len(r.Text) + len(r.Reasoning)
	for i := range r.Output {
		n += r.Output[i].sizeHint(z)
	}
	return n
}

// appendJSON appends the error object, or null for nil.
func (e *Error) appendJSON(dst []byte) []byte {
	if e == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, `{"code":`...)
	dst = jsonstr.Append(dst, e.Code)
	dst = append(dst, `,"message":`...)
	dst = jsonstr.Append(dst, e.Message)
	return append(dst, '}')
}

// appendJSON appends the usage object, or null for nil.
func (u *Usage) appendJSON(dst []byte) []byte {
	if u == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, `{"input_tokens":`...)
	dst = strconv.AppendInt(dst, u.InputTokens, 10)
	dst = append(dst, `,"input_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendInt(dst, u.InputTokensDetails.CachedTokens, 10)
	dst = append(dst, `},"output_tokens":`...)
	dst = strconv.AppendInt(dst, u.OutputTokens, 10)
	dst = append(dst, `,"output_tokens_details":{"reasoning_tokens":`...)
	dst = strconv.AppendInt(dst, u.OutputTokensDetails.ReasoningTokens, 10)
	dst = append(dst, `},"total_tokens":`...)
	dst = strconv.AppendInt(dst, u.TotalTokens, 10)
	return append(dst, '}')
}

// appendHead appends an event's opening: type and sequence number.
func appendHead(dst []byte, typ string, seq int64) []byte {
	if h := knownHead(typ); h != "" {
		dst = append(dst, h...)
	} else {
		dst = append(dst, `{"type":`...)
		dst = jsonstr.Append(dst, typ)
		dst = append(dst, `,"sequence_number":`...)
	}
	return strconv.AppendInt(dst, seq, 10)
}

// knownHead returns the opening appendHead writes before the sequence
// number for the event types the projector writes, "" for another: a
// constant copied rather than the type encoded for each of W3's 1,203
// frames.
func knownHead(typ string) string {
	switch typ {
	case EventOutputItemAdded:
		return `{"type":"response.output_item.added","sequence_number":`
	case EventOutputItemDone:
		return `{"type":"response.output_item.done","sequence_number":`
	case EventContentPartAdded:
		return `{"type":"response.content_part.added","sequence_number":`
	case EventContentPartDone:
		return `{"type":"response.content_part.done","sequence_number":`
	case EventOutputTextDelta:
		return `{"type":"response.output_text.delta","sequence_number":`
	case EventOutputTextDone:
		return `{"type":"response.output_text.done","sequence_number":`
	}
	return ""
}

// appendItemHead appends the head of an event about an item's content:
// appendHead, the item's id (through q) and its output index.
func appendItemHead(dst []byte, typ string, seq int64, itemID string, outputIndex int, q *quoteCache) []byte {
	dst = appendHead(dst, typ, seq)
	dst = append(dst, `,"item_id":`...)
	dst = q.id(dst, itemID)
	dst = append(dst, `,"output_index":`...)
	return strconv.AppendInt(dst, int64(outputIndex), 10)
}

// appendJSON appends the event; off is where the response starts in dst
// (the snapshot a lifecycle event carries, see seal).
func (ev *LifecycleEvent) appendJSON(dst []byte) (b []byte, off int, err error) {
	dst = appendHead(dst, ev.Type, ev.SequenceNumber)
	dst = append(dst, `,"response":`...)
	off = len(dst)
	if ev.Response == nil {
		dst = append(dst, "null"...)
	} else if dst, err = ev.Response.appendJSON(dst); err != nil {
		return dst, 0, err
	}
	return append(dst, '}'), off, nil
}

// appendJSON appends the event; q encodes the item's id and text.
func (ev *OutputItemEvent) appendJSON(dst []byte, q *quoteCache) ([]byte, error) {
	dst = appendHead(dst, ev.Type, ev.SequenceNumber)
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(ev.OutputIndex), 10)
	dst = append(dst, `,"item":`...)
	dst, err := ev.Item.appendJSON(dst, q)
	if err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}

// appendJSON appends the event; q encodes the item's id and text.
func (ev *ContentPartEvent) appendJSON(dst []byte, q *quoteCache) ([]byte, error) {
	dst = appendItemHead(dst, ev.Type, ev.SequenceNumber, ev.ItemID, ev.OutputIndex, q)
	dst = append(dst, `,"content_index":`...)
	dst = strconv.AppendInt(dst, int64(ev.ContentIndex), 10)
	dst = append(dst, `,"part":`...)
	dst, err := ev.Part.appendJSON(dst, q)
	if err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}

// appendJSON appends the event (delta and text omitted when nil); q
// encodes the item's id and text.
func (ev *OutputTextEvent) appendJSON(dst []byte, q *quoteCache) ([]byte, error) {
	dst = appendItemHead(dst, ev.Type, ev.SequenceNumber, ev.ItemID, ev.OutputIndex, q)
	dst = append(dst, `,"content_index":`...)
	dst = strconv.AppendInt(dst, int64(ev.ContentIndex), 10)
	if ev.Delta != nil {
		dst = append(dst, `,"delta":`...)
		dst = q.text(dst, *ev.Delta)
	}
	if ev.Text != nil {
		dst = append(dst, `,"text":`...)
		dst = q.text(dst, *ev.Text)
	}
	dst = append(dst, `,"logprobs":`...)
	dst, err := appendRawList(dst, ev.Logprobs)
	if err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}

// appendJSON appends the event (delta, name and arguments omitted when
// nil or empty); q encodes the item's id and arguments.
func (ev *FunctionCallArgumentsEvent) appendJSON(dst []byte, q *quoteCache) []byte {
	dst = appendItemHead(dst, ev.Type, ev.SequenceNumber, ev.ItemID, ev.OutputIndex, q)
	if ev.Delta != nil {
		dst = append(dst, `,"delta":`...)
		dst = q.text(dst, *ev.Delta)
	}
	if ev.Name != "" {
		dst = append(dst, `,"name":`...)
		dst = jsonstr.Append(dst, ev.Name)
	}
	if ev.Arguments != nil {
		dst = append(dst, `,"arguments":`...)
		dst = q.text(dst, *ev.Arguments)
	}
	return append(dst, '}')
}
