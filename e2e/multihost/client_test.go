package multihost

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/superstep/superstep/internal/testkit/resumeclient"
	"github.com/superstep/superstep/verify"
)

// apiKey is the only key the hosts accept (an admin key: GET
// /v1/hosts needs one), made for this test process: a client holding the
// address of a killed host may reach another test's server that took its
// port meanwhile, which then refuses it with 401 (resumeclient retries it
// elsewhere) instead of serving it from the wrong database. The crash
// tests' servers have keys of their own likewise.
var apiKey = fmt.Sprintf("multihost-%016x", rand.Uint64())

// config is one kind of request: a demo workflow and its metadata. Its
// name goes into metadata.workload so the reference outcome can be found
// for any response in the database.
type config struct {
	name  string
	model string
	meta  map[string]string
}

// params returns the create request of cfg.
func (cfg config) params(delayMS int) responses.ResponseNewParams {
	return resumeclient.NewParams(cfg.name, cfg.model, "", cfg.meta, delayMS)
}

// newClient returns an openai-go client for base with retries off: the
// tests reconnect themselves, to another host, with starting_after.
func newClient(base string) openai.Client { return resumeclient.NewClient(base, apiKey) }

// stream is one client's reading of one response across reconnections,
// possibly to different hosts.
type stream = resumeclient.Stream

// newStream returns a client that connects to a random running host, and
// after a broken connection to another one.
func newStream(cl *cluster, name string) *resumeclient.Stream {
	return &resumeclient.Stream{Name: name, APIKey: apiKey, Host: cl.pick}
}

// pinnedStream returns a client that connects to the host at url only.
func pinnedStream(name, url string) *resumeclient.Stream {
	return &resumeclient.Stream{Name: name, APIKey: apiKey,
		Host: func(context.Context, string) (string, error) { return url, nil }}
}

// referenceOutcome requires the reference run of workload name, which st
// made (err is its error), to have ended completed, and returns its
// outcome.
func referenceOutcome(t testing.TB, name string, st *stream, err error) verify.Outcome {
	t.Helper()
	if err != nil || !st.Terminal {
		t.Fatalf("reference run of %s: terminal=%v err=%v (last: %v)", name, st.Terminal, err, st.LastErr)
	}
	out, err := verify.OutcomeOf(st.View.Events[len(st.View.Events)-1].Data)
	if err != nil || out.Status != "completed" {
		t.Fatalf("reference run of %s ended %s (%v): want completed", name, out, err)
	}
	return out
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) { resumeclient.Sleep(ctx, d) }

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
		if fatal := resumeclient.FatalHTTP(err); fatal != nil {
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
