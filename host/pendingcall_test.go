package host_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
)

// A function_call_output naming only its call_id (no previous_response_id,
// no function_call in the input) continues the workflow run whose request
// it answers, when the caller owns it; an unknown call id or another
// owner's is a 400 naming input[0].call_id and stores nothing.
func TestHost_AnswerByCallID(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{cfg: &host.Config{LeaseDuration: time.Hour}})
	ctx := testCtx(t)
	first, err := b.host.Create(ctx, &host.CreateParams{Model: examples.Approval, Owner: "alice", Store: true,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "deploy?"}}})
	if err != nil {
		t.Fatal(err)
	}
	done, err := b.host.Wait(ctx, first.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	fc := snapshot(t, done).Output[0]
	if fc.Type != "function_call" || fc.CallID == "" {
		t.Fatalf("first response's output %+v", fc)
	}
	answer := func(owner, callID string) (*store.Response, error) {
		return b.host.Create(ctx, &host.CreateParams{Model: examples.Approval, Owner: owner, Store: true,
			Input: []host.InputItem{{Type: host.InputFunctionCallOutput, CallID: callID, Output: "approve"}}})
	}
	for _, tc := range []struct{ owner, call string }{{"alice", "call_nope"}, {"bob", fc.CallID}} {
		_, err := answer(tc.owner, tc.call)
		if ie, ok := errors.AsType[*host.InputError](err); !ok || ie.Param != "input[0].call_id" {
			t.Fatalf("answer of %s by %s: %v", tc.call, tc.owner, err)
		}
	}
	runs, err := b.store.RunList(ctx, &store.RunListParams{})
	if err != nil || len(runs) != 1 || runs[0].HeadResponseID != first.ID {
		t.Fatalf("after refused answers: runs %+v (%v)", runs, err)
	}
	second, err := answer("alice", fc.CallID)
	if err != nil {
		t.Fatalf("answer by call id: %v", err)
	}
	if second.RunID != first.RunID || second.PreviousResponseID != first.ID {
		t.Fatalf("the answer made response %s on run %s after %q; want run %s after %s", second.ID, second.RunID,
			second.PreviousResponseID, first.RunID, first.ID)
	}
	done2, err := b.host.Wait(ctx, second.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, it := range snapshot(t, done2).Output {
		texts = append(texts, it.Content[0].Text)
	}
	if !slices.Equal(texts, []string{"approved"}) {
		t.Fatalf("outputs %q", texts)
	}
	// Answered: the call is no longer pending in the run's head.
	if _, err := answer("alice", fc.CallID); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second answer: %v", err)
	}
	// The index goes with the response.
	if err := b.host.Delete(ctx, second.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := b.host.Delete(ctx, first.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	_, err = answer("alice", fc.CallID)
	if ie, ok := errors.AsType[*host.InputError](err); !ok || ie.Param != "input[0].call_id" {
		t.Fatalf("answer of a deleted response's call: %v", err)
	}
}
