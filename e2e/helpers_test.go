package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/superstep/superstep/store"
)

// streamed is what a test read from one stream.
type streamed struct {
	Events []responses.ResponseStreamEventUnion
	Err    error
}

func (s streamed) seqs() []int64 {
	out := make([]int64, len(s.Events))
	for i, ev := range s.Events {
		out[i] = ev.SequenceNumber
	}
	return out
}

func (s streamed) types() []string {
	out := make([]string, len(s.Events))
	for i, ev := range s.Events {
		out[i] = ev.Type
	}
	return out
}

func (s streamed) last() responses.ResponseStreamEventUnion {
	if len(s.Events) == 0 {
		return responses.ResponseStreamEventUnion{}
	}
	return s.Events[len(s.Events)-1]
}

// responseID returns the id carried by the stream's response.created.
func (s streamed) responseID(t *testing.T) string {
	t.Helper()
	for _, ev := range s.Events {
		if ev.Type == "response.created" {
			return ev.Response.ID
		}
	}
	t.Fatalf("stream has no response.created: %v", s.types())
	return ""
}

// drain reads a stream to its end; stop, when not nil, is called after
// each event and ends the reading early when it returns true.
func drain(st *ssestream.Stream[responses.ResponseStreamEventUnion], stop func(responses.ResponseStreamEventUnion) bool) streamed {
	var out streamed
	for st.Next() {
		ev := st.Current()
		out.Events = append(out.Events, ev)
		if stop != nil && stop(ev) {
			break
		}
	}
	out.Err = st.Err()
	_ = st.Close()
	return out
}

// requireContiguous fails unless seqs are from..from+n-1 exactly.
func requireContiguous(t *testing.T, seqs []int64, from int64) {
	t.Helper()
	for i, s := range seqs {
		if s != from+int64(i) {
			t.Fatalf("sequence numbers %v: want contiguous from %d (position %d has %d)", seqs, from, i, s)
		}
	}
}

// requireLifecycle checks a whole stream from sequence 0: one
// response.created first, contiguous numbers, one terminal event, last.
func requireLifecycle(t *testing.T, s streamed, terminal string) {
	t.Helper()
	if s.Err != nil {
		t.Fatalf("stream error: %v (events %v)", s.Err, s.types())
	}
	requireContiguous(t, s.seqs(), 0)
	if len(s.Events) < 2 || s.Events[0].Type != "response.created" {
		t.Fatalf("stream %v: want response.created first", s.types())
	}
	created, terminals := 0, 0
	for _, ev := range s.Events {
		switch ev.Type {
		case "response.created":
			created++
		case "response.completed", "response.failed", "response.incomplete", "response.cancelled":
			terminals++
		}
	}
	if created != 1 || terminals != 1 || s.last().Type != terminal {
		t.Fatalf("stream %v: want one response.created and one terminal event %s, last", s.types(), terminal)
	}
}

// outputTexts returns the text of each message item of a Response JSON, in
// output order.
func outputTexts(t *testing.T, raw string) []string {
	t.Helper()
	var r struct {
		Output []struct {
			Type    string `json:"type"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		t.Fatalf("decode response: %v\n%s", err, raw)
	}
	var out []string
	for _, it := range r.Output {
		if it.Type != "message" {
			continue
		}
		var b strings.Builder
		for _, c := range it.Content {
			if c.Type == "output_text" {
				b.WriteString(c.Text)
			}
		}
		out = append(out, b.String())
	}
	return out
}

// functionCall is a function_call output item.
type functionCall struct {
	ID        string  `json:"id"`
	Type      string  `json:"type"`
	Status    string  `json:"status"`
	CallID    string  `json:"call_id"`
	Name      string  `json:"name"`
	Arguments string  `json:"arguments"`
	Output    *string `json:"output"`
}

// toolCalls returns the server-run tool call items (mcp_call)
// of a Response object.
func toolCalls(t *testing.T, raw string) []functionCall {
	t.Helper()
	return itemsOfType(t, raw, "mcp_call")
}

func functionCalls(t *testing.T, raw string) []functionCall {
	t.Helper()
	return itemsOfType(t, raw, "function_call")
}

// itemsOfType returns the output items of type typ of a Response object.
func itemsOfType(t *testing.T, raw, typ string) []functionCall {
	t.Helper()
	var r struct {
		Output []functionCall `json:"output"`
	}
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		t.Fatalf("decode response: %v", err)
	}
	var out []functionCall
	for _, it := range r.Output {
		if it.Type == typ {
			out = append(out, it)
		}
	}
	return out
}

// streamTexts returns the texts of the output_text.done events of a stream.
func streamTexts(s streamed) []string {
	var out []string
	for _, ev := range s.Events {
		if ev.Type == "response.output_text.done" {
			out = append(out, ev.Text)
		}
	}
	return out
}

// storeDump is everything stored, to show that a rejected request changed
// nothing.
type storeDump struct {
	Runs      []store.Run
	Responses []store.Response
	Events    map[string][]store.Event
	Chkpts    map[string][]store.CheckpointInfo
}

func dumpStore(t *testing.T, s store.Store) storeDump {
	t.Helper()
	ctx := context.Background()
	d := storeDump{Events: map[string][]store.Event{}, Chkpts: map[string][]store.CheckpointInfo{}}
	runs, err := s.RunList(ctx, &store.RunListParams{Limit: 1000})
	if err != nil {
		t.Fatalf("RunList: %v", err)
	}
	for _, r := range runs {
		run := *r
		run.Lease.ExpiresAt, run.UpdatedAt = time.Time{}, time.Time{} // renewed in the background
		d.Runs = append(d.Runs, run)
		resps, err := s.ResponseListByRun(ctx, r.ID)
		if err != nil {
			t.Fatalf("ResponseListByRun: %v", err)
		}
		for _, resp := range resps {
			d.Responses = append(d.Responses, *resp)
			evs, err := s.EventList(ctx, &store.EventListParams{ResponseID: resp.ID, After: -1, Limit: 100000})
			if err != nil {
				t.Fatalf("EventList: %v", err)
			}
			d.Events[resp.ID] = evs
		}
		if d.Chkpts[r.ID], err = s.CheckpointList(ctx, r.ID); err != nil {
			t.Fatalf("CheckpointList: %v", err)
		}
	}
	return d
}

func requireSameDump(t *testing.T, before, after storeDump, what string) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("%s changed stored data:\nbefore %s\nafter  %s\n%s", what, summarize(before), summarize(after), dumpDiff(before, after))
	}
}

func summarize(d storeDump) string {
	var b strings.Builder
	for _, r := range d.Responses {
		fmt.Fprintf(&b, "[%s %s next=%d cancel=%v] ", r.ID, r.Status, r.NextSeq, r.CancelRequested)
	}
	return fmt.Sprintf("%d runs, %d responses: %s", len(d.Runs), len(d.Responses), b.String())
}

// waitTerminal polls until the response is in a terminal status.
func (e *env) waitTerminal(id string) *responses.Response {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r, err := e.client.Responses.Get(context.Background(), id, responses.ResponseGetParams{})
		if err != nil {
			e.t.Fatalf("Get %s: %v", id, err)
		}
		if store.Status(r.Status).Terminal() {
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("response %s not terminal after 30s", id)
	return nil
}

// readAll reads and closes a reply body.
func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dumpDiff names the first records that differ.
func dumpDiff(a, b storeDump) string {
	var out strings.Builder
	for i := range min(len(a.Runs), len(b.Runs)) {
		if !reflect.DeepEqual(a.Runs[i], b.Runs[i]) {
			fmt.Fprintf(&out, "run:\n %+v\n %+v\n", a.Runs[i], b.Runs[i])
		}
	}
	for i := range min(len(a.Responses), len(b.Responses)) {
		if !reflect.DeepEqual(a.Responses[i], b.Responses[i]) {
			x, y := a.Responses[i], b.Responses[i]
			x.Snapshot, y.Snapshot, x.Request, y.Request = nil, nil, nil, nil
			fmt.Fprintf(&out, "response:\n %+v\n %+v\n", x, y)
		}
	}
	if !reflect.DeepEqual(a.Events, b.Events) {
		out.WriteString("events differ\n")
	}
	if !reflect.DeepEqual(a.Chkpts, b.Chkpts) {
		out.WriteString("checkpoints differ\n")
	}
	return out.String()
}

// settledDump waits until no run is active or holds a lease (the host
// releases leases just after a run finishes) and returns the dump: the
// state a rejected request must leave untouched.
func settledDump(t *testing.T, s store.Store) storeDump {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := dumpStore(t, s)
		busy := false
		for _, r := range d.Runs {
			busy = busy || r.Active || r.Lease.Owner != ""
		}
		if !busy {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs still active or leased after 10s: %+v", d.Runs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
