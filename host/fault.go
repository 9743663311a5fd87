package host

import (
	"context"
	"time"

	"github.com/superstep/superstep/internal/fault"
)

// FaultPoint names a place in the host where tests inject failures through
// Config.Test.FaultFunc. The host's points are hook points of package
// internal/fault, superstep's one fault-injection mechanism (the stores'
// statement points are the other kind).
type FaultPoint = fault.Name

// The host's fault points. Each is reached on the path it names; an error
// injected there is handled exactly like a real failure of that step.
const (
	// FaultCreateAfterRecord: Create wrote the response record and its
	// response.created event, and has not returned yet. A failure makes
	// Create return an error; the durable response still runs.
	FaultCreateAfterRecord FaultPoint = "create.after_record"
	// FaultCommitBefore: before each attempt to commit a superstep (or a
	// terminal event); a failure counts as a failed attempt (retried).
	FaultCommitBefore FaultPoint = "commit.before"
	// FaultCommitAfter: the store accepted a commit attempt and the host has
	// neither adopted nor published it; a failure makes the host treat the
	// attempt as failed (the retry finds it committed).
	FaultCommitAfter FaultPoint = "commit.after"
	// FaultPublish: Events is about to hand the next event of the log to a
	// reader (mid-publish); a failure ends the reader's sequence with an
	// error, as a cut connection does.
	FaultPublish FaultPoint = "publish.event"
	// FaultAppendAfter: the store accepted a live append (EventAppend) and
	// the host has not taken it as done; a failure makes the host treat the
	// append as failed (the retry finds it applied).
	FaultAppendAfter FaultPoint = "append.after"
	// FaultHITLDeliver: an answer (function_call_output) is about to be
	// delivered to the request waiting for it, when a continuation is
	// created or a run is recovered.
	FaultHITLDeliver FaultPoint = "hitl.deliver"
	// FaultLeaseRenew: before a run's lease is renewed; a failure counts as
	// a failed renewal (retried at the next renewal).
	FaultLeaseRenew FaultPoint = "lease.renew"
)

// FaultPoints lists every fault point.
func FaultPoints() []FaultPoint {
	return []FaultPoint{FaultCreateAfterRecord, FaultCommitBefore, FaultCommitAfter, FaultPublish,
		FaultAppendAfter, FaultHITLDeliver, FaultLeaseRenew}
}

// Fault describes one arrival at a fault point: its Point, RunID ("" when
// unknown: Events), ResponseID, Step (the step being committed at the
// commit points, else 0) and Seq (the event about to be published at
// FaultPublish, else 0).
type Fault = fault.At

// FaultEnv names the environment variable a binary built with -tags faults
// reads for one fault to inject when Config.Test.FaultFunc is nil:
// "<point>[@<n>][:fail|:crash]" fires at the n-th arrival (from 1; default
// 1) at the point; "fail" (the default) injects an error, "crash" kills the
// process there with SIGKILL (fault.Spec, fault.FromEnv). In a normal build
// the variable is ignored.
const FaultEnv = "SUPERSTEP_HOST_FAULT"

// TestConfig holds knobs for tests only. The superstep command never sets
// them.
type TestConfig struct {
	// FaultFunc, when not nil, is called synchronously at every fault
	// point. A non-nil error is injected there. To simulate a crash at a
	// point, a test makes its store refuse every write from then on (as a
	// dead process writes nothing) before returning an error, then shuts
	// the host down abruptly. When nil, a binary built with -tags faults
	// takes it from the FaultEnv environment variable.
	FaultFunc func(ctx context.Context, f *Fault) error
	// Now, when not nil, is the host's clock instead of time.Now (a test
	// plays a host whose clock is off). It must carry a monotonic reading
	// (time.Now().Add(skew) does).
	Now func() time.Time
}

// ErrInjected marks errors the host made from FaultFunc's errors (it is
// fault.ErrInjected, which the stores' injected failures match too).
var ErrInjected = fault.ErrInjected

// fault calls the test hook at f.Point and returns its error wrapped in
// ErrInjected; the caller handles it as a real failure of that step.
func (h *Host) fault(ctx context.Context, f *Fault) error {
	return fault.Reach(ctx, h.cfg.Test.FaultFunc, f)
}
