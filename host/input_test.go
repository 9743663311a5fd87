package host_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
)

// TestHost_CreateRefusesAmbiguousRequest (issue 12 #15): a request that a
// case-insensitive reader and an exact one read differently ("input"
// answering approve, "Input" answering reject) was accepted, and recovery
// after a crash then delivered the other answer. The host now refuses any
// request its one reader (the one recovery uses) refuses, or whose input
// differs from the input it was given, before anything is stored; the
// pending request can still be answered.
func TestHost_CreateRefusesAmbiguousRequest(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, db testDB) {
		inc := startIncarnation(t, db, host.Config{}, registerDemos, nil)
		ctx := testCtx(t)
		first := create(t, inc.h, examples.Approval, "deploy?", nil)
		evs := collect(t, inc.h, first.ID, -1)
		callID := evs[len(evs)-1].Response.Output[0].CallID
		answerItem := func(key, out string) string {
			return fmt.Sprintf(`{"type":"function_call_output","call_id":%q,%q:%q}`, callID, key, out)
		}
		approve := []host.InputItem{{Type: host.InputFunctionCallOutput, CallID: callID, Output: "approve"}}
		prefix := fmt.Sprintf(`{"model":%q,"previous_response_id":%q`, examples.Approval, first.ID)
		for _, tc := range []struct{ name, request, param string }{
			{"InputCaseVariant", prefix + `,"input":[` + answerItem("output", "approve") + `],"Input":[` +
				answerItem("output", "reject") + `]}`, "Input"},
			{"OutputCaseVariant", prefix + `,"input":[` + answerItem("output", "approve")[:len(answerItem("output", "approve"))-1] +
				`,"OUTPUT":"reject"}]}`, "input[0].OUTPUT"},
			{"StreamUpper", prefix + `,"STREAM":true,"input":[` + answerItem("output", "approve") + `]}`, "STREAM"},
			{"DuplicateInput", prefix + `,"input":[` + answerItem("output", "approve") + `],"input":[` +
				answerItem("output", "reject") + `]}`, "input"},
			// The request says reject, the params approve: what recovery
			// would read is not what the run was given.
			{"InputMismatch", prefix + `,"input":[` + answerItem("output", "reject") + `]}`, "input"},
		} {
			_, err := inc.h.Create(ctx, &host.CreateParams{Model: examples.Approval, Store: true, Background: true,
				PreviousResponseID: first.ID, Request: []byte(tc.request), Input: approve})
			var ie *host.InputError
			if !errors.As(err, &ie) || ie.Param != tc.param {
				t.Fatalf("%s: Create = %v, want an *InputError with param %q", tc.name, err, tc.param)
			}
		}
		// Nothing was stored: the run has one response, still its head.
		resps, err := inc.raw.ResponseListByRun(ctx, first.RunID)
		if err != nil || len(resps) != 1 {
			t.Fatalf("responses of the run: %d, %v; want only the first", len(resps), err)
		}
		run, err := inc.raw.RunGet(ctx, first.RunID)
		if err != nil || run.HeadResponseID != first.ID {
			t.Fatalf("run %+v, %v", run, err)
		}
		// An unambiguous request answers the question.
		second, err := inc.h.Create(ctx, &host.CreateParams{Model: examples.Approval, Store: true, Background: true,
			PreviousResponseID: first.ID, Request: []byte(prefix + `,"input":[` + answerItem("output", "approve") + `]}`),
			Input: approve})
		if err != nil {
			t.Fatal(err)
		}
		if done := wait(t, inc.h, second.ID); done.Status != store.StatusCompleted {
			t.Fatalf("status %s", done.Status)
		}
		if got := outputs(collect(t, inc.h, second.ID, -1)); !slices.Equal(got, []string{"approved"}) {
			t.Fatalf("outputs %q", got)
		}
	})
}

// TestHost_RecoveryReadsTheStoredRequest: a continuation whose process
// dies before its first commit is resumed from the stored request, read by
// the one reader the HTTP parser uses (here a raw body with the answer as
// content parts), on both backends; and a request stored by a library
// caller (no raw body) is stored in a form that reader reads back.
func TestHost_RecoveryReadsTheStoredRequest(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, db testDB) {
		for _, raw := range []bool{true, false} {
			inc := startIncarnation(t, db, host.Config{}, registerDemos, func(f *host.Fault) bool {
				return f.Point == host.FaultCommitBefore && f.Step == 2
			})
			ctx := testCtx(t)
			first := create(t, inc.h, examples.Approval, "deploy?", nil)
			evs := collect(t, inc.h, first.ID, -1)
			callID := evs[len(evs)-1].Response.Output[0].CallID
			p := &host.CreateParams{Model: examples.Approval, Store: true, Background: true, PreviousResponseID: first.ID,
				Input: []host.InputItem{{Type: host.InputFunctionCallOutput, CallID: callID, Output: "approve"}}}
			if raw {
				p.Request = fmt.Appendf(nil, `{"model":%q,"previous_response_id":%q,"truncation":"disabled",
					"input":[{"type":"function_call_output","call_id":%q,"output":[{"type":"input_text","text":"approve"}]}]}`,
					examples.Approval, first.ID, callID)
			}
			second, err := inc.h.Create(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			inc.crashed()
			inc2 := startIncarnation(t, db, host.Config{}, registerDemos, nil)
			sr, err := inc2.raw.ResponseGet(ctx, second.ID)
			if err != nil {
				t.Fatal(err)
			}
			if stored, err := protocol.ReadInput(sr.Request); err != nil || !reflect.DeepEqual(stored, p.Input) {
				t.Fatalf("stored request reads %+v, %v; want %+v", stored, err, p.Input)
			}
			if done := wait(t, inc2.h, second.ID); done.Status != store.StatusCompleted {
				t.Fatalf("raw %v: status %s", raw, done.Status)
			}
			if got := outputs(collect(t, inc2.h, second.ID, -1)); !slices.Equal(got, []string{"approved"}) {
				t.Fatalf("raw %v: outputs %q", raw, got)
			}
			inc2.close()
		}
	})
}

// An image sent to a workflow that takes text only is refused (400 on
// input), never dropped silently, and nothing is stored.
func TestHost_ImageToTextOnlyWorkflowRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, err := b.host.Create(testCtx(t), &host.CreateParams{Model: examples.Echo, Store: true,
		Request: []byte(`{"model":"demo.echo","input":[{"role":"user","content":[{"type":"input_text","text":"see"},` +
			`{"type":"input_image","image_url":"https://example.com/a.png"}]}]}`),
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "see", Parts: []protocol.Part{
			{Type: protocol.PartText, Text: "see"}, {Type: protocol.PartImage, ImageURL: "https://example.com/a.png"}}}}})
	var ie *host.InputError
	if !errors.As(err, &ie) || ie.Param != "input" || !strings.Contains(ie.Message, "text only") {
		t.Fatalf("image to a text-only workflow: %v", err)
	}
	if runs, err := b.store.RunList(testCtx(t), &store.RunListParams{}); err != nil || len(runs) != 0 {
		t.Fatalf("%d runs stored (%v)", len(runs), err)
	}
}
