package crash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/superstep/superstep/verify"
)

// config is one kind of request the test sends: a demo workflow and its
// metadata. Its name goes into metadata.workload so the reference outcome
// can be found for any response in the database.
type config struct {
	name  string
	model string
	meta  map[string]string
	// input is the request's input text ("" means "hello").
	input string
	// cancel: a client cancels the response at a random moment; its
	// outcome then depends on that moment, so it has no reference.
	cancel bool
}

// configs are the workloads: silent supersteps, two outputs in one
// superstep, a fan-out/fan-in, a cancel at a random moment, and live
// publication (text deltas logged before their superstep commits).
var configs = []config{
	{name: "silent-8", model: "demo.silent", meta: map[string]string{"steps": "8"}},
	{name: "two-outputs", model: "demo.two-outputs"},
	{name: "fanout-4", model: "demo.fanout", meta: map[string]string{"workers": "4"}},
	{name: "cancel-silent-30", model: "demo.silent", meta: map[string]string{"steps": "30"}, cancel: true},
	{name: "stream-live", model: "demo.stream", meta: map[string]string{"publication": "live"}},
}

// stream is one client's reading of one response across reconnections.
type stream struct {
	cl       *cluster
	name     string
	id       string
	view     verify.ClientView
	terminal bool
	retries  int
	lastErr  error // of the last connection
}

// httpClient keeps no idle connections: servers die under them, and no
// connection goroutine outlives a test.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// newClient returns an openai-go client for base with retries off: the
// test reconnects itself, with starting_after.
func newClient(base string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("crash-test"),
		option.WithMaxRetries(0), option.WithHTTPClient(httpClient))
}

// read consumes s until it ends, recording events; it returns the stream's
// error (nil at a clean end).
func (st *stream) read(s *ssestream.Stream[responses.ResponseStreamEventUnion]) error {
	defer s.Close()
	for s.Next() {
		ev := s.Current()
		raw := ev.RawJSON()
		st.view.Events = append(st.view.Events, verify.ReceivedEvent{Seq: ev.SequenceNumber, Type: ev.Type, Data: []byte(raw)})
		if ev.Type == "response.output_text.delta" {
			st.cl.deltas.Add(1)
		}
		if st.id == "" && ev.Type == "response.created" {
			var created struct {
				Response struct {
					ID string `json:"id"`
				} `json:"response"`
			}
			if err := json.Unmarshal([]byte(raw), &created); err != nil || created.Response.ID == "" {
				return fmt.Errorf("crash: response.created without a response id: %s", raw)
			}
			st.id = created.Response.ID
		}
		if verify.IsTerminal(ev.Type) {
			st.terminal = true
		}
	}
	return s.Err()
}

// last returns the last sequence number received (-1 for none).
func (st *stream) last() int64 {
	if n := len(st.view.Events); n > 0 {
		return st.view.Events[n-1].Seq
	}
	return st.view.StartAt - 1
}

// create posts a background streaming request and reads until the stream
// ends (st.id is set once response.created arrived). Only a 4xx reply is
// an error: a kill may cut the request at any point.
func (st *stream) create(ctx context.Context, cfg config, delayMS int) error {
	base, err := st.cl.current(ctx)
	if err != nil {
		return err
	}
	meta := map[string]string{"workload": cfg.name, "step_delay_ms": strconv.Itoa(delayMS)}
	for k, v := range cfg.meta {
		meta[k] = v
	}
	input := cfg.input
	if input == "" {
		input = "hello"
	}
	c := newClient(base)
	s := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model:      cfg.model,
		Input:      responses.ResponseNewParamsInputUnion{OfString: openai.String(input)},
		Background: openai.Bool(true),
		Store:      openai.Bool(true),
		Metadata:   meta,
	})
	err = st.read(s)
	st.lastErr = err
	if fatal := fatalHTTP(err); fatal != nil {
		return fatal
	}
	return nil
}

// follow reconnects with GetStreaming and starting_after (the last
// sequence number received; none when nothing was, which replays from
// StartAt 0) until the terminal event, across any number of server
// restarts.
func (st *stream) follow(ctx context.Context) error {
	for !st.terminal {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("crash: %s: gave up after %d reconnections at seq %d (last error: %v): %w", st.name, st.retries, st.last(), st.lastErr, err)
		}
		base, err := st.cl.current(ctx)
		if err != nil {
			continue
		}
		var q responses.ResponseGetParams
		if cursor := st.last(); cursor >= 0 {
			q.StartingAfter = openai.Int(cursor)
			if len(st.view.Events) > 0 || st.retries > 0 {
				st.view.ResumedAt = append(st.view.ResumedAt, cursor)
			}
		}
		st.retries++
		c := newClient(base)
		err = st.read(c.Responses.GetStreaming(ctx, st.id, q))
		if fatal := fatalHTTP(err); fatal != nil {
			return fmt.Errorf("crash: %s: GET %s starting_after=%d: %w", st.name, st.id, st.last(), fatal)
		}
		st.lastErr = err
		if err == nil {
			// A clean end ([DONE]) of a stream that had no terminal event: the
			// cursor was at or past the end of a finished response. The view
			// check tells whether that was the end of the log.
			return nil
		}
		sleep(ctx, 10*time.Millisecond)
	}
	return nil
}

// fatalHTTP returns err when it is an HTTP error a restart cannot explain
// (4xx); connection errors and 5xx during a restart are expected.
func fatalHTTP(err error) error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) && apiErr.StatusCode >= 400 && apiErr.StatusCode < 500 {
		return err
	}
	return nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// cancelAfter waits d, then cancels response id, retrying across restarts
// until the server answers; it returns the status the reply showed.
func cancelAfter(ctx context.Context, cl *cluster, id string, d time.Duration) (string, error) {
	sleep(ctx, d)
	for ctx.Err() == nil {
		base, err := cl.current(ctx)
		if err != nil {
			break
		}
		c := newClient(base)
		resp, err := c.Responses.Cancel(ctx, id)
		if err == nil {
			return string(resp.Status), nil
		}
		if fatal := fatalHTTP(err); fatal != nil {
			return "", fmt.Errorf("crash: cancel %s: %w", id, fatal)
		}
		sleep(ctx, 10*time.Millisecond)
	}
	return "", fmt.Errorf("crash: cancel %s: %w", id, ctx.Err())
}
