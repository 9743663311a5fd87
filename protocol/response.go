package protocol

import (
	"encoding/json"
	"time"
)

// Response statuses.
const (
	StatusQueued     = "queued"
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusFailed     = "failed"
	StatusCancelled  = "cancelled"
	StatusIncomplete = "incomplete"
)

// Response is the Response object (object "response"). Every field is always
// emitted; nullable ones as null.
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	CompletedAt        *int64             `json:"completed_at"`
	Status             string             `json:"status"`
	IncompleteDetails  *IncompleteDetails `json:"incomplete_details"`
	Model              string             `json:"model"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Instructions       json.RawMessage    `json:"instructions"`
	Output             []Item             `json:"output"`
	Error              *Error             `json:"error"`
	Tools              json.RawMessage    `json:"tools"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Truncation         string             `json:"truncation"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	Text               json.RawMessage    `json:"text"`
	TopP               *float64           `json:"top_p"`
	PresencePenalty    *float64           `json:"presence_penalty"`
	FrequencyPenalty   *float64           `json:"frequency_penalty"`
	TopLogprobs        *int64             `json:"top_logprobs"`
	Temperature        *float64           `json:"temperature"`
	Reasoning          json.RawMessage    `json:"reasoning"`
	User               *string            `json:"user"`
	Usage              *Usage             `json:"usage"`
	MaxOutputTokens    *int64             `json:"max_output_tokens"`
	MaxToolCalls       *int64             `json:"max_tool_calls"`
	Store              bool               `json:"store"`
	Background         bool               `json:"background"`
	ServiceTier        string             `json:"service_tier"`
	Metadata           map[string]string  `json:"metadata"`
	SafetyIdentifier   *string            `json:"safety_identifier"`
	PromptCacheKey     *string            `json:"prompt_cache_key"`
	// Conversation is the conversation the response is a turn of; absent
	// for a response of none.
	Conversation *ConversationRef `json:"conversation,omitempty"`
}

// IncompleteDetails says why a response is incomplete.
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// Error is a response's error (status failed).
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Usage is a response's token usage.
type Usage struct {
	InputTokens         int64               `json:"input_tokens"`
	InputTokensDetails  InputTokensDetails  `json:"input_tokens_details"`
	OutputTokens        int64               `json:"output_tokens"`
	OutputTokensDetails OutputTokensDetails `json:"output_tokens_details"`
	TotalTokens         int64               `json:"total_tokens"`
}

// InputTokensDetails breaks input tokens down.
type InputTokensDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// OutputTokensDetails breaks output tokens down.
type OutputTokensDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// MarshalJSON emits the response with object "response" and non-nil
// collections ("output": [], "metadata": {}), as clients expect.
func (r Response) MarshalJSON() ([]byte, error) {
	return r.appendJSON(make([]byte, 0, r.sizeHint(&sizer{})))
}

// NewResponseParams are the arguments of NewResponse.
type NewResponseParams struct {
	ID                 string
	Model              string
	Status             string
	CreatedAt          time.Time
	PreviousResponseID string
	Instructions       *string
	Metadata           map[string]string
	Background         bool
	Store              bool
	// Request is the raw create request; the echo fields (tools,
	// temperature, text, ...) are copied from it, with the documented
	// defaults where it omits them or cannot be parsed.
	Request []byte
	// Conversation is the conversation the response is a turn of ("" for
	// none).
	Conversation string
}

// requestEcho is the subset of a create request echoed in the Response.
type requestEcho struct {
	Tools             json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	Truncation        *string         `json:"truncation"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	Text              json.RawMessage `json:"text"`
	TopP              *float64        `json:"top_p"`
	PresencePenalty   *float64        `json:"presence_penalty"`
	FrequencyPenalty  *float64        `json:"frequency_penalty"`
	TopLogprobs       *int64          `json:"top_logprobs"`
	Temperature       *float64        `json:"temperature"`
	Reasoning         json.RawMessage `json:"reasoning"`
	User              *string         `json:"user"`
	MaxOutputTokens   *int64          `json:"max_output_tokens"`
	MaxToolCalls      *int64          `json:"max_tool_calls"`
	ServiceTier       *string         `json:"service_tier"`
	SafetyIdentifier  *string         `json:"safety_identifier"`
	PromptCacheKey    *string         `json:"prompt_cache_key"`
}

// NewResponse returns the Response object of a newly created response:
// output empty, usage null, echo fields from the request or their defaults.
func NewResponse(p *NewResponseParams) *Response {
	var e requestEcho
	_ = json.Unmarshal(p.Request, &e) // R validated it; defaults on failure
	r := &Response{
		ID:                p.ID,
		Object:            "response",
		CreatedAt:         p.CreatedAt.Unix(),
		Status:            p.Status,
		Model:             p.Model,
		Output:            []Item{},
		Tools:             normalizeTools(rawOr(e.Tools, `[]`)),
		ToolChoice:        rawOr(e.ToolChoice, `"auto"`),
		Truncation:        strOr(e.Truncation, "disabled"),
		ParallelToolCalls: e.ParallelToolCalls == nil || *e.ParallelToolCalls,
		Text:              rawOr(e.Text, `{"format":{"type":"text"}}`),
		TopP:              floatOr(e.TopP, 1),
		PresencePenalty:   floatOr(e.PresencePenalty, 0),
		FrequencyPenalty:  floatOr(e.FrequencyPenalty, 0),
		TopLogprobs:       intOr(e.TopLogprobs, 0),
		Temperature:       floatOr(e.Temperature, 1),
		Reasoning:         rawOr(e.Reasoning, `{"effort":null,"summary":null}`),
		User:              e.User,
		MaxOutputTokens:   e.MaxOutputTokens,
		MaxToolCalls:      e.MaxToolCalls,
		Store:             p.Store,
		Background:        p.Background,
		ServiceTier:       strOr(e.ServiceTier, "default"),
		Metadata:          map[string]string{},
		SafetyIdentifier:  e.SafetyIdentifier,
		PromptCacheKey:    e.PromptCacheKey,
	}
	if p.PreviousResponseID != "" {
		r.PreviousResponseID = &p.PreviousResponseID
	}
	if p.Conversation != "" {
		r.Conversation = &ConversationRef{ID: p.Conversation}
	}
	if p.Instructions != nil {
		r.Instructions, _ = json.Marshal(*p.Instructions)
	}
	for k, v := range p.Metadata {
		r.Metadata[k] = v
	}
	return r
}

// normalizeTools returns the echo of a request's tools as the Responses
// API shapes it: a function tool without strict, description or
// parameters gets strict true (the API's default) and description and
// parameters null, so every tool in the echo has the fields the spec's
// schema requires. Anything else (hosted tools, an unparseable value) is
// echoed as sent.
func normalizeTools(raw json.RawMessage) json.RawMessage {
	var tools []json.RawMessage
	if json.Unmarshal(raw, &tools) != nil {
		return raw
	}
	changed := false
	for i, t := range tools {
		var fields map[string]json.RawMessage
		if json.Unmarshal(t, &fields) != nil || string(fields["type"]) != `"function"` {
			continue
		}
		filled := false
		for key, def := range map[string]string{"strict": "true", "description": "null", "parameters": "null"} {
			if _, ok := fields[key]; !ok || (key == "strict" && IsNull(fields[key])) {
				fields[key] = json.RawMessage(def)
				filled = true
			}
		}
		if !filled {
			continue
		}
		b, err := json.Marshal(fields)
		if err != nil {
			continue
		}
		tools[i], changed = b, true
	}
	if !changed {
		return raw
	}
	b, err := json.Marshal(tools)
	if err != nil {
		return raw
	}
	return b
}

// Clone returns a deep enough copy of r to change its status, output,
// usage and incomplete details without touching r.
func (r *Response) Clone() *Response { return r.clone(0) }

// clone is Clone with room for n more output items.
func (r *Response) clone(n int) *Response {
	c := *r
	c.Output = append(make([]Item, 0, len(r.Output)+n), r.Output...)
	if r.Usage != nil {
		u := *r.Usage
		c.Usage = &u
	}
	if r.IncompleteDetails != nil {
		d := *r.IncompleteDetails
		c.IncompleteDetails = &d
	}
	return &c
}

// Finish sets the terminal fields of r: status, completed_at (completed
// only), usage (zero unless set before), error for failed, and
// incomplete_details only for incomplete (set it before).
func (r *Response) Finish(status string, at time.Time, e *Error) {
	r.Status = status
	if status == StatusCompleted {
		ts := at.Unix()
		r.CompletedAt = &ts
	}
	if r.Usage == nil {
		r.Usage = &Usage{}
	}
	if status == StatusFailed {
		r.Error = e
	}
	if status != StatusIncomplete {
		r.IncompleteDetails = nil
	}
}

// Add adds o to u, details included.
func (u *Usage) Add(o Usage) {
	u.InputTokens += o.InputTokens
	u.InputTokensDetails.CachedTokens += o.InputTokensDetails.CachedTokens
	u.OutputTokens += o.OutputTokens
	u.OutputTokensDetails.ReasoningTokens += o.OutputTokensDetails.ReasoningTokens
	u.TotalTokens += o.TotalTokens
}

func rawOr(v json.RawMessage, def string) json.RawMessage {
	if len(v) == 0 || string(v) == "null" {
		return json.RawMessage(def)
	}
	return v
}

func strOr(v *string, def string) string {
	if v == nil {
		return def
	}
	return *v
}

func floatOr(v *float64, def float64) *float64 {
	if v == nil {
		return &def
	}
	return v
}

func intOr(v *int64, def int64) *int64 {
	if v == nil {
		return &def
	}
	return v
}
