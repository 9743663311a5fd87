package responses

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
)

// Error types of the OpenAI wire format.
const (
	typeInvalidRequest = "invalid_request_error"
	typeServer         = "server_error"
)

// apiError is an error with everything an OpenAI error body needs. The
// handlers build one wherever they know more than a sentinel says (the id,
// the param); writeError maps the rest.
type apiError struct {
	Status  int
	Type    string
	Code    string
	Param   string
	Message string
	// RetryAfter, when > 0, is sent as Retry-After (seconds): the SDKs
	// wait that long before their automatic retry. Every 503 gets at
	// least 1.
	RetryAfter int
}

func (e *apiError) Error() string { return "responses: " + e.Message }

// badRequest returns a 400 invalid_request_error.
func badRequest(param, code, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: code, Param: param,
		Message: fmt.Sprintf(format, args...)}
}

// responseNotFound is the 404 for an unknown (or another owner's) response.
func responseNotFound(id string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "not_found",
		Message: fmt.Sprintf("Response with id '%s' not found.", id)}
}

// mapNotFound turns store.ErrNotFound into the 404 naming id; other errors
// pass through.
func mapNotFound(err error, id string) error {
	if errors.Is(err, store.ErrNotFound) {
		return responseNotFound(id)
	}
	return err
}

// errorBody is the JSON body of every error reply.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (e *apiError) body() errorBody {
	return errorBody{Error: errorObject{Message: e.Message, Type: e.Type, Param: nullable(e.Param), Code: nullable(e.Code)}}
}

// toAPIError maps any error of a handler to the reply the client gets.
// Unknown errors become a 500 whose message does not leak internals.
func toAPIError(err error) *apiError {
	var ae *apiError
	var ie *host.InputError
	var nfe *host.NotFoundError
	var ke *host.IdempotencyError
	var mbe *http.MaxBytesError
	var bte *bodyTimeoutError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &ie):
		return badRequest(ie.Param, ie.Code, "%s", ie.Message)
	case errors.As(err, &nfe):
		return notFoundError(nfe)
	case errors.Is(err, host.ErrConversationsUnsupported):
		return &apiError{Status: http.StatusNotImplemented, Type: typeInvalidRequest, Code: "unsupported",
			Message: "This server's store keeps no conversations."}
	case errors.As(err, &ke):
		// 422, as the IETF Idempotency-Key draft says for a key reused
		// with another payload: the request is well-formed but cannot be
		// processed under this key, and SDKs do not retry a 422 (they
		// retry 409).
		return &apiError{Status: http.StatusUnprocessableEntity, Type: typeInvalidRequest, Code: "idempotency_key_reused",
			Message: fmt.Sprintf("The Idempotency-Key '%s' was used in the last 24 hours with a different request (response '%s'); "+
				"send the same request to get that response, or use a new key.", truncate(ke.Key, 300), ke.ResponseID)}
	case errors.As(err, &mbe):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: "request_too_large",
			Message: fmt.Sprintf("Request body too large: the limit is %d bytes.", mbe.Limit)}
	case errors.As(err, &bte):
		return &apiError{Status: http.StatusRequestTimeout, Type: typeInvalidRequest, Code: "request_timeout",
			Message: fmt.Sprintf("The request body did not arrive in time: the limit is %v.", bte.limit)}
	case errors.Is(err, host.ErrModelNotFound):
		return &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "model_not_found", Param: "model",
			Message: "The requested model does not exist."}
	case errors.Is(err, store.ErrNotFound):
		return &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "not_found", Message: "Not found."}
	case errors.Is(err, store.ErrConflict):
		return &apiError{Status: http.StatusConflict, Type: typeInvalidRequest, Code: "conflict", Message: conflictMessage(err)}
	case errors.Is(err, host.ErrHostClosed), errors.Is(err, store.ErrClosed):
		return &apiError{Status: http.StatusServiceUnavailable, Type: typeServer, Code: "shutting_down",
			Message: "The server is shutting down; retry shortly."}
	case errors.Is(err, store.ErrUnavailable):
		// A transient store failure (unreachable, timed out, disk full,
		// read-only, locked): the same request can succeed shortly. The
		// cause, which names the database, is logged, not sent.
		return &apiError{Status: http.StatusServiceUnavailable, Type: typeServer, Code: "store_unavailable",
			Message: "The server's storage is temporarily unavailable; retry shortly."}
	case errors.Is(err, context.DeadlineExceeded):
		// Options.StoreTimeout ended the request's store calls.
		return &apiError{Status: http.StatusServiceUnavailable, Type: typeServer, Code: "timeout",
			Message: "The server's storage did not answer in time; retry shortly."}
	}
	return &apiError{Status: http.StatusInternalServerError, Type: typeServer, Code: "server_error",
		Message: "The server had an error while processing your request."}
}

// writeError writes err as an OpenAI-format error reply. 4xx replies carry
// x-should-retry: false because SDKs retry 409 by default and a retry of a
// deterministic failure only repeats it — except 408 (a body too slow) and
// 429 (a cap reached), which a retry can pass; 5xx are logged with the
// cause, and 503 and 429 carry Retry-After. Nothing is written when the
// client went away, unless StoreTimeout ended the request.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && isContextErr(err) && !errors.Is(context.Cause(r.Context()), errStoreTimeout) {
		return // the client went away; nobody reads a reply
	}
	ae := toAPIError(err)
	switch {
	case ae.Status >= 500:
		s.log.LogAttrs(r.Context(), slog.LevelError, "responses: request failed",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("err", err))
	case ae.Status == http.StatusRequestTimeout:
		// The rest of the body may still come: the connection cannot
		// carry another request. A retry can succeed.
		w.Header().Set("Connection", "close")
	case ae.Status == http.StatusTooManyRequests:
		// The same request can succeed later: let the SDKs retry.
	default:
		w.Header().Set("X-Should-Retry", "false")
	}
	retryAfter := ae.RetryAfter
	if ae.Status == http.StatusServiceUnavailable {
		retryAfter = max(retryAfter, 1)
	}
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	writeJSON(w, ae.Status, ae.body())
}

// conflictMessage is what a client is told of a conflict: the host's and
// the store's refusals of a continuation say why in plain words; any other
// conflict (a store constraint) is named without the database's text.
func conflictMessage(err error) string {
	var he *host.ConflictError
	if errors.As(err, &he) {
		return he.Message
	}
	var ce *store.ContinueError
	if errors.As(err, &ce) {
		return fmt.Sprintf("Response %s cannot be continued: %s.", ce.PreviousResponseID, ce.Reason.Why())
	}
	return "The request conflicts with the current state of the response; retrieve it and try again."
}
