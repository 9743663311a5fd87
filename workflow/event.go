package workflow

// Event is something that happened in a superstep. The concrete types are
// SuperstepStarted, SuperstepCompleted, ExecutorInvoked, ExecutorCompleted,
// ExecutorFailed, Output, Intermediate, RequestInfo and Status; switch on
// them. A step's events are in a deterministic order: SuperstepStarted,
// then each executor's events (executors in the order they were added to
// the builder; per executor: invoked, failed attempts, its yields and
// requests in the order made, completed or failed), then
// SuperstepCompleted and Status.
type Event interface {
	// StepNumber returns the superstep the event belongs to.
	StepNumber() int64
}

// SuperstepStarted opens a superstep's events.
type SuperstepStarted struct{ Step int64 }

// SuperstepCompleted closes a superstep's events.
type SuperstepCompleted struct{ Step int64 }

// ExecutorInvoked marks an attempt of an executor (Attempt from 1).
type ExecutorInvoked struct {
	Step       int64
	ExecutorID string
	Attempt    int
}

// ExecutorCompleted marks the successful end of an executor's attempt.
type ExecutorCompleted struct {
	Step       int64
	ExecutorID string
	Attempt    int
}

// ExecutorFailed marks a failed attempt. Final is true when no retry follows
// (the run fails).
type ExecutorFailed struct {
	Step       int64
	ExecutorID string
	Attempt    int
	Err        error
	Final      bool
}

// Output is a value yielded by an executor declared with Builder.Outputs.
type Output struct {
	Step       int64
	ExecutorID string
	Value      any
}

// Intermediate is a value yielded by an executor declared with
// Builder.Intermediate.
type Intermediate struct {
	Step       int64
	ExecutorID string
	Value      any
}

// RequestInfo announces a new request for outside input.
type RequestInfo struct {
	Step    int64
	Request Request
}

// Status is the run's status after the superstep; Err is set when Failed.
type Status struct {
	Step   int64
	Status RunStatus
	Err    error
}

// StepNumber returns the superstep the event belongs to.
func (e SuperstepStarted) StepNumber() int64 { return e.Step }

// StepNumber returns the superstep the event belongs to.
func (e SuperstepCompleted) StepNumber() int64 { return e.Step }

// StepNumber returns the superstep the event belongs to.
func (e ExecutorInvoked) StepNumber() int64 { return e.Step }

// StepNumber returns the superstep the event belongs to.
func (e ExecutorCompleted) StepNumber() int64 { return e.Step }

// StepNumber returns the superstep the event belongs to.
func (e ExecutorFailed) StepNumber() int64 { return e.Step }

// StepNumber returns the superstep the event belongs to.
func (e Output) StepNumber() int64 { return e.Step }

// StepNumber returns the superstep the event belongs to.
func (e Intermediate) StepNumber() int64 { return e.Step }

// StepNumber returns the superstep the event belongs to.
func (e RequestInfo) StepNumber() int64 { return e.Step }

// StepNumber returns the superstep the event belongs to.
func (e Status) StepNumber() int64 { return e.Step }

// RunStatus is a run's state at a superstep boundary.
type RunStatus string

// Run statuses.
const (
	// Running: messages are queued, more supersteps follow.
	Running RunStatus = "running"
	// Idle: no messages are queued but requests for input are pending; the
	// run continues after Respond.
	Idle RunStatus = "idle"
	// Completed: nothing is queued or pending.
	Completed RunStatus = "completed"
	// Failed: an executor failed after its retries, or the run exceeded its
	// maximum number of supersteps. Failed runs do not run again.
	Failed RunStatus = "failed"
)
