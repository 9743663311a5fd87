package localmodel

import (
	"encoding/json"
	"regexp"
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
	tools     []string
	maxTokens int
	metadata  map[string]string
	stream    bool
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
	if name := pickTool(req); name != "" {
		r.toolName, r.callID = name, "call_"+strconv.Itoa(calls+1)
		r.finish = finishToolCalls
		r.tokens = chunkArgs(toolArgs(req, lastUser(req)))
	} else if last.role == "tool" {
		r.tokens = tokenize("Tool " + last.toolName + " returned: " + last.text)
	} else {
		r.tokens = tokenize(o.replyText(req, lastUser(req).text))
	}
	r.limit(req)
	return r
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

// pickTool returns the tool the request should call next, or "": the tool
// metadata "tool_call" names or the last user message mentions, as long as
// fewer than metadata "tool_calls" (default 1) tool results follow that
// user message.
func pickTool(req *request) string {
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
	return mentionedTool(req, req.turns[at].text)
}

// mentionedTool returns the tool named by metadata or mentioned in text.
func mentionedTool(req *request, text string) string {
	if name := req.metadata["tool_call"]; name != "" {
		for _, t := range req.tools {
			if t == name {
				return name
			}
		}
	}
	for _, t := range req.tools {
		if t != "" && strings.Contains(text, t) {
			return t
		}
	}
	return ""
}

// toolArgs returns the scripted arguments of a tool call.
func toolArgs(req *request, last turn) string {
	if a := req.metadata["tool_arguments"]; a != "" {
		return a
	}
	if m := jsonObject.FindString(last.text); m != "" && json.Valid([]byte(m)) {
		return m
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
