package workflow

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by this package wrap them with %w, so
// callers branch with errors.Is.
var (
	// ErrCheckpoint marks checkpoint bytes that cannot be restored: corrupt,
	// truncated, of an unknown version, naming unregistered types, or made
	// by a workflow with another fingerprint.
	ErrCheckpoint = errors.New("workflow: invalid checkpoint")
	// ErrFingerprint marks a checkpoint made by a different graph. Errors
	// that wrap it also wrap ErrCheckpoint.
	ErrFingerprint = errors.New("workflow: checkpoint fingerprint does not match the workflow")
	// ErrMaxSupersteps marks a run that exceeded RunOptions.MaxSupersteps.
	ErrMaxSupersteps = errors.New("workflow: maximum number of supersteps exceeded")
	// ErrUnknownRequest marks an answer to a request that is not pending.
	ErrUnknownRequest = errors.New("workflow: unknown or already answered request")
	// ErrAnswerType marks an answer whose type is not the request's ResponseType.
	ErrAnswerType = errors.New("workflow: answer has the wrong type")
	// ErrInvalidAnswer marks an answer of the right type that its own
	// Validate method (AnswerValidator) refused.
	ErrInvalidAnswer = errors.New("workflow: invalid answer")
	// ErrMessageType marks a message its target executor cannot handle.
	ErrMessageType = errors.New("workflow: message type not handled")
	// ErrNoRoute marks a message sent by an executor that no edge delivered.
	ErrNoRoute = errors.New("workflow: message matched no edge")
	// ErrUnregisteredType marks a value that must be checkpointed but whose
	// type was never registered with RegisterType.
	ErrUnregisteredType = errors.New("workflow: unregistered type")
	// ErrRunFailed marks a run that already failed; it does not run again.
	ErrRunFailed = errors.New("workflow: run failed")
	// ErrExecutorFailed marks the failure of an executor after its retries.
	ErrExecutorFailed = errors.New("workflow: executor failed")
	// ErrBuild marks an invalid graph; Build joins one error per problem.
	ErrBuild = errors.New("workflow: invalid graph")
)

// PanicError is the error of an executor attempt that panicked. Its message
// leaves the stack out (it may reach clients); log Stack instead.
type PanicError struct {
	ExecutorID string
	Value      any
	Stack      []byte
}

// Error describes the panic without its stack.
func (e *PanicError) Error() string {
	return fmt.Sprintf("workflow: executor %q panicked: %v", e.ExecutorID, e.Value)
}
