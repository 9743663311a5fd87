package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/console"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/internal/dburl"
	"github.com/superstep/superstep/responses"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/webhook"
	"github.com/superstep/superstep/workflow"
)

// Defaults of the Config fields that have no default in the packages
// they configure.
const (
	AddrDefault  = "127.0.0.1:8080"
	DBDefault    = "superstep.db"
	GraceDefault = 10 * time.Second
	// ModelServerLocal as Config.ModelServer starts the deterministic
	// local model server (package localmodel) in process, on a loopback
	// port of its own: offline, for demos and tests.
	ModelServerLocal = "local"
)

// handlerDrain is how long handlers may take to return after the host
// stopped and their streams were ended.
const handlerDrain = 3 * time.Second

// Config is a server: what `superstep serve` runs, one field per flag of
// it. The zero value serves nothing on AddrDefault with the SQLite file
// DBDefault; a zero field takes the default of the flag it stands for
// (the default of the host.Config or responses.Options field it is passed
// to). A Config is not modified by Run and may not be changed while Run
// runs.
type Config struct {
	// Addr is the address to listen on; port 0 picks a free one (see
	// Listening). Default AddrDefault.
	Addr string
	// DB is a SQLite file path, or a postgres:// (postgresql://) URL.
	// Default DBDefault.
	DB string

	// Workflows returns the workflows to host, each under its name
	// (workflow.Workflow.Name). It is called once, before the server
	// listens, with the model connection agents should use (see Model).
	Workflows func(model agent.Options) ([]*workflow.Workflow, error)
	// Register, when set, is called after Workflows with the host, for what
	// Workflows cannot say: agents (host.RegisterAgent), publication
	// modes (host.WithPublication). ctx is Run's.
	Register func(ctx context.Context, h *host.Host, model agent.Options) error

	// ModelServer is where the agents of the hosted workflows find their
	// model: an OpenAI-compatible base URL such as
	// https://api.openai.com/v1, or ModelServerLocal. "" leaves agents to
	// their own defaults (OPENAI_BASE_URL, else OpenAI's API).
	ModelServer string
	// ModelAPIKey is the bearer token sent to the model server ("": agents
	// read OPENAI_API_KEY).
	ModelAPIKey string
	// Model is the model id sent to the model server (default
	// agent.DefaultModel; the local model accepts any).
	Model string
	// ModelAPI is the API agents use: Chat Completions (the default) or
	// Responses.
	ModelAPI agent.API
	// LocalFollowTools makes the local model call the first tool a request
	// offers (localmodel.Options.FollowTools).
	LocalFollowTools bool

	// APIKeys maps each accepted bearer key to its owner; AdminKeys are
	// keys that may also read GET /v1/hosts. Both empty: no
	// authentication (responses.Options).
	APIKeys, AdminKeys map[string]string

	// HostID names this host among hosts sharing a database (default
	// hostname-pid-random; never give two live hosts the same id).
	HostID string
	// AdvertiseAddr is the address GET /v1/hosts shows for this host
	// (default: the one it listens on).
	AdvertiseAddr string
	// LeaseDuration, MaxSupersteps, MaxRuns, KeepCheckpoints, Retention and
	// NoJournal are host.Config's.
	LeaseDuration   time.Duration
	MaxSupersteps   int
	MaxRuns         int
	KeepCheckpoints int
	Retention       time.Duration
	NoJournal       bool
	// NoGroupCommit writes each PostgreSQL commit in a transaction of its
	// own (postgres.Options.NoGroupCommit; for measurements).
	NoGroupCommit bool

	// MaxBodyBytes, MaxInputItems, KeepAlive, MaxStreams, MaxStreamsPerKey
	// (negative: no cap), StoreTimeout and BodyTimeout are
	// responses.Options'.
	MaxBodyBytes     int64
	MaxInputItems    int
	KeepAlive        time.Duration
	MaxStreams       int
	MaxStreamsPerKey int
	StoreTimeout     time.Duration
	BodyTimeout      time.Duration
	// MaxConns caps the client connections open at once; more wait in the
	// listen backlog. Default MaxConnsDefault.
	MaxConns int
	// Grace is how long running supersteps may take to finish when ctx
	// ends (default GraceDefault; negative: none).
	Grace time.Duration
	// NoConsole turns the web console at /ui/ off.
	NoConsole bool

	// WebhookURLs are the endpoints finished responses are posted to; they
	// need WebhookSecret. With a secret and no URLs this host still sends
	// the deliveries other hosts enqueued.
	WebhookURLs []string
	// WebhookSecret signs the deliveries (webhook.ParseSecret).
	WebhookSecret *webhook.Secret
	// WebhookRetryFor and WebhookTimeout are webhook.Options' RetryFor and
	// Timeout.
	WebhookRetryFor, WebhookTimeout time.Duration

	// Logger receives the server's logs; default slog.Default().
	Logger *slog.Logger
	// Metrics receives every metric and is served at /metrics; default a
	// fresh registry with the Go and process collectors.
	Metrics *prometheus.Registry
	// TracerProvider, when set, traces requests and runs (host.Config).
	TracerProvider trace.TracerProvider
	// Listening, when set, is called once the server accepts connections,
	// with its address. Default: print "superstep: listening on
	// http://ADDR" to standard output (tools look for the first
	// 127.0.0.1:port a server prints).
	Listening func(addr net.Addr)
}

// Error classes of Run, for callers that tell them apart (the command's
// exit codes): a Run error matches at most one with errors.Is.
var (
	// ErrConfig: the Config (or what Workflows or Register returned) is
	// not valid; nothing was served.
	ErrConfig = errors.New("invalid configuration")
	// ErrStore: the store could not be opened.
	ErrStore = errors.New("store cannot be opened")
	// ErrListen: the address could not be listened on.
	ErrListen = errors.New("cannot listen")
	// ErrUnclean: shutdown did not finish within Grace; unfinished runs
	// resume at the next start (or on another host).
	ErrUnclean = errors.New("shutdown not finished within the grace period")
)

// classError is an error of a class (ErrConfig...) with its own message.
type classError struct {
	class, err error
}

func (e *classError) Error() string        { return e.err.Error() }
func (e *classError) Unwrap() error        { return e.err }
func (e *classError) Is(target error) bool { return target == e.class }

func classed(class, err error) error {
	if err == nil {
		return nil
	}
	return &classError{class: class, err: err}
}

// Run serves c until ctx ends or the server fails, then shuts down
// gracefully: it stops accepting, lets running supersteps finish within
// Grace (unfinished runs stay in the store and resume at the next start,
// here or on another host), ends open streams and closes the store. It
// returns nil after a clean shutdown.
func Run(ctx context.Context, c *Config) error {
	cfg := c.withDefaults()
	if err := cfg.validate(); err != nil {
		return classed(ErrConfig, err)
	}
	log := cfg.Logger
	st, err := openStore(ctx, cfg.DB, cfg.NoGroupCommit)
	if err != nil {
		return classed(ErrStore, fmt.Errorf("serve: open %s: %w", dburl.Redact(cfg.DB), err))
	}
	defer st.Close()
	model, closeModel, err := startModel(&cfg)
	if err != nil {
		return err
	}
	// Deferred after the store's Close, so it runs before it: after the
	// host stopped, when no superstep calls the model any more.
	defer closeModel()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return classed(ErrListen, fmt.Errorf("serve: %w", err))
	}
	if cfg.AdvertiseAddr == "" {
		cfg.AdvertiseAddr = ln.Addr().String() // the real port when Addr asked for 0
	}
	srv, h, sender, err := newServer(ctx, &cfg, st, model)
	if err != nil {
		ln.Close()
		return err
	}
	limited, err := limitConns(ln, cfg.MaxConns, cfg.Metrics, log)
	if err != nil {
		ln.Close()
		return fmt.Errorf("serve: %w", err)
	}
	if err := h.Start(ctx); err != nil {
		ln.Close()
		graceCtx, cancel := context.WithTimeout(context.Background(), cfg.Grace)
		defer cancel()
		return errors.Join(fmt.Errorf("serve: start host: %w", err), h.Shutdown(graceCtx))
	}
	if sender != nil {
		_ = sender.Start(ctx)                 // fails only when started twice
		defer func() { _ = sender.Close() }() // after the host stopped, before the store closes
	}
	cfg.Listening(ln.Addr())
	log.Info("superstep: serving", "addr", ln.Addr().String(), "db", dburl.Redact(cfg.DB),
		"auth", len(cfg.APIKeys)+len(cfg.AdminKeys) > 0, "admin_keys", len(cfg.AdminKeys), "tracing", onOff(cfg.TracerProvider != nil),
		"model_server", redactModelURL(model.BaseURL)) // after the address: tools take the first 127.0.0.1:port printed
	return serveUntilDone(ctx, srv, limited, h, cfg.Grace, log)
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// withDefaults returns a copy of c with every zero field defaulted.
func (c *Config) withDefaults() Config {
	cfg := Config{}
	if c != nil {
		cfg = *c
	}
	if cfg.Addr == "" {
		cfg.Addr = AddrDefault
	}
	if cfg.DB == "" {
		cfg.DB = DBDefault
	}
	if cfg.Model == "" {
		cfg.Model = agent.DefaultModel
	}
	if cfg.ModelAPI == "" {
		cfg.ModelAPI = agent.APIChatCompletions
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = MaxConnsDefault
	}
	switch {
	case cfg.Grace == 0:
		cfg.Grace = GraceDefault
	case cfg.Grace < 0:
		cfg.Grace = 0
	}
	if cfg.WebhookRetryFor == 0 {
		cfg.WebhookRetryFor = webhook.RetryForDefault
	}
	if cfg.WebhookTimeout == 0 {
		cfg.WebhookTimeout = webhook.TimeoutDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = prometheus.NewRegistry()
		cfg.Metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if cfg.Listening == nil {
		cfg.Listening = func(addr net.Addr) { fmt.Fprintf(os.Stdout, "superstep: listening on http://%s\n", addr) }
	}
	return cfg
}

// validate checks what the packages configured would not (or would only
// later, after the store was opened).
func (c *Config) validate() error {
	var errs []error
	if c.Workflows == nil && c.Register == nil {
		errs = append(errs, errors.New("serve: nothing to serve: Config.Workflows and Config.Register are both nil"))
	}
	if c.ModelServer != "" && c.ModelServer != ModelServerLocal {
		if u, err := url.Parse(c.ModelServer); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("serve: ModelServer must be %q or an http(s) base URL, got %q", ModelServerLocal, redactModelURL(c.ModelServer)))
		}
	}
	if c.ModelAPI != agent.APIChatCompletions && c.ModelAPI != agent.APIResponses {
		errs = append(errs, fmt.Errorf("serve: model API must be %s or %s, got %q", agent.APIChatCompletions, agent.APIResponses, c.ModelAPI))
	}
	if c.LocalFollowTools && c.ModelServer != ModelServerLocal {
		errs = append(errs, errors.New("serve: LocalFollowTools needs ModelServer local"))
	}
	if c.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("serve: MaxConns must not be negative, got %d", c.MaxConns))
	}
	if c.Retention < 0 {
		errs = append(errs, fmt.Errorf("serve: Retention must not be negative, got %v", c.Retention))
	}
	if len(c.WebhookURLs) > 0 && c.WebhookSecret == nil {
		errs = append(errs, errors.New("serve: WebhookURLs need a WebhookSecret"))
	}
	for k := range c.AdminKeys {
		if _, dup := c.APIKeys[k]; dup {
			errs = append(errs, errors.New("serve: a key is both an API key and an admin key; list each key once"))
			break
		}
	}
	return errors.Join(errs...)
}

// newServer builds the host, with the workflows of cfg registered, and
// the HTTP server, with their metrics on cfg.Metrics; and the webhook
// sender when a secret is configured (nil otherwise).
func newServer(ctx context.Context, cfg *Config, st store.Store, model agent.Options) (*http.Server, *host.Host, *webhook.Sender, error) {
	log := cfg.Logger
	hc := &host.Config{HostID: cfg.HostID, Addr: cfg.AdvertiseAddr, LeaseDuration: cfg.LeaseDuration, MaxSupersteps: cfg.MaxSupersteps,
		MaxRuns: cfg.MaxRuns, KeepCheckpoints: cfg.KeepCheckpoints, Retention: cfg.Retention, Logger: log, Metrics: cfg.Metrics,
		TracerProvider: cfg.TracerProvider, NoJournal: cfg.NoJournal}
	sender, err := newSender(cfg, st, hc)
	if err != nil {
		return nil, nil, nil, err
	}
	h, err := host.New(st, hc)
	if err != nil {
		return nil, nil, nil, classed(ErrConfig, fmt.Errorf("serve: %w", err))
	}
	if cfg.Workflows != nil {
		wfs, err := cfg.Workflows(model)
		if err != nil {
			return nil, nil, nil, classed(ErrConfig, fmt.Errorf("serve: workflows: %w", err))
		}
		for _, wf := range wfs {
			if wf == nil {
				return nil, nil, nil, classed(ErrConfig, errors.New("serve: workflows: a nil workflow"))
			}
			if err := h.RegisterWorkflow(wf.Name(), wf); err != nil {
				return nil, nil, nil, classed(ErrConfig, fmt.Errorf("serve: %w", err))
			}
		}
	}
	if cfg.Register != nil {
		if err := cfg.Register(ctx, h, model); err != nil {
			return nil, nil, nil, fmt.Errorf("serve: %w", err)
		}
	}
	handler, err := responses.NewHandler(h, &responses.Options{MaxBodyBytes: cfg.MaxBodyBytes, MaxInputItems: cfg.MaxInputItems,
		KeepAlive: cfg.KeepAlive, MaxStreams: cfg.MaxStreams, MaxStreamsPerKey: cfg.MaxStreamsPerKey,
		StoreTimeout: cfg.StoreTimeout, BodyTimeout: cfg.BodyTimeout, APIKeys: cfg.APIKeys, AdminKeys: cfg.AdminKeys, Logger: log,
		Registry: cfg.Metrics, TracerProvider: cfg.TracerProvider})
	if err != nil {
		return nil, nil, nil, classed(ErrConfig, fmt.Errorf("serve: %w", err))
	}
	if !cfg.NoConsole {
		handler = console.With(handler)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	return srv, h, sender, nil
}

// newSender makes the sender of st's outbox when a secret is configured
// (none otherwise), with its metrics on cfg.Metrics, and sets the host
// config's webhook fields. A host with a secret and no URLs still sends:
// it drains the deliveries other hosts (or an earlier configuration)
// enqueued.
func newSender(cfg *Config, st store.Store, hc *host.Config) (*webhook.Sender, error) {
	if cfg.WebhookSecret == nil {
		return nil, nil
	}
	outbox, ok := st.(store.WebhookOutbox)
	if !ok {
		return nil, classed(ErrConfig, errors.New("serve: webhooks need a store with an outbox"))
	}
	owner := cfg.HostID // the sender's name in its claims
	if owner == "" {
		name, _ := os.Hostname()
		owner = fmt.Sprintf("%s-%d-%x", name, os.Getpid(), time.Now().UnixNano()&0xffffff)
	}
	snd, err := webhook.New(outbox, &webhook.Options{Secret: cfg.WebhookSecret, Owner: owner, RetryFor: cfg.WebhookRetryFor,
		Timeout: cfg.WebhookTimeout, Logger: cfg.Logger, Metrics: cfg.Metrics})
	if err != nil {
		return nil, classed(ErrConfig, fmt.Errorf("serve: %w", err))
	}
	hc.WebhookURLs, hc.WebhookEnqueued = cfg.WebhookURLs, snd.Kick
	cfg.Logger.Info("superstep: webhooks on", "endpoints", len(cfg.WebhookURLs), "retry_for", cfg.WebhookRetryFor.String())
	return snd, nil
}

// serveUntilDone serves on ln until ctx ends or the server fails, then
// shuts down in order.
func serveUntilDone(ctx context.Context, srv *http.Server, ln net.Listener, h *host.Host, grace time.Duration, log *slog.Logger) error {
	// Handlers get baseCtx: cancelling it ends open streams and waits once
	// the host has stopped, so Shutdown does not wait for them forever.
	baseCtx, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	srv.BaseContext = func(net.Listener) context.Context { return baseCtx }
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	var failed error
	select {
	case <-ctx.Done():
		log.Info("superstep: shutting down", "grace", grace.String())
	case err := <-serveErr:
		failed = fmt.Errorf("serve: %w", err)
		serveErr <- nil
	}
	return errors.Join(failed, shutdown(srv, h, grace, cancelBase, serveErr))
}

// shutdown stops accepting connections, lets the host finish running
// supersteps within grace, ends the open streams, then waits for the
// handlers.
func shutdown(srv *http.Server, h *host.Host, grace time.Duration, cancelBase context.CancelFunc, serveErr <-chan error) error {
	graceCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	// Handlers end soon after cancelBase; give them a moment beyond the
	// host's grace before cutting connections.
	httpCtx, cancelHTTP := context.WithTimeout(context.Background(), grace+handlerDrain)
	defer cancelHTTP()
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Shutdown(httpCtx) }()
	hostErr := h.Shutdown(graceCtx)
	cancelBase()
	var errs []error
	if hostErr != nil {
		errs = append(errs, classed(ErrUnclean, fmt.Errorf("serve: %w", hostErr)))
	}
	if err := <-httpDone; err != nil {
		_ = srv.Close()
		errs = append(errs, classed(ErrUnclean, fmt.Errorf("serve: http shutdown: %w", err)))
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, fmt.Errorf("serve: %w", err))
	}
	return errors.Join(errs...)
}
