package workflow

import (
	"context"
	"fmt"
	"reflect"
	"strings"
)

// AsExecutor returns an executor with the given id that runs w as a
// sub-workflow: see the package documentation. Each run of the parent
// workflow gets its own inner run (Instancer), checkpointed as one
// executor part (Snapshotter).
func (w *Workflow) AsExecutor(id string, opts ...ExecutorOption) Executor {
	fe := &funcExecutor{}
	for _, o := range opts {
		if o.apply != nil {
			o.apply(fe)
		}
	}
	return &subExecutor{id: id, wf: w, retry: fe.retry}
}

// subExecutor runs an inner workflow inside a parent's superstep.
type subExecutor struct {
	id    string
	wf    *Workflow
	retry RetryPolicy
	run   *Run // this parent run's inner run; nil before the first message
}

// ID returns the executor's id.
func (s *subExecutor) ID() string { return s.id }

// Retry returns the policy given to AsExecutor.
func (s *subExecutor) Retry() RetryPolicy { return s.retry }

// fingerprintPart makes the inner graph part of the parent's fingerprint.
func (s *subExecutor) fingerprintPart(legacy bool) string {
	if legacy {
		return s.wf.legacyFingerprint
	}
	return s.wf.fingerprint
}

// NewInstance returns the executor for one parent run, without an inner run yet.
func (s *subExecutor) NewInstance() Executor { return &subExecutor{id: s.id, wf: s.wf, retry: s.retry} }

// innerID is the inner run's id within the parent run runID.
func (s *subExecutor) innerID(runID string) string { return runID + "/" + s.id }

// InputTypes are the inner start executor's types plus Answer, or nil
// (anything) when the inner start does not declare them.
func (s *subExecutor) InputTypes() []reflect.Type {
	ts := s.wf.StartInputTypes()
	if ts == nil {
		return nil
	}
	return append(ts, anyAnswer)
}

// Snapshot is the inner run's checkpoint as one blob (empty before the
// first message).
func (s *subExecutor) Snapshot() ([]byte, error) {
	if s.run == nil {
		return []byte{}, nil
	}
	parts, err := s.run.Checkpoint()
	if err != nil {
		return nil, err
	}
	return JoinParts(parts), nil
}

// Restore replaces the inner run with the one data describes.
func (s *subExecutor) Restore(data []byte) error {
	if len(data) == 0 {
		s.run = nil
		return nil
	}
	parts, err := SplitParts(data)
	if err != nil {
		return fmt.Errorf("sub-workflow %q: %w", s.id, err)
	}
	r, err := s.wf.Restore("", parts)
	if err != nil {
		return fmt.Errorf("sub-workflow %q: %w", s.id, err)
	}
	s.run = r
	return nil
}

// Handle feeds msg to the inner run (as input, or as the answer to one of
// its requests) and runs it until it is Completed or Idle.
func (s *subExecutor) Handle(c *Context, msg any) error {
	if err := s.deliver(c, msg); err != nil {
		return err
	}
	s.run.id = s.innerID(c.RunID())
	commit := func(_ context.Context, st *Step) error { return s.forward(c, st) }
	var opts *RunOptions
	if c.live != nil { // the inner run's live events reach the parent's hook, nested
		opts = &RunOptions{Live: func(_ context.Context, ev LiveEvent) error { return c.EmitLive(ev) }}
	}
	if err := s.run.Run(c.Context(), commit, opts); err != nil {
		return fmt.Errorf("sub-workflow %q: %w", s.id, err)
	}
	return nil
}

// deliver hands msg to the inner run.
func (s *subExecutor) deliver(c *Context, msg any) error {
	if a, ok := msg.(Answer[any]); ok {
		inner, found := strings.CutPrefix(a.RequestID, s.id+"/")
		if !found || s.run == nil {
			return fmt.Errorf("%w: sub-workflow %q got answer to %q", ErrUnknownRequest, s.id, a.RequestID)
		}
		return s.run.Respond(inner, a.Value)
	}
	if s.run == nil {
		r, err := s.wf.NewRun(s.innerID(c.RunID()), msg)
		s.run = r
		return err
	}
	return s.run.Send(msg)
}

// forward passes an inner step's outputs, requests and annotations to the
// parent.
func (s *subExecutor) forward(c *Context, st *Step) error {
	c.annotateNested(st.Annotations)
	parent := c.run.wf
	for _, e := range st.Events {
		switch e := e.(type) {
		case Output:
			if len(parent.out[s.id]) > 0 {
				if err := c.Send(e.Value); err != nil {
					return err
				}
			}
			if parent.yields[s.id] != yieldNone {
				if err := c.Yield(e.Value); err != nil {
					return err
				}
			}
		case Intermediate:
			if parent.yields[s.id] == yieldIntermediate {
				if err := c.Yield(e.Value); err != nil {
					return err
				}
			}
		case RequestInfo:
			if _, err := c.request(s.id+"/"+e.Request.ID, e.Request.Payload, e.Request.ResponseType); err != nil {
				return err
			}
		}
	}
	return nil
}
