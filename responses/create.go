package responses

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
)

// handleCreate serves POST /v1/responses. The reply depends on the flags:
// stream → SSE from sequence 0 following the log until the terminal event;
// background → the created Response at once; otherwise the handler waits
// for the terminal status and replies with the final Response. The run
// does not depend on this connection: a client that goes away leaves it
// running on the host.
func (s *server) handleCreate(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r, s.opts.MaxBodyBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := parseCreate(body, s.opts.MaxInputItems)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p.Owner = ownerFrom(r.Context())
	// A key seen before (same owner, same body, within 24h) makes Create
	// return that response: it is replied to as this request asks (a
	// stream from sequence 0, the Response as stored, or its end).
	p.IdempotencyKey = r.Header.Get("Idempotency-Key")
	if p.Stream {
		// Before anything is stored: a refused stream creates nothing, so
		// the SDK's retry of the 429 cannot make a second response.
		release, ok := s.acquireStream(w, r)
		if !ok {
			return
		}
		defer release()
	}
	ctx, cancel := s.storeContext(r)
	if !p.Stream && !p.Background {
		// A blocking request: its response's id reaches the client only
		// with the finished response, so the host may write its create
		// with its first commit (host.CreateBlocking).
		b, err := s.host.CreateBlocking(ctx, p)
		cancel()
		if err != nil {
			s.writeError(w, r, createError(err, p))
			return
		}
		final, err := b.Wait(r.Context())
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeRawJSON(w, http.StatusOK, final.Snapshot)
		return
	}
	resp, err := s.host.Create(ctx, p)
	cancel()
	if err != nil {
		s.writeError(w, r, createError(err, p))
		return
	}
	s.replyStarted(w, r, resp, p.Owner, p.Stream, p.Background)
}

// replyStarted answers a request that started resp (a create, or a fork
// of a run) as it asked: its events from sequence 0 (stream), the Response
// as stored (background), or the Response once it ends.
func (s *server) replyStarted(w http.ResponseWriter, r *http.Request, resp *store.Response, owner string, stream, background bool) {
	switch {
	case stream:
		s.streamEvents(w, r, resp.ID, owner, -1, resp)
	case background:
		writeRawJSON(w, http.StatusOK, resp.Snapshot)
	default:
		// resp is the response just started: its owner's, and its
		// run is waited for without reading it back first.
		final, err := s.host.WaitStarted(r.Context(), resp)
		if err != nil {
			s.writeError(w, r, mapNotFound(err, resp.ID))
			return
		}
		writeRawJSON(w, http.StatusOK, final.Snapshot)
	}
}

// createError adds what the request knows to the host's error: which model
// or previous response was not found.
func createError(err error, p *host.CreateParams) error {
	switch {
	case errors.Is(err, host.ErrModelNotFound):
		return &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "model_not_found", Param: "model",
			Message: fmt.Sprintf("The model '%s' does not exist. GET /v1/models lists the hosted workflows and agents.", truncate(p.Model, 200))}
	case p.PreviousResponseID != "" && (errors.Is(err, store.ErrNotFound) || isInputError(err, "previous_response_id", "not_found")):
		// OpenAI answers an unknown previous_response_id with a 400: the
		// URL is fine, a body field is not.
		return badRequest("previous_response_id", "previous_response_not_found",
			"Previous response with id '%s' not found.", truncate(p.PreviousResponseID, 200))
	case errors.Is(err, store.ErrConflict):
		return &apiError{Status: http.StatusConflict, Type: typeInvalidRequest, Code: "conflict", Param: "previous_response_id",
			Message: continuationConflict(err, p)}
	}
	return err
}

// continuationConflict is conflictMessage for a create naming the previous
// response it could not continue.
func continuationConflict(err error, p *host.CreateParams) string {
	if p.PreviousResponseID == "" {
		return conflictMessage(err)
	}
	return fmt.Sprintf("Cannot continue from response '%s': %s", truncate(p.PreviousResponseID, 200), conflictMessage(err))
}

func isInputError(err error, param, code string) bool {
	var ie *host.InputError
	return errors.As(err, &ie) && ie.Param == param && ie.Code == code
}
