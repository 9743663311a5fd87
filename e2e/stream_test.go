package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

func textInput(s string) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfString: openai.String(s)}
}

func TestStreaming_Echo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	s := drain(e.client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "demo.echo", Input: textInput("hello, world")}), nil)
	requireLifecycle(t, s, "response.completed")
	if got := streamTexts(s); !slices.Equal(got, []string{"hello, world"}) {
		t.Fatalf("streamed texts %q, want [hello, world]", got)
	}
	var deltas strings.Builder
	for _, ev := range s.Events {
		if ev.Type == "response.output_text.delta" {
			deltas.WriteString(ev.Delta)
		}
	}
	if deltas.String() != "hello, world" {
		t.Errorf("deltas join to %q", deltas.String())
	}
	final := s.last().Response
	if final.Status != "completed" || final.OutputText() != "hello, world" {
		t.Errorf("terminal response status %q text %q", final.Status, final.OutputText())
	}
	got, err := e.client.Responses.Get(ctx, final.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != "hello, world" || got.Status != "completed" {
		t.Fatalf("Get after stream: %v %+v", err, got)
	}
}

// TestStreaming_RawFraming reads the SSE bytes: every frame is an event
// line plus one data line, numbers run from 0, and [DONE] follows the
// terminal event, after which the body ends.
func TestStreaming_RawFraming(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	resp := e.rawDo(t, "POST", "/v1/responses", `{"model":"demo.two-outputs","input":"x","stream":true}`, nil)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d content-type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	frames := readFrames(t, resp.Body)
	if n := len(frames); n < 3 || frames[n-1].data != "[DONE]" || frames[n-2].event != "response.completed" {
		t.Fatalf("frames end %+v, want response.completed then [DONE]", frames[max(0, n-2):])
	}
	for i, f := range frames[:len(frames)-1] {
		var ev struct {
			Type string `json:"type"`
			Seq  int64  `json:"sequence_number"`
		}
		if err := json.Unmarshal([]byte(f.data), &ev); err != nil || ev.Type != f.event || ev.Seq != int64(i) {
			t.Fatalf("frame %d: event %q data %s (err %v): want matching type and sequence_number %d", i, f.event, f.data, err, i)
		}
	}
}

// TestGet_StreamFlagInQueryAndBody resumes through both ways clients ask
// for a stream: openai-go's GET body and the query string of the other
// SDKs (with include[] brackets); Accept is never looked at.
func TestGet_StreamFlagInQueryAndBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	first := drain(e.client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "demo.two-outputs", Input: textInput("x")}), nil)
	requireLifecycle(t, first, "response.completed")
	id := first.responseID(t)

	sdk := drain(e.client.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(2),
		Include: []responses.ResponseIncludable{"reasoning.encrypted_content"}}), nil)
	if sdk.Err != nil || !slices.Equal(sdk.seqs(), first.seqs()[3:]) {
		t.Fatalf("GetStreaming after 2: %v %v, want %v", sdk.Err, sdk.seqs(), first.seqs()[3:])
	}
	resp := e.rawDo(t, "GET", "/v1/responses/"+id+"?stream=true&starting_after=2&include[]=x&include=y", "",
		map[string]string{"Accept": "application/json"})
	defer resp.Body.Close()
	frames := readFrames(t, resp.Body)
	if len(frames) != len(sdk.Events)+1 || frames[len(frames)-1].data != "[DONE]" {
		t.Fatalf("query stream has %d frames, want %d events and [DONE]", len(frames), len(sdk.Events))
	}
	for i, ev := range sdk.Events {
		if frames[i].data != ev.RawJSON() {
			t.Fatalf("frame %d differs between query and body stream:\n%s\n%s", i, frames[i].data, ev.RawJSON())
		}
	}
	// Without the stream flag the same GET (Accept: text/event-stream) is a poll.
	poll := e.rawDo(t, "GET", "/v1/responses/"+id, "", map[string]string{"Accept": "text/event-stream"})
	defer poll.Body.Close()
	if ct := poll.Header.Get("Content-Type"); poll.StatusCode != 200 || ct != "application/json" {
		t.Fatalf("poll: %d %s", poll.StatusCode, ct)
	}
}

func TestBackground_Polling(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	r, err := e.client.Responses.New(ctx, responses.ResponseNewParams{Model: "demo.silent", Input: textInput("go"),
		Background: openai.Bool(true), Metadata: shared.Metadata{"steps": "3", "step_delay_ms": "30"}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Background || (r.Status != "queued" && r.Status != "in_progress") || len(r.Output) != 0 {
		t.Fatalf("background create returned status %q background %v output %d", r.Status, r.Background, len(r.Output))
	}
	final := e.waitTerminal(r.ID)
	if final.Status != "completed" || final.OutputText() != "done after 3" {
		t.Fatalf("final %q %q", final.Status, final.OutputText())
	}
	if final.Metadata["steps"] != "3" {
		t.Errorf("metadata not echoed: %v", final.Metadata)
	}
}

func TestSync_WaitsForFinal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r, err := e.client.Responses.New(context.Background(), responses.ResponseNewParams{Model: "demo.two-outputs", Input: textInput("x")})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "completed" || !slices.Equal(outputTexts(t, r.RawJSON()), []string{"first-2", "second-2", "done"}) {
		t.Fatalf("sync reply %q %q", r.Status, outputTexts(t, r.RawJSON()))
	}
}

// TestStream_DroppedConnectionResumed cuts the TCP connection in the
// middle of a background stream, then resumes with GetStreaming and
// StartingAfter: together the two reads hold every event once, in order.
func TestStream_DroppedConnectionResumed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	st := e.client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "demo.silent", Input: textInput("go"),
		Background: openai.Bool(true), Metadata: shared.Metadata{"steps": "4", "step_delay_ms": "150"}})
	first := drain(st, func(ev responses.ResponseStreamEventUnion) bool {
		if ev.Type == "response.in_progress" {
			e.dialer.cut() // the network fails; keep reading to see the error
		}
		return false
	})
	if first.Err == nil {
		t.Fatalf("stream survived the cut: %v", first.types())
	}
	if slices.Contains(first.types(), "response.completed") {
		t.Fatalf("run finished before the cut; make it slower (%v)", first.types())
	}
	id := first.responseID(t)
	cursor := first.last().SequenceNumber
	rest := drain(e.client.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(cursor)}), nil)
	if rest.Err != nil {
		t.Fatalf("resumed stream: %v", rest.Err)
	}
	all := streamed{Events: append(slices.Clone(first.Events), rest.Events...)}
	requireLifecycle(t, all, "response.completed")
	if got := all.last().Response.OutputText(); got != "done after 4" {
		t.Fatalf("final text %q", got)
	}
	// A replay from 0 gives byte-identical events.
	replay := drain(e.client.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{}), nil)
	requireSameEvents(t, replay, all)
}

func TestStream_ReplayFromZeroAndManyReaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	// Read only response.created, then leave: the background run goes on.
	head := drain(e.client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "demo.silent", Input: textInput("go"),
		Background: openai.Bool(true), Metadata: shared.Metadata{"steps": "3", "step_delay_ms": "40"}}),
		func(responses.ResponseStreamEventUnion) bool { return true })
	id := head.responseID(t)
	readers := make(chan streamed, 3)
	for range 3 {
		go func() { readers <- drain(e.client.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{}), nil) }()
	}
	var got []streamed
	for range 3 {
		got = append(got, <-readers)
	}
	requireLifecycle(t, got[0], "response.completed")
	for _, s := range got[1:] {
		requireSameEvents(t, s, got[0])
	}
	after := drain(e.client.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(got[0].last().SequenceNumber)}), nil)
	if after.Err != nil || len(after.Events) != 0 {
		t.Fatalf("stream after the last event: %v %v, want empty", after.Err, after.types())
	}
}

func requireSameEvents(t *testing.T, got, want streamed) {
	t.Helper()
	if got.Err != nil || len(got.Events) != len(want.Events) {
		t.Fatalf("stream %v (err %v), want %v", got.types(), got.Err, want.types())
	}
	for i := range got.Events {
		if got.Events[i].RawJSON() != want.Events[i].RawJSON() {
			t.Fatalf("event %d differs:\n%s\n%s", i, got.Events[i].RawJSON(), want.Events[i].RawJSON())
		}
	}
}

// TestStream_KeepAlive: an idle stream gets comment lines.
func TestStream_KeepAlive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &envOpts{KeepAlive: 20 * time.Millisecond})
	resp := e.rawDo(t, "POST", "/v1/responses",
		`{"model":"demo.silent","input":"x","stream":true,"metadata":{"steps":"2","step_delay_ms":"150"}}`, nil)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), "\n: keep-alive\n\n") || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Fatalf("no keep-alive comment in an idle stream, or no [DONE] at its end:\n%s", body)
	}
}

type frame struct{ event, data string }

// readFrames parses an SSE body (comments skipped) until EOF.
func readFrames(t *testing.T, r io.Reader) []frame {
	t.Helper()
	var out []frame
	var cur frame
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur != (frame{}) {
				out = append(out, cur)
			}
			cur = frame{}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data += strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading SSE: %v", err)
	}
	return out
}

// rawDo sends a request with the env's key and returns the reply.
func (e *env) rawDo(t *testing.T, method, path, body string, headers map[string]string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.apiKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestStream_DeleteWhileFollowing deletes a running response while a
// client follows its stream: the follower does not hang. Delete cancels
// first, so it gets response.cancelled and [DONE]; when the delete wins the
// race with its read it gets an error frame (event: error, with a
// top-level "error" key) naming the response. Afterwards the response is
// gone.
func TestStream_DeleteWhileFollowing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	head := drain(e.client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "demo.silent", Input: textInput("go"),
		Background: openai.Bool(true), Metadata: shared.Metadata{"steps": "100", "step_delay_ms": "20"}}),
		func(ev responses.ResponseStreamEventUnion) bool { return ev.Type == "response.in_progress" })
	id := head.responseID(t)
	resp := e.rawDo(t, "GET", "/v1/responses/"+id+"?stream=true", "", nil)
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if line, err := rd.ReadString('\n'); err != nil || line != "event: response.created\n" {
		t.Fatalf("first line %q %v", line, err)
	}
	if err := e.client.Responses.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	frames := readFrames(t, rd)
	n := len(frames)
	switch {
	case n >= 2 && frames[n-2].event == "response.cancelled" && frames[n-1].data == "[DONE]":
	case n >= 1 && frames[n-1].event == "error":
		var ev struct {
			Type, Code, Message string
			Error               struct{ Code, Message string }
		}
		if err := json.Unmarshal([]byte(frames[n-1].data), &ev); err != nil || ev.Type != "error" || ev.Code != "not_found" ||
			ev.Error.Code != "not_found" || !strings.Contains(ev.Message, id) {
			t.Fatalf("error frame %s", frames[n-1].data)
		}
	default:
		t.Fatalf("stream after delete ends with %+v, want response.cancelled then [DONE], or an error frame", frames[max(0, n-2):])
	}
	again := e.rawDo(t, "GET", "/v1/responses/"+id+"?stream=true", "", nil)
	if readAll(t, again); again.StatusCode != http.StatusNotFound {
		t.Fatalf("stream of a deleted response: %d", again.StatusCode)
	}
}

// BenchmarkCreateStreamEcho measures a whole streamed demo.echo turn over
// HTTP with openai-go: create, commit, publish, read to [DONE].
func BenchmarkCreateStreamEcho(b *testing.B) {
	e := newEnv(b, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s := drain(e.client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "demo.echo", Input: textInput("hi")}), nil)
		if s.Err != nil || s.last().Type != "response.completed" {
			b.Fatalf("stream: %v %v", s.Err, s.types())
		}
	}
}
