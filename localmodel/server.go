package localmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultTokenDelay is the pause before each token when neither the request
// (metadata "token_delay_ms") nor Options.TokenDelay sets one.
const DefaultTokenDelay = 20 * time.Millisecond

// DefaultModel is the model id /v1/models lists when Options.Models is empty.
const DefaultModel = "local-echo"

// maxBody caps request bodies.
const maxBody = 8 << 20

// Options configures the handler; the zero value is ready to use.
type Options struct {
	// Models are the ids listed by /v1/models (default: DefaultModel). Any
	// model id is accepted in requests.
	Models []string
	// TokenDelay is the pause before each token when the request does not
	// set metadata "token_delay_ms": 0 means DefaultTokenDelay, a negative
	// value no pause.
	TokenDelay time.Duration
	// Reply, when set, computes the text reply to the last user message
	// (instead of "Echo: <text>"). It must be deterministic.
	Reply func(user string) string
	// FollowTools makes every request follow tools as metadata
	// "follow_tools" = "true" does (see the package doc): offered tools
	// and an unscripted user message, the model calls the first tool, as
	// a real model given a tool for the question would. For clients that
	// send their own tools and no metadata, such as conformance suites.
	FollowTools bool
	// ContextTokens, when > 0, is the context window of every request
	// that does not set metadata "context_tokens": a request whose
	// prompt tokens exceed it is refused (see the package doc).
	ContextTokens int
}

// handler serves the local model API.
type handler struct {
	opts Options
	mux  *http.ServeMux
	ids  atomic.Int64 // response ids
}

// NewHandler returns the local model server's handler; see the package doc.
// A nil opts means the defaults.
func NewHandler(opts *Options) http.Handler {
	h := &handler{mux: http.NewServeMux()}
	if opts != nil {
		h.opts = *opts
	}
	for _, prefix := range []string{"", "/v1"} {
		h.mux.HandleFunc("POST "+prefix+"/chat/completions", h.chat)
		h.mux.HandleFunc("POST "+prefix+"/responses", h.responses)
		h.mux.HandleFunc("GET "+prefix+"/models", h.models)
	}
	return h
}

// ServeHTTP routes the request.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// nextID returns a new id with prefix.
func (h *handler) nextID(prefix string) string {
	return fmt.Sprintf("%s%06d", prefix, h.ids.Add(1))
}

// models lists the configured model ids.
func (h *handler) models(w http.ResponseWriter, _ *http.Request) {
	ids := h.opts.Models
	if len(ids) == 0 {
		ids = []string{DefaultModel}
	}
	data := make([]map[string]any, 0, len(ids))
	for _, id := range ids {
		data = append(data, map[string]any{"id": id, "object": "model", "created": 0, "owned_by": "localmodel"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// decode reads a JSON request body into v, answering 400 on failure.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "localmodel: invalid JSON body: "+err.Error())
		return false
	}
	return true
}

// writeJSON writes v as a JSON response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes an OpenAI-format error body.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": nil, "code": nil,
	}})
}

// writeOverflow refuses a request longer than its context window as
// OpenAI does: status 400, code context_length_exceeded.
func writeOverflow(w http.ResponseWriter, limit, prompt int) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
		"message": fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. "+
			"Please reduce the length of the messages.", limit, prompt),
		"type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded",
	}})
}

// sse writes server-sent events, one write and flush per event.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// newSSE starts an event stream.
func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, rc: http.NewResponseController(w)}
}

// send writes one event; name may be empty (Chat Completions chunks).
func (s *sse) send(name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("localmodel: encode event: %w", err)
	}
	var b strings.Builder
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	return s.raw(b.String())
}

// raw writes text and flushes.
func (s *sse) raw(text string) error {
	if _, err := s.w.Write([]byte(text)); err != nil {
		return err
	}
	return s.rc.Flush()
}

// pause waits d before a token, or until ctx is done.
func pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// usage is the token accounting of a reply.
type usage struct{ prompt, completion int }

func (r *reply) usage() usage { return usage{prompt: r.promptTokens, completion: len(r.tokens)} }
