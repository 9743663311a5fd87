package responses

import (
	"net/http"
	"strconv"

	"github.com/superstep/superstep/protocol"
)

// getQuery are the parameters of GET /v1/responses/{id}.
type getQuery struct {
	stream        bool
	startingAfter int64 // -1: from sequence 0
}

// parseGetQuery reads stream and starting_after from the query and from a
// JSON body: openai-go's GetStreaming sends {"stream":true} in the body of
// the GET with no Content-Type (responses-api.md §0.1), the other SDKs use
// ?stream=true. include[] / include and include_obfuscation are accepted
// and have nothing to change here.
func parseGetQuery(r *http.Request, body []byte) (getQuery, error) {
	q := getQuery{startingAfter: -1}
	vals := r.URL.Query()
	if v := vals.Get("stream"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return q, badRequest("stream", codeInvalidValue, "Invalid value for 'stream': expected true or false, got '%s'.", truncate(v, 64))
		}
		q.stream = b
	}
	if v := vals.Get("starting_after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < -1 {
			return q, badRequest("starting_after", codeInvalidValue,
				"Invalid value for 'starting_after': expected a sequence number (an integer >= 0), got '%s'.", truncate(v, 64))
		}
		q.startingAfter = n
	}
	return q, parseGetBody(body, &q)
}

// parseGetBody reads stream (and starting_after) from a GET body (see
// protocol.ReadGetBody); a flag in the body or the query turns streaming on.
func parseGetBody(body []byte, q *getQuery) error {
	stream, after, err := protocol.ReadGetBody(body)
	if err != nil {
		return requestError(err)
	}
	q.stream = q.stream || stream
	if after != nil {
		q.startingAfter = *after
	}
	return nil
}

// handleGet serves GET /v1/responses/{id}: the Response, or with stream
// its events after starting_after (replay, then live until the terminal
// event). Only a response created with stream:true can be streamed.
func (s *server) handleGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	body, err := readBody(w, r, s.opts.MaxBodyBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q, err := parseGetQuery(r, body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	owner := ownerFrom(r.Context())
	ctx, cancel := s.storeContext(r)
	// The stored request is read only to stream: a poll of a background
	// response shows its snapshot, and the request may be megabytes.
	get := s.host.GetView
	if q.stream {
		get = s.host.Get
	}
	resp, err := get(ctx, id, owner)
	cancel()
	if err != nil {
		s.writeError(w, r, mapNotFound(err, id))
		return
	}
	if !q.stream {
		writeRawJSON(w, http.StatusOK, resp.Snapshot)
		return
	}
	if !protocol.RequestStreamed(resp.Request) {
		s.writeError(w, r, badRequest("stream", codeInvalidValue,
			"Response '%s' was not created with stream=true, so it cannot be streamed; retrieve it without stream.", id))
		return
	}
	release, ok := s.acquireStream(w, r)
	if !ok {
		return
	}
	defer release()
	s.streamEvents(w, r, id, owner, q.startingAfter, nil)
}
