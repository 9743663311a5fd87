package multihost

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

// config is one kind of request: a demo workflow and its metadata. Its
// name goes into metadata.workload so the reference outcome can be found
// for any response in the database.
type config struct {
	name  string
	model string
	meta  map[string]string
}

// httpClient keeps no idle connections: servers die under them, and no
// connection goroutine outlives a test.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// newClient returns an openai-go client for base with retries off: the
// tests reconnect themselves, to another host, with starting_after.
func newClient(base string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("multihost-test"),
		option.WithMaxRetries(0), option.WithHTTPClient(httpClient))
}

// newParams returns the create request of cfg.
func newParams(cfg config, delayMS int) responses.ResponseNewParams {
	meta := map[string]string{"workload": cfg.name, "step_delay_ms": strconv.Itoa(delayMS)}
	for k, v := range cfg.meta {
		meta[k] = v
	}
	return responses.ResponseNewParams{
		Model:      cfg.model,
		Input:      responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
		Background: openai.Bool(true),
		Store:      openai.Bool(true),
		Metadata:   meta,
	}
}

// stream is one client's reading of one response across reconnections,
// possibly to different hosts.
type stream struct {
	cl       *cluster
	name     string
	id       string
	view     verify.ClientView
	terminal bool
	retries  int
	switches int    // reconnections that went to another host
	base     string // the host of the last connection
	lastErr  error
	// pin, when set, is the only host the stream connects to.
	pin string
	// onID, when set, is called with the response id once
	// response.created arrived.
	onID func(string)
}

// host returns the host for the next connection: the pinned one, or a
// random running host other than avoid.
func (st *stream) host(ctx context.Context, avoid string) (string, error) {
	if st.pin != "" {
		return st.pin, nil
	}
	return st.cl.pick(ctx, avoid)
}

// read consumes s until it ends, recording events; it returns the stream's
// error (nil at a clean end).
func (st *stream) read(s *ssestream.Stream[responses.ResponseStreamEventUnion]) error {
	defer s.Close()
	for s.Next() {
		ev := s.Current()
		raw := ev.RawJSON()
		st.view.Events = append(st.view.Events, verify.ReceivedEvent{Seq: ev.SequenceNumber, Type: ev.Type, Data: []byte(raw)})
		if st.id == "" && ev.Type == "response.created" {
			var created struct {
				Response struct {
					ID string `json:"id"`
				} `json:"response"`
			}
			if err := json.Unmarshal([]byte(raw), &created); err != nil || created.Response.ID == "" {
				return fmt.Errorf("multihost: response.created without a response id: %s", raw)
			}
			st.id = created.Response.ID
			if st.onID != nil {
				st.onID(st.id)
			}
		}
		if verify.IsTerminal(ev.Type) {
			st.terminal = true
		}
	}
	return s.Err()
}

// last returns the last sequence number received (StartAt-1 for none).
func (st *stream) last() int64 {
	if n := len(st.view.Events); n > 0 {
		return st.view.Events[n-1].Seq
	}
	return st.view.StartAt - 1
}

// create posts a background streaming request to a random host and reads
// until the stream ends (st.id is set once response.created arrived). Only
// a 4xx reply is an error: a kill may cut the request at any point.
func (st *stream) create(ctx context.Context, cfg config, delayMS int) error {
	base, err := st.host(ctx, "")
	if err != nil {
		return err
	}
	st.base = base
	c := newClient(base)
	err = st.read(c.Responses.NewStreaming(ctx, newParams(cfg, delayMS)))
	st.lastErr = err
	return fatalHTTP(err)
}

// follow reconnects with GetStreaming and starting_after (the last
// sequence number received; none when nothing was, which replays from
// StartAt 0) until the terminal event. After a broken connection it goes
// to another host than the one that broke.
func (st *stream) follow(ctx context.Context) error {
	for !st.terminal {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("multihost: %s: gave up after %d reconnections at seq %d (last error: %v): %w",
				st.name, st.retries, st.last(), st.lastErr, err)
		}
		avoid := ""
		if st.lastErr != nil {
			avoid = st.base
		}
		base, err := st.host(ctx, avoid)
		if err != nil {
			continue
		}
		if st.base != "" && base != st.base {
			st.switches++
		}
		st.base = base
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
			return fmt.Errorf("multihost: %s: GET %s on %s starting_after=%d: %w", st.name, st.id, base, st.last(), fatal)
		}
		st.lastErr = err
		if err == nil {
			// A clean end ([DONE]) of a stream that had no terminal event:
			// the cursor was at or past the end of a finished response;
			// the view check tells whether that was the end of the log.
			return nil
		}
		sleep(ctx, 10*time.Millisecond)
	}
	return nil
}

// fatalHTTP returns err when it is an HTTP error a dying host cannot
// explain (4xx); connection errors and 5xx are expected.
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

// isTerminalStatus reports whether a response status is final.
func isTerminalStatus(s responses.ResponseStatus) bool {
	switch s {
	case responses.ResponseStatusCompleted, responses.ResponseStatusFailed,
		responses.ResponseStatusCancelled, responses.ResponseStatusIncomplete:
		return true
	}
	return false
}

// poll GETs response id on random hosts (another one after a failure)
// until it is terminal; it returns the number of polls and the final
// response body.
func poll(ctx context.Context, cl *cluster, id string, every time.Duration) (int, []byte, error) {
	avoid := ""
	for n := 1; ; n++ {
		base, err := cl.pick(ctx, avoid)
		if err != nil {
			return n, nil, fmt.Errorf("multihost: poll %s: %w", id, err)
		}
		c := newClient(base)
		resp, err := c.Responses.Get(ctx, id, responses.ResponseGetParams{})
		if fatal := fatalHTTP(err); fatal != nil {
			return n, nil, fmt.Errorf("multihost: poll %s on %s: %w", id, base, fatal)
		}
		avoid = ""
		if err != nil {
			avoid = base
		} else if isTerminalStatus(resp.Status) {
			return n, []byte(resp.RawJSON()), nil
		}
		if ctx.Err() != nil {
			return n, nil, fmt.Errorf("multihost: poll %s: %w", id, ctx.Err())
		}
		sleep(ctx, every)
	}
}
