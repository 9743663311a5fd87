package host

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/workflow"
)

// Messages a failed response shows for failures of the infrastructure.
const (
	msgStoreFailed    = "The run failed because the server's storage failed; the details are in the server's log."
	msgCheckpointBad  = "The run failed because its saved state could not be restored; the details are in the server's log."
	msgLiveFailed     = "The run failed because its live output could not be published; the details are in the server's log."
	msgInternalFailed = "The run failed because of an internal error; the details are in the server's log."
	msgUnreachable    = "a server it called could not be reached (the details are in the server's log)"
	msgNoAnswer       = "a server it called did not answer in time (the details are in the server's log)"
)

// clientError is the error a failed response shows for err, and whether
// it hides part of err's message (the caller then logs err in full).
//
// The rule: what the workflow's own code reports — an executor's or an
// agent's error, a panic's value, the superstep limit, a model's refusal —
// is its author's message for users and is shown as reported. What the
// infrastructure reports is not:
//   - a failure outside the workflow's steps (internal: a commit, a
//     restore, a live publication, the host's own) shows a fixed sentence
//     saying what failed;
//   - an error from the store (any store sentinel in the chain; a
//     database error names the database's user, name and address) shows
//     the storage sentence;
//   - an error from the network (a net.Error in the chain, url.Error
//     included: a model, tool or database server that could not be
//     reached) keeps the words around it — "executor "x": agent: model
//     call failed (model m, 3 attempt(s)): " — and replaces the rest, from
//     the first error in the chain that is not a plain fmt.Errorf wrapper,
//     with what failed (see cutNetwork).
func clientError(err error, internal bool) (*protocol.Error, bool) {
	msg := ""
	switch {
	case isStoreError(err):
		msg = msgStoreFailed
	case internal && errors.Is(err, workflow.ErrCheckpoint):
		msg = msgCheckpointBad
	case internal && errors.Is(err, workflow.ErrLive):
		msg = msgLiveFailed
	case internal:
		msg = msgInternalFailed
	default:
		var hidden bool
		if msg, hidden = cutNetwork(err); !hidden {
			return &protocol.Error{Code: "server_error", Message: err.Error()}, false
		}
	}
	return &protocol.Error{Code: "server_error", Message: msg}, true
}

// cutNetwork returns err's message with the part a network error wrote
// (addresses, URLs, users) replaced by what failed, and whether there was
// one. It walks the chain from the outside through fmt.Errorf wrappers
// whose message is their own words followed by their one wrapped
// error's that leads to the network error (the words of the workflow, the
// agent and the author), and cuts at the first error that is not such a
// wrapper: its whole message goes, whatever type wrote it (a database
// driver's connect error names its user and database before the network
// error's text).
func cutNetwork(err error) (string, bool) {
	var netErr net.Error
	if !errors.As(err, &netErr) {
		return "", false
	}
	prefix := ""
	e := err
	for isFmtWrapper(e) {
		var next error
		for _, c := range unwrapAll(e) {
			if errors.As(c, &netErr) {
				if next != nil {
					next = nil // two ways down: cut here
					break
				}
				next = c
			}
		}
		msg := e.Error()
		if next == nil || !strings.HasSuffix(msg, next.Error()) {
			break
		}
		prefix += strings.TrimSuffix(msg, next.Error())
		e = next
	}
	what := msgUnreachable
	if errors.As(e, &netErr) && netErr.Timeout() || errors.Is(e, context.DeadlineExceeded) {
		what = msgNoAnswer
	}
	return prefix + what, true
}

// isFmtWrapper reports whether e was made by fmt.Errorf with %w (its
// types are unexported: matched by name), or is an agent's TurnError,
// which words its message the same way.
func isFmtWrapper(e error) bool {
	if _, ok := e.(*agent.TurnError); ok {
		return true
	}
	switch reflect.TypeOf(e).String() {
	case "*fmt.wrapError", "*fmt.wrapErrors":
		return true
	}
	return false
}

// unwrapAll returns the errors e wraps.
func unwrapAll(e error) []error {
	switch u := e.(type) {
	case interface{ Unwrap() error }:
		if c := u.Unwrap(); c != nil {
			return []error{c}
		}
	case interface{ Unwrap() []error }:
		return u.Unwrap()
	}
	return nil
}

// isStoreError reports whether err carries a store sentinel.
func isStoreError(err error) bool {
	for _, target := range []error{store.ErrUnavailable, store.ErrCorrupt, store.ErrConflict, store.ErrFenced,
		store.ErrNotFound, store.ErrClosed, store.ErrCancelled} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
