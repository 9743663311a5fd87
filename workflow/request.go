package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strconv"
)

// Request is a pending request for outside input (human in the loop).
type Request struct {
	// ID identifies the request within its run; the answer names it.
	ID string
	// ExecutorID is the requester, which receives the Answer.
	ExecutorID string
	// Payload is what the executor sent with the request (a question, a
	// tool call's arguments...).
	Payload any
	// ResponseType is the type the answer must have.
	ResponseType reflect.Type
}

// RequestInput asks for outside input of type T. The run continues its
// current superstep; once no messages are left it becomes Idle with the
// request pending. Run.Respond answers it, and the requester receives an
// Answer[T] in the next superstep, so it must have a handler of it (see
// Handlers and On; the request fails otherwise). T must be registered (RegisterType; built-in types
// are, and so are the input types of Func and On) so that a fresh process
// can restore the pending request; T may be any but no other interface.
// The payload's type must be registered too.
//
// id names the request; "" picks one derived from the run id, step,
// executor and a counter, so a re-run superstep asks with the same id.
// It returns the request's id.
func RequestInput[T any](c *Context, id string, payload any) (string, error) {
	return c.request(id, payload, reflect.TypeFor[T]())
}

// request creates a pending request; see RequestInput.
func (c *Context) request(id string, payload any, rt reflect.Type) (string, error) {
	if _, ok := registeredName(rt); !ok && rt != reflect.TypeFor[any]() {
		return "", c.fail(fmt.Errorf("workflow: executor %q: request: response type %v (register it; only any among interfaces): %w", c.exec, rt, ErrUnregisteredType))
	}
	if err := checkEncodable(payload); err != nil {
		return "", c.fail(fmt.Errorf("workflow: executor %q: request payload: %w", c.exec, err))
	}
	ex := c.run.executor(c.exec)
	if fe, ok := ex.(*funcExecutor); ok && !fe.handlesAnswer(rt) || !ok && !executorAccepts(ex, anyAnswer) {
		return "", c.fail(fmt.Errorf("workflow: executor %q: request for a %v: %w", c.exec, rt, errNoAnswerHandler))
	}
	if id == "" {
		id = c.requestID(len(c.buf.requests))
	}
	if c.run.pendingIndex(id) >= 0 || slices.ContainsFunc(c.buf.requests, func(r Request) bool { return r.ID == id }) {
		return "", c.fail(fmt.Errorf("workflow: executor %q: request %q is already pending", c.exec, id))
	}
	r := Request{ID: id, ExecutorID: c.exec, Payload: payload, ResponseType: rt}
	c.buf.requests = append(c.buf.requests, r)
	c.buf.events = append(c.buf.events, RequestInfo{Step: c.step, Request: r})
	return id, nil
}

// requestID derives the n-th request id of this executor in this superstep.
func (c *Context) requestID(n int) string {
	sum := sha256.Sum256([]byte(c.IdempotencyKey() + ":" + strconv.Itoa(n)))
	return "call_" + hex.EncodeToString(sum[:12])
}

// AnswerValidator is implemented by answer types whose values are
// constrained beyond their type (one of a few words, a range...). Respond
// calls Validate before accepting an answer, so a bad answer is refused
// while the request stays pending, instead of failing the run after it
// was accepted. Declaring it on the type (not on the request) keeps it
// with a request restored from a checkpoint in another process.
type AnswerValidator interface {
	Validate() error
}

// Pending returns the requests waiting for an answer, oldest first.
func (r *Run) Pending() []Request { return slices.Clone(r.st.pending) }

// pendingIndex returns the index of the pending request id, or -1.
func (r *Run) pendingIndex(id string) int {
	return slices.IndexFunc(r.st.pending, func(q Request) bool { return q.ID == id })
}

// Respond answers the pending request id. The answer must have the
// request's ResponseType (or implement it, for an interface type) and a
// registered type; an unknown id wraps ErrUnknownRequest, a wrong type
// ErrAnswerType and an answer its Validate method refuses (AnswerValidator)
// ErrInvalidAnswer; after an error the request is still pending. The
// requester receives an Answer in the next superstep of Run. Respond must
// not be called while Run is running.
func (r *Run) Respond(id string, answer any) error {
	i := r.pendingIndex(id)
	if i < 0 {
		return fmt.Errorf("%w: %q", ErrUnknownRequest, id)
	}
	req := r.st.pending[i]
	if !accepts(req.ResponseType, reflect.TypeOf(answer)) {
		return fmt.Errorf("%w: request %q wants %v, got %T", ErrAnswerType, id, req.ResponseType, answer)
	}
	if err := checkEncodable(answer); err != nil {
		return fmt.Errorf("workflow: respond %q: %w", id, err)
	}
	if v, ok := answer.(AnswerValidator); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("%w: request %q: %w", ErrInvalidAnswer, id, err)
		}
	}
	st := r.st.clone()
	st.pending = slices.Delete(slices.Clone(st.pending), i, i+1)
	st.enqueue(req.ExecutorID, envelope{value: Answer[any]{RequestID: id, Payload: req.Payload, Value: answer}})
	st.status = Running
	r.st = st
	return nil
}
