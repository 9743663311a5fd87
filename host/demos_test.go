package host_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/store"
)

// demoCases are the demo workflows with their input and expected outputs.
var demoCases = []struct {
	model   string
	input   string
	md      map[string]string
	outputs []string
}{
	{examples.Echo, "hello", nil, []string{"hello"}},
	{examples.TwoOutputs, "x", nil, []string{"first-2", "second-2", "done"}},
	{examples.Silent, "x", map[string]string{"steps": "3"}, []string{"done after 3"}},
	{examples.Silent, "x", nil, []string{"done after 5"}},
	{examples.Approval, "ship it?", nil, []string{`approve({"question":"ship it?"})`}},
	{examples.Fanout, "x", map[string]string{"workers": "3"}, []string{"worker-0,worker-1,worker-2"}},
	{examples.Fanout, "x", nil, []string{"worker-0,worker-1,worker-2,worker-3"}},
}

func TestHost_Demos(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, tc := range demoCases {
		t.Run(fmt.Sprintf("%s/%v", tc.model, tc.md), func(t *testing.T) {
			t.Parallel()
			{
				model := tc.model
				r := create(t, b.host, model, tc.input, tc.md)
				if r.Status != store.StatusQueued {
					t.Fatalf("created status %s, want queued (background)", r.Status)
				}
				evs := collect(t, b.host, r.ID, -1)
				checkLog(t, evs)
				if got := outputs(evs); !slices.Equal(got, tc.outputs) {
					t.Fatalf("%s outputs %q, want %q", model, got, tc.outputs)
				}
				final := wait(t, b.host, r.ID)
				snap := snapshot(t, final)
				if final.Status != store.StatusCompleted || snap.Status != "completed" || len(snap.Usage) == 0 ||
					string(snap.Usage) == "null" {
					t.Fatalf("final %s/%s usage %s", final.Status, snap.Status, snap.Usage)
				}
				if last := evs[len(evs)-1]; len(last.Response.Output) != len(tc.outputs) {
					t.Fatalf("terminal response has %d output items, want %d", len(last.Response.Output), len(tc.outputs))
				}
			}
		})
	}
}

func TestHost_Echo_EventShapes(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	r := create(t, b.host, examples.Echo, "hi there", nil)
	evs := collect(t, b.host, r.ID, -1)
	want := "created in_progress output_item.added content_part.added output_text.delta output_text.done " +
		"content_part.done output_item.done completed"
	if got := types(evs); got != want {
		t.Fatalf("events %s\nwant   %s", got, want)
	}
	if evs[4].Delta != "hi there" || evs[5].Text != "hi there" {
		t.Fatalf("delta %q text %q", evs[4].Delta, evs[5].Text)
	}
	item := evs[7].Item
	if item.ID != evs[2].Item.ID || !strings.HasPrefix(item.ID, "msg_") || item.Status != "completed" {
		t.Fatalf("item %+v", item)
	}
	// Replay from the middle repeats the original numbers.
	tail := collect(t, b.host, r.ID, 5)
	if len(tail) != 3 || tail[0].SequenceNumber != 6 {
		t.Fatalf("tail after 5: %s", types(tail))
	}
	if got := collect(t, b.host, r.ID, 8); len(got) != 0 {
		t.Fatalf("after the terminal event: %s", types(got))
	}
	// Every ResponseResource field is present, nullable ones as null.
	var raw map[string]json.RawMessage
	final := wait(t, b.host, r.ID)
	if err := json.Unmarshal(final.Snapshot, &raw); err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(`id object created_at completed_at status incomplete_details model
		previous_response_id instructions output error tools tool_choice truncation parallel_tool_calls text
		top_p presence_penalty frequency_penalty top_logprobs temperature reasoning user usage
		max_output_tokens max_tool_calls store background service_tier metadata safety_identifier
		prompt_cache_key`) {
		if _, ok := raw[f]; !ok {
			t.Errorf("snapshot lacks %q", f)
		}
	}
}
