package crash

import (
	"context"
	"fmt"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/superstep/superstep/internal/testkit/resumeclient"
)

// keyOwner owns every cluster's key (see cluster.key).
const keyOwner = "crash-test"

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
	// tagged appends the workload's tag to the input, so that a model
	// server can tell its requests apart (see journal_test.go).
	tagged bool
	// byAgent: the run's agents run at once, each a chain of model
	// requests of its own (see journal_test.go).
	byAgent bool
}

// params returns the create request of cfg.
func (cfg config) params(delayMS int) responses.ResponseNewParams {
	return resumeclient.NewParams(cfg.name, cfg.model, cfg.input, cfg.meta, delayMS)
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

// newStream returns a client of the cluster's server that counts the text
// deltas it receives.
func newStream(cl *cluster, name string) *resumeclient.Stream {
	return &resumeclient.Stream{Name: name, APIKey: cl.key, Host: cl.host, OnEvent: func(typ string) {
		if typ == "response.output_text.delta" {
			cl.deltas.Add(1)
		}
	}}
}

// newClient returns an openai-go client of cl's server at base with
// retries off.
func newClient(cl *cluster, base string) openai.Client { return resumeclient.NewClient(base, cl.key) }

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) { resumeclient.Sleep(ctx, d) }

// cancelAfter waits d, then cancels response id, retrying across restarts
// until the server answers; it returns the status the reply showed.
func cancelAfter(ctx context.Context, cl *cluster, id string, d time.Duration) (string, error) {
	sleep(ctx, d)
	for ctx.Err() == nil {
		base, err := cl.current(ctx)
		if err != nil {
			break
		}
		c := newClient(cl, base)
		resp, err := c.Responses.Cancel(ctx, id)
		if err == nil {
			return string(resp.Status), nil
		}
		if fatal := resumeclient.FatalHTTP(err); fatal != nil {
			return "", fmt.Errorf("crash: cancel %s: %w", id, fatal)
		}
		sleep(ctx, 10*time.Millisecond)
	}
	return "", fmt.Errorf("crash: cancel %s: %w", id, ctx.Err())
}
