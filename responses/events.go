package responses

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Page bounds of GET /v1/responses/{id}/events.
const (
	eventsLimitDefault = 100
	eventsLimitMax     = 1000
)

// eventList is GET /v1/responses/{id}/events: a page of a response's
// event log as JSON, for inspection tools (any response, streamed or not;
// it does not wait for more).
type eventList struct {
	Object  string      `json:"object"`
	Data    []eventView `json:"data"`
	HasMore bool        `json:"has_more"`
}

type eventView struct {
	SequenceNumber int64  `json:"sequence_number"`
	Type           string `json:"type"`
	// Step is the run step whose commit wrote the event (-1: published
	// live before its commit; 0: written by the create).
	Step int64 `json:"step"`
	// Event is the event as a stream sends it (its SSE data).
	Event json.RawMessage `json:"event"`
}

// handleEvents serves GET /v1/responses/{id}/events?after=N&limit=M.
func (s *server) handleEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	after, limit := int64(-1), eventsLimitDefault
	for key, vs := range r.URL.Query() {
		v := vs[0]
		switch key {
		case "after":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < -1 || len(vs) != 1 {
				s.writeError(w, r, badRequest("after", codeInvalidValue,
					"Invalid value for 'after': expected a sequence number (an integer >= -1), got '%s'.", truncate(v, 64)))
				return
			}
			after = n
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > eventsLimitMax || len(vs) != 1 {
				s.writeError(w, r, badRequest("limit", codeInvalidValue,
					"Invalid value for 'limit': expected an integer from 1 to %d, got '%s'.", eventsLimitMax, truncate(v, 64)))
				return
			}
			limit = n
		default:
			param := truncate(key, 64)
			if param == "" {
				param = "query"
			}
			s.writeError(w, r, badRequest(param, "unknown_parameter", "Unknown parameter: '%s'.", param))
			return
		}
	}
	evs, more, err := s.host.EventPage(r.Context(), id, ownerFrom(r.Context()), after, limit)
	if err != nil {
		s.writeError(w, r, mapNotFound(err, id))
		return
	}
	out := eventList{Object: "list", Data: make([]eventView, 0, len(evs)), HasMore: more}
	for _, ev := range evs {
		payload := json.RawMessage(ev.Payload)
		if !json.Valid(payload) {
			b, _ := json.Marshal(string(ev.Payload)) // not JSON: sent as a string
			payload = b
		}
		out.Data = append(out.Data, eventView{SequenceNumber: ev.Seq, Type: ev.Type, Step: ev.Step, Event: payload})
	}
	writeJSON(w, http.StatusOK, out)
}
