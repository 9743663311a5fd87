package agent

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"sync"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// API selects the wire protocol a ChatAgent speaks.
type API string

// The APIs ChatAgent speaks.
const (
	// APIChatCompletions is POST /chat/completions (the default: every
	// OpenAI-compatible server has it).
	APIChatCompletions API = "chat_completions"
	// APIResponses is POST /responses.
	APIResponses API = "responses"
)

// Defaults of Options.
const (
	DefaultModel        = "gpt-4o-mini"
	DefaultMaxToolCalls = 8
	DefaultRetries      = 3
	DefaultBackoff      = 500 * time.Millisecond
	DefaultMaxBackoff   = 10 * time.Second
	DefaultCallTimeout  = 2 * time.Minute
)

// Errors of ChatAgent turns.
var (
	// ErrModel marks a model call that failed after its retries (or with a
	// status that is not retried, such as 400 or 401).
	ErrModel = errors.New("agent: model call failed")
	// ErrToolCallLimit marks a turn that asked for more tool calls than
	// Options.MaxToolCalls.
	ErrToolCallLimit = errors.New("agent: tool call limit reached")
)

// RetryPolicy says how a ChatAgent retries failed model calls: server
// errors (5xx), 408, 409, 429, network errors, broken streams and
// per-call timeouts. The zero value means DefaultRetries retries with
// exponential backoff from DefaultBackoff up to DefaultMaxBackoff.
type RetryPolicy struct {
	// Retries is the number of attempts after the first; negative means none.
	Retries int
	// Backoff is the wait before the first retry; it doubles each time.
	Backoff time.Duration
	// MaxBackoff caps the wait.
	MaxBackoff time.Duration
}

// Options configures a ChatAgent. The zero value works: OPENAI_BASE_URL and
// OPENAI_API_KEY from the environment, DefaultModel, Chat Completions.
type Options struct {
	// Name identifies the agent (handoffs, update sources); default "assistant".
	Name string
	// Model is the model id sent to the server (default DefaultModel).
	Model string
	// BaseURL is the API base, e.g. "http://127.0.0.1:8081/v1" (default:
	// OPENAI_BASE_URL, else OpenAI's).
	BaseURL string
	// APIKey is the bearer token (default: OPENAI_API_KEY).
	APIKey string
	// HTTPClient makes the requests (default http.DefaultClient's behaviour).
	HTTPClient *http.Client
	// API selects Chat Completions (default) or the Responses API.
	API API
	// Instructions is the system prompt, sent first in every model call.
	Instructions string
	// Tools are the functions the model may call; the agent runs them.
	Tools []*Tool
	// MaxToolCalls caps the tool calls of one turn (default
	// DefaultMaxToolCalls); one more fails the turn with ErrToolCallLimit.
	MaxToolCalls int
	// MaxOutputTokens caps each model reply (0: the server's default).
	MaxOutputTokens int
	// Metadata is sent with every model request.
	Metadata map[string]string
	// MetadataFrom, when set, is called for every model request with the
	// turn's ctx; its entries are sent as metadata too (for example a
	// host's per-request metadata such as token_delay_ms); they win over
	// Metadata's.
	MetadataFrom func(ctx context.Context) map[string]string
	// Retry is the retry policy for model calls.
	Retry RetryPolicy
	// CallTimeout bounds one model call attempt (default DefaultCallTimeout).
	CallTimeout time.Duration
}

// ChatAgent is an Agent backed by an OpenAI-compatible model: each turn
// sends the conversation to the model, streams the reply's tokens as
// UpdateTextDelta, runs the tools the model calls (UpdateToolCall,
// UpdateToolResult) and calls the model again until it answers in text or
// the tool-call limit is reached, and ends with UpdateText (the whole reply)
// and UpdateDone (the turn's usage and, when cut short, the reason). It is
// safe for concurrent use; a Session keeps the conversation between turns.
//
// The caller's settings for a request (ModelParams: client tools,
// tool_choice, sampling, output format) come in the ctx, as the Params of
// its workflow.Invocation, and apply to every model call of the turn. A
// call of a client tool ends the turn with an UpdateFunctionCall: the
// caller runs the tool and answers in its next input.
type ChatAgent struct {
	opts   Options
	client openai.Client
	tools  map[string]*Tool

	mu    sync.Mutex
	usage Usage // over all turns
}

var _ Agent = (*ChatAgent)(nil)

// NewChatAgent returns a ChatAgent; a nil opts means the defaults.
func NewChatAgent(opts *Options) (*ChatAgent, error) {
	a := &ChatAgent{tools: map[string]*Tool{}}
	if opts != nil {
		a.opts = *opts
	}
	o := &a.opts
	o.Name = orDefault(o.Name, "assistant")
	o.Model = orDefault(o.Model, DefaultModel)
	o.API = API(orDefault(string(o.API), string(APIChatCompletions)))
	if o.API != APIChatCompletions && o.API != APIResponses {
		return nil, fmt.Errorf("agent: Options.API: unknown API %q", o.API)
	}
	for _, t := range o.Tools {
		if t == nil || t.Name == "" {
			return nil, fmt.Errorf("agent: Options.Tools: nil or unnamed tool")
		}
		if _, dup := a.tools[t.Name]; dup {
			return nil, fmt.Errorf("agent: Options.Tools: duplicate tool %q", t.Name)
		}
		a.tools[t.Name] = t
	}
	if o.MaxToolCalls <= 0 {
		o.MaxToolCalls = DefaultMaxToolCalls
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	a.client = openai.NewClient(a.clientOptions()...)
	return a, nil
}

// clientOptions are the openai-go options; retries are ours, not the SDK's.
func (a *ChatAgent) clientOptions() []option.RequestOption {
	opts := []option.RequestOption{option.WithMaxRetries(0)}
	if a.opts.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(a.opts.BaseURL))
	}
	if a.opts.APIKey != "" {
		opts = append(opts, option.WithAPIKey(a.opts.APIKey))
	}
	if a.opts.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(a.opts.HTTPClient))
	}
	return opts
}

// orDefault returns s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Name returns the agent's name.
func (a *ChatAgent) Name() string { return a.opts.Name }

// Usage returns the tokens used by all turns so far.
func (a *ChatAgent) Usage() Usage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.usage
}

// Run runs one turn; see ChatAgent. With a Session, the conversation
// (without the instructions) carries over to the next turn.
func (a *ChatAgent) Run(ctx context.Context, s *Session, input []Message) iter.Seq2[Update, error] {
	return func(yield func(Update, error) bool) {
		if s != nil {
			if err := s.Begin(); err != nil {
				yield(Update{}, err)
				return
			}
			defer s.End()
		}
		t := &chatTurn{a: a, ctx: ctx, yield: yield, conv: a.history(s), params: paramsFrom(ctx)}
		known := map[string]bool{}
		for _, it := range t.conv {
			for _, c := range it.calls {
				known[c.ID] = true
			}
		}
		t.conv = append(t.conv, fromMessages(known, input)...)
		err := t.run()
		a.mu.Lock()
		a.usage.Add(t.usage)
		a.mu.Unlock()
		if s != nil {
			s.SetState(chatState{conv: t.conv})
		}
		if err != nil && !errors.Is(err, errStopped) {
			yield(Update{}, err)
		}
	}
}

// chatState is a ChatAgent's Session state: the conversation so far.
type chatState struct{ conv []convItem }

// history returns the conversation kept in s.
func (a *ChatAgent) history(s *Session) []convItem {
	if s == nil {
		return nil
	}
	st, _ := s.State().(chatState)
	return append([]convItem(nil), st.conv...)
}
