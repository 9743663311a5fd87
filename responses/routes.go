package responses

import (
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/superstep/superstep/host"
)

// Defaults of Options.
const (
	MaxBodyBytesDefault = 8 << 20
	KeepAliveDefault    = 15 * time.Second
	WriteTimeoutDefault = time.Minute
	StoreTimeoutDefault = 10 * time.Second
	ReadyTimeoutDefault = 2 * time.Second
	BodyTimeoutDefault  = 30 * time.Second
)

// Options configure the handler. A nil *Options and zero fields take the
// defaults.
type Options struct {
	// MaxBodyBytes caps request bodies; larger ones get 413. Default 8 MiB.
	MaxBodyBytes int64
	// MaxInputItems caps the number of input items of a create request;
	// more get 400 with param "input". Default MaxInputItemsDefault
	// (10,000: superstep's own cap, as we found no documented OpenAI one).
	MaxInputItems int
	// BodyTimeout bounds how long a request body may take to arrive,
	// from the start of its handler; a slower one gets 408 and its
	// connection is closed (see limitBodyTime). Default 30s.
	BodyTimeout time.Duration
	// KeepAlive is the idle time after which a stream gets a keep-alive
	// comment line. Default 15s.
	KeepAlive time.Duration
	// WriteTimeout bounds each write of a stream, so a client that stopped
	// reading does not hold its handler forever. Default 1 minute.
	WriteTimeout time.Duration
	// StoreTimeout bounds the store calls a request makes before it
	// streams or waits: create's writes, GET of a response, cancel,
	// delete, input_items and /v1/hosts. Past it the request gets 503
	// with Retry-After instead of hanging for a whole store outage.
	// (Streams read through the host, whose reads have deadlines and
	// retries of their own; a create without stream or background waits
	// for its response as long as the client does.) Default 10s.
	StoreTimeout time.Duration
	// ReadyTimeout bounds the store check of GET /readyz; default 2s.
	ReadyTimeout time.Duration
	// MaxStreams caps the SSE streams open at once on this server (a
	// create with stream=true, or a GET with stream=true); more get 429
	// too_many_streams, and a refused create creates nothing. Default
	// MaxStreamsDefault (1000); negative means no cap.
	MaxStreams int
	// MaxStreamsPerKey caps the streams open at once per owner (the
	// identity of an API key) when APIKeys are configured, so one key
	// cannot take every stream. Default MaxStreamsPerKeyDefault (100);
	// negative means no cap.
	MaxStreamsPerKey int
	// APIKeys maps each accepted bearer key to the owner identity stored
	// with the responses it creates. Empty: authentication is off and every
	// response belongs to the owner "".
	APIKeys map[string]string
	// AdminKeys are keys (key -> owner, like APIKeys, and accepted like
	// them) that may also read GET /v1/hosts, which shows every owner's
	// running responses; with keys configured, other keys get 403 there.
	// Setting only AdminKeys turns authentication on too.
	AdminKeys map[string]string
	// Logger receives request failures; default slog.Default().
	Logger *slog.Logger
	// Registry receives the HTTP metrics and is served at /metrics. Nil: a
	// fresh registry with the Go and process collectors.
	Registry *prometheus.Registry
	// TracerProvider, when set, gives every /v1 request a server span (a
	// child of its traceparent header, W3C trace context), under which the
	// host traces the responses it creates. Nil: no spans.
	TracerProvider trace.TracerProvider
}

func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = MaxBodyBytesDefault
	}
	if c.MaxInputItems <= 0 {
		c.MaxInputItems = MaxInputItemsDefault
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = BodyTimeoutDefault
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = KeepAliveDefault
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = WriteTimeoutDefault
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = MaxStreamsDefault
	}
	if c.MaxStreamsPerKey == 0 {
		c.MaxStreamsPerKey = MaxStreamsPerKeyDefault
	}
	if c.StoreTimeout <= 0 {
		c.StoreTimeout = StoreTimeoutDefault
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = ReadyTimeoutDefault
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
		c.Registry.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	}
	return c
}

// server holds what every handler needs.
type server struct {
	host    *host.Host
	opts    Options
	log     *slog.Logger
	metrics *httpMetrics
	ready   readiness
	streams *streamLimiter
}

// NewHandler returns the HTTP handler of the Responses API over h. The
// routes are under /v1 (SDKs are configured with a base URL ending in /v1),
// plus /healthz (liveness), /readyz (readiness: the store accepts writes)
// and /metrics, which need no key. It returns an error only
// when the metrics cannot be registered (e.g. twice on one registry).
func NewHandler(h *host.Host, opts *Options) (http.Handler, error) {
	o := opts.withDefaults()
	m, err := newHTTPMetrics(o.Registry)
	if err != nil {
		return nil, err
	}
	s := &server{host: h, opts: o, log: o.Logger, metrics: m,
		streams: newStreamLimiter(max(o.MaxStreams, 0), max(o.MaxStreamsPerKey, 0))}
	return s.routes(), nil
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	api := func(pattern string, fn http.HandlerFunc) {
		mux.Handle(pattern, s.instrument(s.trace(pattern, s.authenticate(fn))))
	}
	api("POST /v1/responses", s.handleCreate)
	api("GET /v1/responses/{id}", s.withResponseID(s.handleGet))
	api("POST /v1/responses/{id}/cancel", s.withResponseID(s.withStoreTimeout(s.handleCancel)))
	api("DELETE /v1/responses/{id}", s.withResponseID(s.withStoreTimeout(s.handleDelete)))
	api("GET /v1/responses/{id}/input_items", s.withResponseID(s.withStoreTimeout(s.handleInputItems)))
	api("GET /v1/models", s.handleModels)
	api("GET /v1/models/{model}", s.handleModel)
	api("GET /v1/hosts", s.withStoreTimeout(s.handleHosts))
	s.conversationRoutes(api)
	api("GET /v1/responses/{id}/events", s.withResponseID(s.withStoreTimeout(s.handleEvents)))
	api("GET /v1/runs", s.withStoreTimeout(s.handleRuns))
	api("GET /v1/runs/{run_id}", s.withRunID(s.withStoreTimeout(s.handleRun)))
	api("GET /v1/runs/{run_id}/checkpoints", s.withRunID(s.withStoreTimeout(s.handleCheckpoints)))
	api("POST /v1/runs/{run_id}/fork", s.withRunID(s.handleFork))
	api("/v1/", s.handleUnknownRoute)
	mux.Handle("GET /healthz", s.instrument(http.HandlerFunc(handleHealthz)))
	mux.Handle("GET /readyz", s.instrument(http.HandlerFunc(s.handleReadyz)))
	mux.Handle("GET /metrics", s.metricsHandler())
	return s.limitBodyTime(mux)
}

// handleUnknownRoute answers paths under /v1 that match no route (and
// wrong methods on known paths are answered by the mux with 405).
func (s *server) handleUnknownRoute(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "unknown_url",
		Message: "Unknown request URL: " + r.Method + " " + r.URL.Path + "."})
}

func handleHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}
