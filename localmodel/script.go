package localmodel

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Finish reasons in Chat Completions terms.
const (
	finishStop          = "stop"
	finishLength        = "length"
	finishContentFilter = "content_filter"
	finishToolCalls     = "tool_calls"
)

// turn is one message of a conversation, normalised from either API.
type turn struct {
	role     string // system, developer, user, assistant, tool
	text     string
	callID   string // tool result: the call answered; assistant: a call made
	toolName string // assistant tool call / tool result: the tool's name
	args     string // assistant tool call: its arguments
}

// request is what the script needs from a request of either API.
type request struct {
	model     string
	turns     []turn
	tools     []tool // the function tools offered, in order
	choice    toolChoice
	maxTokens int
	metadata  map[string]string
	stream    bool
}

// tool is a function tool a request offers.
type tool struct {
	name   string
	params json.RawMessage // its parameters' JSON Schema
}

// toolChoice is a request's tool_choice: mode "auto" (also when the request
// has none), "none", "required" or "function" (call the tool name).
type toolChoice struct {
	mode string
	name string
}

// parseToolChoice reads a tool_choice of either API: "none", "auto",
// "required", or a function named as {"type":"function","name":...}
// (Responses) or {"type":"function","function":{"name":...}} (Chat
// Completions). The choice must fit the tools offered.
func parseToolChoice(raw json.RawMessage, tools []tool) (toolChoice, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return toolChoice{mode: "auto"}, nil
	}
	var c toolChoice
	var obj struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &c.mode) == nil {
		if c.mode != "none" && c.mode != "auto" && c.mode != "required" {
			return c, fmt.Errorf("localmodel: tool_choice %q is not none, auto or required", c.mode)
		}
	} else if err := json.Unmarshal(raw, &obj); err != nil {
		return c, fmt.Errorf("localmodel: invalid tool_choice: %w", err)
	} else if obj.Type != "function" {
		return c, fmt.Errorf("localmodel: tool_choice of type %q is not supported (only function)", obj.Type)
	} else {
		c.mode, c.name = "function", cmp.Or(obj.Name, obj.Function.Name)
		if !slices.ContainsFunc(tools, func(t tool) bool { return t.name == c.name }) {
			return c, fmt.Errorf("localmodel: tool_choice names function %q, which the request's tools do not offer", c.name)
		}
	}
	if c.mode == "required" && len(tools) == 0 {
		return c, errors.New(`localmodel: tool_choice "required" without function tools`)
	}
	return c, nil
}

// reply is the scripted answer to a request.
type reply struct {
	tokens       []string // text tokens, or argument chunks of a tool call
	toolName     string   // set for a tool call
	callID       string
	finish       string
	promptTokens int
}

// text is the reply's whole text (or a tool call's whole arguments).
func (r *reply) text() string { return strings.Join(r.tokens, "") }

// tokenize splits s into tokens at spaces: each token is a word with the
// spaces before it, so joining the tokens gives s back.
func tokenize(s string) []string {
	var toks []string
	start := 0
	for i := 1; i < len(s); i++ {
		if s[i] == ' ' && s[i-1] != ' ' {
			toks = append(toks, s[start:i])
			start = i
		}
	}
	if start < len(s) {
		toks = append(toks, s[start:])
	}
	return toks
}

var jsonObject = regexp.MustCompile(`\{.*\}`)

// plan computes the deterministic reply to req; see the package doc.
func (o *Options) plan(req *request) *reply {
	r := &reply{finish: finishStop}
	calls := 0
	for _, t := range req.turns {
		r.promptTokens += len(tokenize(t.text)) + len(tokenize(t.args))
		if t.role == "assistant" && t.toolName != "" {
			calls++
		}
	}
	last := turn{}
	if n := len(req.turns); n > 0 {
		last = req.turns[n-1]
	}
	if name := pickTool(req, o.FollowTools); name != "" {
		r.toolName, r.callID = name, "call_"+strconv.Itoa(calls+1)
		r.finish = finishToolCalls
		r.tokens = chunkArgs(toolArgs(req, name))
	} else if last.role == "tool" {
		r.tokens = tokenize("Tool " + last.toolName + " returned: " + last.text)
	} else {
		r.tokens = tokenize(o.replyText(req, lastUser(req).text))
	}
	r.limit(req)
	return r
}

// contextLimit is req's context window in tokens: metadata
// "context_tokens", else Options.ContextTokens; 0 for none.
func (o *Options) contextLimit(req *request) int {
	if n, err := strconv.Atoi(req.metadata["context_tokens"]); err == nil && n > 0 {
		return n
	}
	return max(o.ContextTokens, 0)
}

// lastUser returns the last user message.
func lastUser(req *request) turn {
	for i := len(req.turns) - 1; i >= 0; i-- {
		if req.turns[i].role == "user" {
			return req.turns[i]
		}
	}
	return turn{}
}

// pickTool returns the tool the request should call next, or "" for a
// text reply; see the package doc.
func pickTool(req *request, follow bool) string {
	switch req.choice.mode {
	case "none":
		return ""
	case "function":
		return req.choice.name
	case "required":
		if name := mentionedTool(req, lastUser(req).text); name != "" {
			return name
		}
		return req.tools[0].name
	}
	at := -1
	for i, t := range req.turns {
		if t.role == "user" {
			at = i
		}
	}
	if at < 0 {
		return ""
	}
	results := 0
	for _, t := range req.turns[at+1:] {
		if t.role == "tool" {
			results++
		}
	}
	want := 1
	if n, err := strconv.Atoi(req.metadata["tool_calls"]); err == nil && n >= 0 {
		want = n
	}
	if results >= want {
		return ""
	}
	if name := mentionedTool(req, req.turns[at].text); name != "" {
		return name
	}
	if (follow || req.metadata["follow_tools"] == "true") && len(req.tools) > 0 {
		return req.tools[0].name
	}
	return ""
}

// mentionedTool returns the tool named by metadata or mentioned in text.
func mentionedTool(req *request, text string) string {
	if name := req.metadata["tool_call"]; name != "" {
		for _, t := range req.tools {
			if t.name == name {
				return name
			}
		}
	}
	for _, t := range req.tools {
		if t.name != "" && strings.Contains(text, t.name) {
			return t.name
		}
	}
	return ""
}

// toolArgs returns the arguments of a call of tool name: metadata
// "tool_arguments"; else, when metadata "tool_call" names the tool or the
// last user message mentions it, the first JSON object in that message;
// else a minimal value valid for the tool's parameters schema.
func toolArgs(req *request, name string) string {
	if a := req.metadata["tool_arguments"]; a != "" {
		return a
	}
	if user := lastUser(req).text; req.metadata["tool_call"] == name || strings.Contains(user, name) {
		if m := jsonObject.FindString(user); m != "" && json.Valid([]byte(m)) {
			return m
		}
	}
	for _, t := range req.tools {
		if t.name == name {
			return schemaArguments(t.params)
		}
	}
	return "{}"
}

// chunkArgs splits a tool call's arguments into small deltas.
func chunkArgs(args string) []string {
	var out []string
	for len(args) > 8 {
		out = append(out, args[:8])
		args = args[8:]
	}
	return append(out, args)
}

// replyText returns the text reply to a user message.
func (o *Options) replyText(req *request, user string) string {
	if s, ok := req.metadata["reply"]; ok {
		return s
	}
	if o.Reply != nil {
		return o.Reply(user)
	}
	return "Echo: " + user
}

// limit applies max_tokens and a forced finish reason.
func (r *reply) limit(req *request) {
	if r.toolName == "" && req.maxTokens > 0 && len(r.tokens) > req.maxTokens {
		r.tokens, r.finish = r.tokens[:req.maxTokens], finishLength
		return
	}
	if f := req.metadata["finish_reason"]; r.toolName == "" && (f == finishLength || f == finishContentFilter) {
		r.finish = f
	}
}

// tokenDelay is the pause before each token for req.
func (o *Options) tokenDelay(req *request) time.Duration {
	if v, ok := req.metadata["token_delay_ms"]; ok {
		if ms, err := strconv.Atoi(v); err == nil && ms >= 0 {
			return time.Duration(ms) * time.Millisecond
		}
	}
	switch {
	case o.TokenDelay < 0:
		return 0
	case o.TokenDelay > 0:
		return o.TokenDelay
	}
	return DefaultTokenDelay
}
