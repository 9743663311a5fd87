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

func TestHost_Approval_RoundTrip(t *testing.T) {
	t.Parallel()
	// With hour-long leases, a continuation that this host failed to drive
	// at once (left for recovery) would never finish within the test.
	b := setup(t, &setupOpts{cfg: &host.Config{LeaseDuration: time.Hour}})
	for _, tc := range []struct{ model, answer, want string }{
		{examples.Approval, "approve", "approved"},
		{examples.Approval, "reject", "rejected"},
	} {
		t.Run(tc.model+"/"+tc.answer, func(t *testing.T) {
			t.Parallel()
			first := create(t, b.host, tc.model, "deploy?", nil)
			evs := collect(t, b.host, first.ID, -1)
			fc := evs[len(evs)-1].Response.Output[0]
			if fc.Type != "function_call" || fc.Name != "approve" || fc.Args != `{"question":"deploy?"}` || fc.CallID == "" {
				t.Fatalf("function call %+v", fc)
			}
			ctx := testCtx(t)
			answer := func(prev, callID string) (*store.Response, error) {
				return b.host.Create(ctx, &host.CreateParams{Model: tc.model, Store: true, PreviousResponseID: prev,
					Input: []host.InputItem{{Type: host.InputFunctionCallOutput, CallID: callID, Output: tc.answer}}})
			}
			// An unknown call id is the caller's mistake.
			var ie *host.InputError
			if _, err := answer(first.ID, "call_nope"); !errors.As(err, &ie) || ie.Param != "input" {
				t.Fatalf("unknown call id: %v", err)
			}
			second, err := answer(first.ID, fc.CallID)
			if err != nil {
				t.Fatalf("continue: %v", err)
			}
			if second.RunID != first.RunID || second.PreviousResponseID != first.ID {
				t.Fatalf("continuation run %s prev %s", second.RunID, second.PreviousResponseID)
			}
			evs2 := collect(t, b.host, second.ID, -1)
			checkLog(t, evs2)
			if got := outputs(evs2); !slices.Equal(got, []string{tc.want}) {
				t.Fatalf("outputs %q, want %q", got, tc.want)
			}
			// The first response is no longer the head; the second has no
			// pending calls: both continuations conflict.
			if _, err := answer(first.ID, fc.CallID); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("continue a non-head: %v", err)
			}
			if _, err := answer(second.ID, fc.CallID); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("continue an answered run: %v", err)
			}
		})
	}
}

func TestHost_Create_Errors(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := testCtx(t)
	_, err := b.host.Create(ctx, &host.CreateParams{Model: "nope"})
	requireIs(t, err, host.ErrModelNotFound)
	_, err = b.host.Create(ctx, &host.CreateParams{Model: examples.Echo, PreviousResponseID: "resp_missing"})
	var ie *host.InputError
	if !errors.As(err, &ie) || ie.Param != "previous_response_id" {
		t.Fatalf("unknown previous response: %v", err)
	}
	_, err = b.host.Create(ctx, &host.CreateParams{Model: examples.Echo,
		Input: []host.InputItem{{Type: host.InputFunctionCallOutput, CallID: "x", Output: "y"}}})
	if !errors.As(err, &ie) {
		t.Fatalf("function_call_output without previous_response_id: %v", err)
	}
	// Continuing a response that is still running conflicts.
	r := create(t, b.host, examples.Silent, "x", map[string]string{"steps": "1000", "step_delay_ms": "5"})
	_, err = b.host.Create(ctx, &host.CreateParams{Model: examples.Silent, PreviousResponseID: r.ID,
		Input: []host.InputItem{{Type: host.InputFunctionCallOutput, CallID: "x", Output: "y"}}})
	requireIs(t, err, store.ErrConflict)
	// Another owner's response does not exist for the caller.
	_, err = b.host.Get(ctx, r.ID, "someone-else")
	requireIs(t, err, store.ErrNotFound)
	if _, err := b.host.Cancel(ctx, r.ID, ""); err != nil {
		t.Fatal(err)
	}
	wait(t, b.host, r.ID)
}
