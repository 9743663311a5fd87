package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/superstep/superstep/store"
)

// requireIs fails the test unless errors.Is(err, target).
func requireIs(t testing.TB, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v, want %v", what, err, target)
	}
}

// requireNoError fails the test on err.
func requireNoError(t testing.TB, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// RunState is everything a reader can see of one run: the run, its
// responses, their whole logs and the checkpoint history. Two RunStates are
// compared to prove a failed write left nothing behind.
type RunState struct {
	Run         *store.Run
	Responses   []*store.Response
	Events      map[string][]store.Event
	Checkpoints []store.CheckpointInfo
	Last        *store.Checkpoint
}

// ReadRunState reads a RunState; a missing run gives a RunState with a nil
// Run.
func ReadRunState(ctx context.Context, t testing.TB, s store.Store, runID string) *RunState {
	t.Helper()
	st := &RunState{Events: map[string][]store.Event{}}
	run, err := s.RunGet(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return st
	}
	requireNoError(t, err, "RunGet")
	st.Run = run
	st.Responses, err = s.ResponseListByRun(ctx, runID)
	requireNoError(t, err, "ResponseListByRun")
	for _, r := range st.Responses {
		st.Events[r.ID] = ListAll(ctx, t, s, r.ID)
	}
	st.Checkpoints, err = s.CheckpointList(ctx, runID)
	requireNoError(t, err, "CheckpointList")
	st.Last, err = s.CheckpointGetLast(ctx, runID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("CheckpointGetLast: %v", err)
	}
	return st
}

// ListAll returns a response's whole log, read page by page.
func ListAll(ctx context.Context, t testing.TB, s store.Store, responseID string) []store.Event {
	t.Helper()
	var all []store.Event
	for {
		evs, err := s.EventList(ctx, &store.EventListParams{ResponseID: responseID, After: int64(len(all)) - 1, Limit: 7})
		requireNoError(t, err, "EventList")
		all = append(all, evs...)
		if len(evs) < 7 {
			return all
		}
	}
}

// requireSameState fails the test when two RunStates differ.
func requireSameState(t testing.TB, got, want *RunState, what string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: state changed:\n got  %s\n want %s", what, got, want)
	}
}

// String summarises the state for failure messages.
func (st *RunState) String() string {
	if st.Run == nil {
		return "<no run>"
	}
	s := fmt.Sprintf("run{last %d head %s active %v lease %+v}", st.Run.LastStep, st.Run.HeadResponseID, st.Run.Active, st.Run.Lease)
	for _, r := range st.Responses {
		s += fmt.Sprintf(" resp{%s %s next %d commit %d events %d}", r.ID, r.Status, r.NextSeq, r.CommitStep, len(st.Events[r.ID]))
	}
	return s + fmt.Sprintf(" checkpoints %d", len(st.Checkpoints))
}
