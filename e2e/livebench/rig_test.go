package livebench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/internal/testkit/pgtest"
	"github.com/superstep/superstep/localmodel"
	sresponses "github.com/superstep/superstep/responses"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/workflow"
)

// tokenDelay paces the model server like a real model (the pause before
// each token); 0, the default, streams as fast as it can.
var tokenDelay = flag.Duration("livebench.token-delay", 0, "pause before each model token (0: none)")

// modelName is the benchmark workflow: one agent executor (a ChatAgent on
// the local model server) whose reply is the output.
const modelName = "bench.writer"

// Ways a stream is served.
const (
	modeRaw       = "raw"       // openai-go straight to the model server
	modeLive      = "live"      // through superstep, metadata.publication=live
	modeCommitted = "committed" // through superstep, metadata.publication=committed
)

// modes in the order the benchmark runs them (rotated every round, so no
// mode always runs first on a machine whose load drifts).
var modes = []string{modeRaw, modeLive, modeCommitted}

// rig is a model server, a store, a host with the benchmark workflow, and
// the superstep HTTP server in front of it, with openai-go clients for
// both servers.
type rig struct {
	model   *localmodel.Server
	store   store.Store
	host    *host.Host
	srv     *httptest.Server
	reg     *prometheus.Registry
	http    *http.Client // the benchmark's clients
	agentHC *http.Client // the agent's calls to the model server
	ss, raw openai.Client
	// stamps maps a token (a unique word) to when the executor emitted it.
	stamps sync.Map
}

// reply is the local model's script: the user text "<tag> <n>" gets the n
// words "<tag>-0 <tag>-1 …", each a token, unique across the whole
// benchmark so that a client can find when the executor emitted it.
func reply(user string) string {
	tag, nStr, _ := strings.Cut(strings.TrimSpace(user), " ")
	n, _ := strconv.Atoi(nStr)
	words := make([]string, n)
	for i := range words {
		words[i] = tag + "-" + strconv.Itoa(i)
	}
	return strings.Join(words, " ")
}

// newRig starts everything on the store kind ("sqlite" or "postgres").
func newRig(tb testing.TB, kind string) *rig {
	tb.Helper()
	ctx := context.Background()
	r := &rig{reg: prometheus.NewRegistry()}
	// The database's own cleanup (a drop) is registered first, so that it
	// runs after r.close.
	var open func() (store.Store, error)
	switch kind {
	case "sqlite":
		path := filepath.Join(tb.TempDir(), "bench.db")
		open = func() (store.Store, error) { return sqlite.Open(ctx, path, nil) }
	case "postgres":
		db := pgtest.Database(tb, "superstep_livebench")
		open = func() (store.Store, error) { return postgres.Open(ctx, db, nil) }
	default:
		tb.Fatalf("unknown store %q", kind)
	}
	delay := time.Duration(-1) // no pause
	if *tokenDelay > 0 {
		delay = *tokenDelay
	}
	m, err := localmodel.Start("127.0.0.1:0", &localmodel.Options{TokenDelay: delay, Reply: reply})
	if err != nil {
		tb.Fatal(err)
	}
	r.model = m
	tb.Cleanup(r.close(tb))
	if r.store, err = open(); err != nil {
		tb.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if r.host, err = host.New(r.store, &host.Config{Logger: logger, Metrics: r.reg}); err != nil {
		tb.Fatal(err)
	}
	// Enough idle connections that 64 concurrent streams reuse theirs.
	r.agentHC = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	chat, err := agent.NewChatAgent(&agent.Options{Name: "writer", BaseURL: m.URL, APIKey: "local",
		Model: localmodel.DefaultModel, HTTPClient: r.agentHC})
	if err != nil {
		tb.Fatal(err)
	}
	writerEx := agent.Executor("writer", &stamper{a: chat, stamps: &r.stamps})
	wf, err := workflow.NewBuilder(modelName).SetStart(writerEx).Outputs(writerEx).Build()
	if err != nil {
		tb.Fatal(err)
	}
	if err := r.host.RegisterWorkflow(modelName, wf); err != nil {
		tb.Fatal(err)
	}
	if err := r.host.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	handler, err := sresponses.NewHandler(r.host, &sresponses.Options{Logger: logger, Registry: r.reg})
	if err != nil {
		tb.Fatal(err)
	}
	r.srv = httptest.NewServer(handler)
	r.http = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	opts := []option.RequestOption{option.WithAPIKey("bench"), option.WithHTTPClient(r.http), option.WithMaxRetries(0)}
	r.ss = openai.NewClient(append(opts, option.WithBaseURL(r.srv.URL+"/v1/"))...)
	r.raw = openai.NewClient(append(opts, option.WithBaseURL(m.URL+"/"))...)
	return r
}

// close stops whatever newRig started, in reverse order.
func (r *rig) close(tb testing.TB) func() {
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if r.srv != nil {
			r.srv.CloseClientConnections()
			r.srv.Close()
		}
		if r.http != nil {
			r.http.CloseIdleConnections()
		}
		if r.host != nil {
			if err := r.host.Shutdown(ctx); err != nil {
				tb.Errorf("host shutdown: %v", err)
			}
		}
		if r.store != nil {
			if err := r.store.Close(); err != nil {
				tb.Errorf("store close: %v", err)
			}
		}
		if r.agentHC != nil {
			r.agentHC.CloseIdleConnections()
		}
		if err := r.model.Close(ctx); err != nil {
			tb.Errorf("model server: %v", err)
		}
	}
}

// stamper passes an agent's updates through, noting when each text delta
// (one token) left the agent, just before the executor emits it.
type stamper struct {
	a      agent.Agent
	stamps *sync.Map
}

// Run implements agent.Agent.
func (s *stamper) Run(ctx context.Context, sess *agent.Session, in []agent.Message) iter.Seq2[agent.Update, error] {
	return func(yield func(agent.Update, error) bool) {
		for u, err := range s.a.Run(ctx, sess, in) {
			if err == nil && u.Kind == agent.UpdateTextDelta {
				s.stamps.Store(strings.TrimSpace(u.Text), time.Now())
			}
			if !yield(u, err) {
				return
			}
		}
	}
}

// result is what one stream delivered.
type result struct {
	deltas int             // response.output_text.delta frames
	lat    []time.Duration // per token: executor emission to the client reading its frame
}

// stream runs one response of n tokens in mode, tagged tag, and checks
// that the whole reply arrived.
func (r *rig) stream(ctx context.Context, mode, tag string, n int) (*result, error) {
	want := reply(fmt.Sprintf("%s %d", tag, n))
	input := responses.ResponseNewParamsInputUnion{OfString: openai.String(fmt.Sprintf("%s %d", tag, n))}
	var s interface {
		Next() bool
		Current() responses.ResponseStreamEventUnion
		Err() error
		Close() error
	}
	if mode == modeRaw {
		s = r.raw.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: localmodel.DefaultModel, Input: input})
	} else {
		s = r.ss.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: modelName, Input: input,
			Metadata: map[string]string{host.PublicationMetadataKey: mode}})
	}
	defer s.Close()
	res := &result{}
	var text strings.Builder
	final := ""
	for s.Next() {
		ev := s.Current()
		switch ev.Type {
		case "response.output_text.delta":
			now := time.Now()
			res.deltas++
			text.WriteString(ev.Delta)
			if mode == modeRaw {
				continue
			}
			for w := range strings.FieldsSeq(ev.Delta) {
				if t, ok := r.stamps.LoadAndDelete(w); ok {
					res.lat = append(res.lat, now.Sub(t.(time.Time)))
				}
			}
		case "response.completed":
			final = ev.Response.OutputText()
		case "response.failed", "response.incomplete", "response.cancelled":
			return nil, fmt.Errorf("%s stream %s ended %s: %s", mode, tag, ev.Type, ev.RawJSON())
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("%s stream %s: %w", mode, tag, err)
	}
	if got := text.String(); got != want || (mode != modeRaw && final != want) {
		return nil, fmt.Errorf("%s stream %s: streamed %d bytes, completed with %d, want %d (%.40q…)",
			mode, tag, len(got), len(final), len(want), got)
	}
	return res, nil
}

// round runs conc concurrent streams of n tokens in mode and returns how
// long they took together and what each delivered.
func (r *rig) round(ctx context.Context, mode, prefix string, conc, n int) (time.Duration, []*result, error) {
	results := make([]*result, conc)
	errs := make([]error, conc)
	var wg sync.WaitGroup
	began := time.Now()
	for i := range conc {
		wg.Go(func() { results[i], errs[i] = r.stream(ctx, mode, fmt.Sprintf("%s.%d", prefix, i), n) })
	}
	wg.Wait()
	return time.Since(began), results, errors.Join(errs...)
}

// quantile returns the q-quantile of sorted ds (0 for none).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

// livePublish returns the host's superstep_live_publish_seconds histogram
// (time from an executor emitting a live delta to its append returning),
// or nil when the host does not export it.
func (r *rig) livePublish() *dto.Histogram {
	mfs, err := r.reg.Gather()
	if err != nil {
		return nil
	}
	for _, mf := range mfs {
		if mf.GetName() == "superstep_live_publish_seconds" && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetHistogram()
		}
	}
	return nil
}

// bucketQuantile estimates the q-quantile of h from its buckets (the upper
// bound of the bucket holding it), as Prometheus's histogram_quantile
// would without interpolation.
func bucketQuantile(h *dto.Histogram, q float64) time.Duration {
	target := q * float64(h.GetSampleCount())
	for _, b := range h.GetBucket() {
		if float64(b.GetCumulativeCount()) >= target {
			return time.Duration(b.GetUpperBound() * float64(time.Second))
		}
	}
	return time.Duration(-1)
}

// sortedCopy returns ds sorted.
func sortedCopy(ds []time.Duration) []time.Duration {
	out := slices.Clone(ds)
	slices.Sort(out)
	return out
}
