package storetest

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

// LeaseOwnerDefault is the lease owner fixtures claim runs for.
const LeaseOwnerDefault = "host-a"

// LeaseDurationDefault is the lease duration fixtures claim runs for.
const LeaseDurationDefault = time.Hour

var idCounter atomic.Int64

// NewID returns an ID unique in this process, prefixed by prefix.
func NewID(prefix string) string {
	return fmt.Sprintf("%s_%06d", prefix, idCounter.Add(1))
}

// ResponseOpts are the options of CreateResponse; zero fields take
// defaults.
type ResponseOpts struct {
	ID    string // default: a fresh "resp_" ID
	RunID string // default: a fresh "run_" ID
	// PreviousResponseID continues RunID's run after that response; with
	// Branch, RunID is a new run branching from it.
	PreviousResponseID string
	Branch             bool
	Model              string       // default "test-model"
	Owner              string       // default ""
	Status             store.Status // default in_progress
	// Checkpoint is the step-0 checkpoint of a new run; default one part
	// "state". NoCheckpoint writes none.
	Checkpoint   []store.Part
	NoCheckpoint bool
	// LeaseOwner claims the run; default LeaseOwnerDefault. NoLease claims
	// nothing.
	LeaseOwner    string
	NoLease       bool
	LeaseDuration time.Duration // default LeaseDurationDefault
	Now           time.Time
}

// CreateResponse creates a response (and run) with a response.created
// event at seq 0 and fails the test on error.
func CreateResponse(ctx context.Context, t testing.TB, s store.Store, o *ResponseOpts) *store.ResponseCreateResult {
	t.Helper()
	res, err := s.ResponseCreate(ctx, ResponseParams(o))
	if err != nil {
		t.Fatalf("ResponseCreate: %v", err)
	}
	return res
}

// ResponseParams returns the ResponseCreateParams CreateResponse uses.
func ResponseParams(o *ResponseOpts) *store.ResponseCreateParams {
	if o == nil {
		o = &ResponseOpts{}
	}
	p := &store.ResponseCreateParams{
		Response: &store.Response{
			ID:                 or(o.ID, NewID("resp")),
			PreviousResponseID: o.PreviousResponseID,
			Model:              or(o.Model, "test-model"),
			Owner:              o.Owner,
			Status:             store.Status(or(string(o.Status), string(store.StatusInProgress))),
			Request:            []byte(`{"model":"test-model","input":"hi"}`),
		},
		RunID:         or(o.RunID, NewID("run")),
		Branch:        o.Branch,
		Checkpoint:    o.Checkpoint,
		LeaseOwner:    or(o.LeaseOwner, LeaseOwnerDefault),
		LeaseDuration: o.LeaseDuration,
		Now:           o.Now,
	}
	p.Response.Snapshot = snapshot(p.Response.ID, p.Response.Status, 0)
	p.Events = []store.EventInput{{Seq: 0, Type: "response.created", Payload: payload("response.created", 0)}}
	if p.Checkpoint == nil && !o.NoCheckpoint {
		p.Checkpoint = []store.Part{{Name: "state", Data: []byte("step-0")}}
	}
	if o.NoLease {
		p.LeaseOwner = ""
	}
	if p.LeaseOwner != "" && p.LeaseDuration == 0 {
		p.LeaseDuration = LeaseDurationDefault
	}
	return p
}

// CommitOpts are the options of CommitParams; zero fields take defaults.
type CommitOpts struct {
	Step   int64        // default run.LastStep+1
	Epoch  int64        // default run.Lease.Epoch
	Events int          // how many events; default 2 (NoEvents: none)
	Seq    int64        // first Seq; default the head response's NextSeq
	Status store.Status // default in_progress
	// Checkpoint; default one part "state" naming the step.
	Checkpoint []store.Part
	NoEvents   bool
	ResponseID string // default run.HeadResponseID
	Now        time.Time
}

// NextCommit reads the run and its head response and returns the
// parameters of its next commit per o.
func NextCommit(ctx context.Context, t testing.TB, s store.Store, runID string, o *CommitOpts) *store.CommitParams {
	t.Helper()
	if o == nil {
		o = &CommitOpts{}
	}
	run, err := s.RunGet(ctx, runID)
	if err != nil {
		t.Fatalf("RunGet(%s): %v", runID, err)
	}
	p := &store.CommitParams{
		RunID: runID, Epoch: o.Epoch, Step: o.Step, ResponseID: or(o.ResponseID, run.HeadResponseID),
		Status: store.Status(or(string(o.Status), string(store.StatusInProgress))), Checkpoint: o.Checkpoint, Now: o.Now,
	}
	if p.Epoch == 0 {
		p.Epoch = run.Lease.Epoch
	}
	if p.Step == 0 {
		p.Step = run.LastStep + 1
	}
	if p.Checkpoint == nil {
		p.Checkpoint = []store.Part{{Name: "state", Data: fmt.Appendf(nil, "step-%d", p.Step)}}
	}
	seq := o.Seq
	if seq == 0 {
		if resp, err := s.ResponseGet(ctx, p.ResponseID); err == nil {
			seq = resp.NextSeq
		}
	}
	n := o.Events
	if n == 0 {
		n = 2
	}
	if o.NoEvents {
		n = 0
	}
	for i := range n {
		p.Events = append(p.Events, store.EventInput{Seq: seq + int64(i), Type: "response.output_text.delta", Payload: payload("delta", seq+int64(i))})
	}
	p.Snapshot = snapshot(p.ResponseID, p.Status, p.Step)
	return p
}

// Commit commits the run's next step per o and fails the test on error.
func Commit(ctx context.Context, t testing.TB, s store.Store, runID string, o *CommitOpts) *store.CommitParams {
	t.Helper()
	p := NextCommit(ctx, t, s, runID, o)
	if _, err := s.Commit(ctx, p); err != nil {
		t.Fatalf("Commit(%s step %d): %v", runID, p.Step, err)
	}
	return p
}

// Parts returns n parts of size bytes each, named "part-<i>", whose bytes
// depend on seed.
func Parts(n, size int, seed byte) []store.Part {
	parts := make([]store.Part, n)
	for i := range parts {
		parts[i] = store.Part{Name: fmt.Sprintf("part-%03d", i), Data: bytes.Repeat([]byte{seed + byte(i)}, size)}
	}
	return parts
}

func snapshot(id string, status store.Status, step int64) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"response","status":%q,"step":%d}`, id, status, step)
}

func payload(typ string, seq int64) []byte {
	return fmt.Appendf(nil, `{"type":%q,"sequence_number":%d}`, typ, seq)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// testNow returns the current time at millisecond precision, which every
// backend stores exactly.
func testNow() time.Time { return time.Now().Truncate(time.Millisecond) }
