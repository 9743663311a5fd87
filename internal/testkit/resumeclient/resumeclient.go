// Package resumeclient is the client side of superstep's process-killing
// tests (e2e/crash, e2e/multihost): an openai-go streaming client that
// follows one response across any number of server deaths by reconnecting
// with starting_after, possibly to another host, and records every event
// it received as a verify.ClientView for package verify to check against
// the response's log.
//
// It is a test harness (see internal/testkit): only tests import it.
package resumeclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/superstep/superstep/verify"
)

// retryDelay is the pause between reconnections: short, since a restarted
// server or another host is usually up within milliseconds.
const retryDelay = 10 * time.Millisecond

// httpClient keeps no idle connections: servers die under them, and no
// connection goroutine outlives a test.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// NewClient returns an openai-go client for the server at base
// (http://host:port) with retries off: the tests reconnect themselves,
// with starting_after, and must see every failure.
func NewClient(base, apiKey string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey(apiKey),
		option.WithMaxRetries(0), option.WithHTTPClient(httpClient))
}

// NewParams returns a background, stored create request of a demo
// workflow: model with input ("hello" when empty), and metadata meta plus
// workload (metadata.workload, so the reference outcome can be found for
// any response in the database) and step_delay_ms.
func NewParams(workload, model, input string, meta map[string]string, delayMS int) responses.ResponseNewParams {
	md := map[string]string{"workload": workload, "step_delay_ms": strconv.Itoa(delayMS)}
	for k, v := range meta {
		md[k] = v
	}
	if input == "" {
		input = "hello"
	}
	return responses.ResponseNewParams{
		Model:      model,
		Input:      responses.ResponseNewParamsInputUnion{OfString: openai.String(input)},
		Background: openai.Bool(true),
		Store:      openai.Bool(true),
		Metadata:   md,
	}
}

// FatalHTTP returns err when it is an HTTP error a dying or restarting
// server cannot explain (4xx but 401), and nil otherwise: connection
// errors and 5xx are what a kill looks like to a client, and so is 401
// (see WrongServer).
func FatalHTTP(err error) error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) && apiErr.StatusCode >= 400 && apiErr.StatusCode < 500 && !WrongServer(err) {
		return err
	}
	return nil
}

// WrongServer reports whether err is a 401: the tests give each cluster a
// key of its own, so a 401 is another test's server that took the port of
// one of ours after it was killed, reached with an address read before
// the kill. It refused the request unread: ask Host again.
func WrongServer(err error) bool {
	var apiErr *openai.Error
	return errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusUnauthorized
}

// Sleep waits d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Stream is one client's reading of one response across reconnections. It
// is used by one goroutine at a time.
type Stream struct {
	// Name names the client in failure messages and in its view.
	Name string
	// APIKey is sent with every request ("resumeclient" when empty).
	APIKey string
	// Host returns the base URL for the next connection, waiting while no
	// server is up; avoid is the server whose connection just broke ("" if
	// none), which a multi-host test may skip.
	Host func(ctx context.Context, avoid string) (string, error)
	// OnEvent, when set, is called with the type of every event received.
	OnEvent func(typ string)
	// OnID, when set, is called with the response id once
	// response.created arrived.
	OnID func(id string)

	// ID is the response id: set by Create once response.created arrived,
	// or by the caller before Follow.
	ID string
	// View is what the client received. Set View.StartAt before the first
	// Follow of a client that joins later.
	View verify.ClientView
	// Terminal is set once the terminal event arrived.
	Terminal bool
	// Retries counts the connections Follow made.
	Retries int
	// Switches counts the connections that went to another server than the
	// one before.
	Switches int
	// Base is the server of the last connection.
	Base string
	// LastErr is the error that ended the last connection (nil for a
	// clean end).
	LastErr error
}

// ClientView returns View named after the client.
func (st *Stream) ClientView() verify.ClientView {
	v := st.View
	v.Name = st.Name
	return v
}

// ViewsByID returns the views of streams by response id, for
// verify.ResponseInput.Clients; nil streams and streams without an id (a
// create cut before response.created) are left out.
func ViewsByID(streams ...*Stream) map[string][]verify.ClientView {
	out := map[string][]verify.ClientView{}
	for _, st := range streams {
		if st != nil && st.ID != "" {
			out[st.ID] = append(out[st.ID], st.ClientView())
		}
	}
	return out
}

// client returns an openai-go client for base.
func (st *Stream) client(base string) openai.Client {
	key := st.APIKey
	if key == "" {
		key = "resumeclient"
	}
	return NewClient(base, key)
}

// Read consumes s until it ends, recording events; it returns the stream's
// error (nil at a clean end).
func (st *Stream) Read(s *ssestream.Stream[responses.ResponseStreamEventUnion]) error {
	defer s.Close()
	for s.Next() {
		ev := s.Current()
		raw := ev.RawJSON()
		st.View.Events = append(st.View.Events, verify.ReceivedEvent{Seq: ev.SequenceNumber, Type: ev.Type, Data: []byte(raw)})
		if st.OnEvent != nil {
			st.OnEvent(ev.Type)
		}
		if st.ID == "" && ev.Type == "response.created" {
			var created struct {
				Response struct {
					ID string `json:"id"`
				} `json:"response"`
			}
			if err := json.Unmarshal([]byte(raw), &created); err != nil || created.Response.ID == "" {
				return fmt.Errorf("resumeclient: %s: response.created without a response id: %s", st.Name, raw)
			}
			st.ID = created.Response.ID
			if st.OnID != nil {
				st.OnID(st.ID)
			}
		}
		if verify.IsTerminal(ev.Type) {
			st.Terminal = true
		}
	}
	return s.Err()
}

// Last returns the last sequence number received (View.StartAt-1 when
// none was).
func (st *Stream) Last() int64 {
	if n := len(st.View.Events); n > 0 {
		return st.View.Events[n-1].Seq
	}
	return st.View.StartAt - 1
}

// Create posts a streaming create request and reads until the stream
// ends (ID is set once response.created arrived). Only a 4xx reply is an
// error: a kill may cut the request at any point.
func (st *Stream) Create(ctx context.Context, params responses.ResponseNewParams) error {
	avoid := ""
	for {
		base, err := st.Host(ctx, avoid)
		if err != nil {
			return err
		}
		st.Base = base
		c := st.client(base)
		err = st.Read(c.Responses.NewStreaming(ctx, params))
		st.LastErr = err
		if !WrongServer(err) {
			return FatalHTTP(err)
		}
		// Refused unread by a server not ours: nothing was created.
		avoid = base
		Sleep(ctx, retryDelay)
	}
}

// Run creates the response with params and follows it to its terminal
// event (Create, then Follow). A create stream cut before response.created
// is an error: with no id there is nothing to follow.
func (st *Stream) Run(ctx context.Context, params responses.ResponseNewParams) error {
	if err := st.Create(ctx, params); err != nil {
		return err
	}
	if st.ID == "" {
		return fmt.Errorf("resumeclient: %s: the create stream ended before response.created (last error: %v)", st.Name, st.LastErr)
	}
	return st.Follow(ctx)
}

// Follow reconnects with GetStreaming and starting_after (the last
// sequence number received; none when nothing was, which replays from
// StartAt 0) until the terminal event, across any number of server
// restarts; after a broken connection it asks Host to avoid the server
// that broke. It returns nil, without the terminal event, when a
// connection ends cleanly ([DONE]) before it: the cursor was at or past
// the end of a finished response, and the view check tells whether that
// was the end of the log.
func (st *Stream) Follow(ctx context.Context) error {
	for !st.Terminal {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("resumeclient: %s: gave up after %d reconnections at seq %d (last error: %v): %w",
				st.Name, st.Retries, st.Last(), st.LastErr, err)
		}
		avoid := ""
		if st.LastErr != nil {
			avoid = st.Base
		}
		base, err := st.Host(ctx, avoid)
		if err != nil {
			continue // ctx ended: reported above
		}
		if st.Base != "" && base != st.Base {
			st.Switches++
		}
		st.Base = base
		var q responses.ResponseGetParams
		if cursor := st.Last(); cursor >= 0 {
			q.StartingAfter = openai.Int(cursor)
			if len(st.View.Events) > 0 || st.Retries > 0 {
				st.View.ResumedAt = append(st.View.ResumedAt, cursor)
			}
		}
		st.Retries++
		c := st.client(base)
		err = st.Read(c.Responses.GetStreaming(ctx, st.ID, q))
		if fatal := FatalHTTP(err); fatal != nil {
			return fmt.Errorf("resumeclient: %s: GET %s on %s starting_after=%d: %w", st.Name, st.ID, base, st.Last(), fatal)
		}
		st.LastErr = err
		if err == nil {
			return nil
		}
		Sleep(ctx, retryDelay)
	}
	return nil
}

// Pair is a workload's two clients of one response: Primary creates it
// and streams it from the start; Reader joins once Primary's stream ended
// (a kill cut it, or it finished) and resumes from Cursor.
type Pair struct {
	Primary, Reader *Stream
	// Cursor is the Reader's first starting_after: -1 replays from
	// sequence 0, -2 (or one past what Primary received) means the last
	// sequence number Primary received.
	Cursor int64
}

// Run creates the response with params and follows it with both clients
// to its terminal event, through any number of restarts; with also set, it
// runs also(ctx, id) alongside them (a cancel, say). A response whose
// creation was cut before its id reached the client is not followed:
// Primary.ID stays empty and Run returns nil, leaving it to a check that
// reads every response in the database.
func (p *Pair) Run(ctx context.Context, params responses.ResponseNewParams, also func(ctx context.Context, id string) error) error {
	if err := p.Primary.Create(ctx, params); err != nil || p.Primary.ID == "" {
		return err
	}
	p.Reader.ID = p.Primary.ID
	if p.Cursor == -2 || p.Cursor > p.Primary.Last() {
		p.Cursor = p.Primary.Last()
	}
	if p.Primary.Terminal && p.Cursor == p.Primary.Last() {
		// Resuming after the terminal event has nothing to wait for: it is
		// a check of its own.
		p.Cursor--
	}
	p.Reader.View.StartAt = p.Cursor + 1
	var wg sync.WaitGroup
	var readerErr, alsoErr error
	wg.Go(func() { readerErr = p.Reader.Follow(ctx) })
	if also != nil {
		wg.Go(func() { alsoErr = also(ctx, p.Primary.ID) })
	}
	err := p.Primary.Follow(ctx)
	wg.Wait()
	return errors.Join(err, readerErr, alsoErr)
}

// Streams returns both clients (Reader may be nil).
func (p *Pair) Streams() []*Stream { return []*Stream{p.Primary, p.Reader} }
