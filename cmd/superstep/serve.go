package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"go.opentelemetry.io/otel/trace"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/responses"
	"github.com/superstep/superstep/serve"
)

// serveConfig is the parsed command line of serve.
type serveConfig struct {
	addr, db, apiKeys, logFormat string
	// adminKeys is the file of the keys that may also read /v1/hosts.
	adminKeys               string
	maxBody                 int64
	maxInputItems           int
	lease, grace, keepAlive time.Duration
	maxSupersteps           int
	maxRuns                 int
	// maxStreams and maxStreamsPerKey cap the open SSE streams (0: no
	// cap); storeTimeout bounds a request's store calls.
	maxStreams, maxStreamsPerKey int
	storeTimeout                 time.Duration
	// maxConns caps open client connections; bodyTimeout bounds the
	// arrival of a request body.
	maxConns    int
	bodyTimeout time.Duration
	// keepCheckpoints and retention bound the database (host.Config).
	keepCheckpoints int
	retention       time.Duration
	// hostID names this host as a lease owner; advertise is the address
	// other hosts and tools are shown for it (default: the bound one).
	hostID, advertise string
	// The model server of the LLM demos (see modelServerLocal).
	modelServer, openAIKey, model, modelAPI string
	// localFollowTools makes the local test model call the first tool a
	// request offers (localmodel.Options.FollowTools).
	localFollowTools bool
	// proxyModels lists the model server's models to host as durable
	// models (comma-separated ids, or proxyAll).
	proxyModels string
	// webhook configures webhooks (webhook.go).
	webhook webhookConfig
	// tracer is the OpenTelemetry provider setupTracing made from the
	// environment (not a flag); nil when tracing is off.
	tracer trace.TracerProvider
	// ui serves the web console (package console) at /ui/.
	ui bool
	// noJournal turns the journal inside the superstep off (host.Config).
	noJournal bool
	// noGroupCommit turns PostgreSQL group commit off
	// (postgres.Options.NoGroupCommit).
	noGroupCommit bool
}

// proxyAll as --proxy-models hosts every model the model server lists.
const proxyAll = "all"

// modelServerLocal as --model-server starts the deterministic local model
// server (package localmodel) in process, on a loopback port of its own.
const modelServerLocal = serve.ModelServerLocal

func parseServeFlags(args []string, stderr io.Writer) (*serveConfig, error) {
	c := &serveConfig{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", envOr("SUPERSTEP_ADDR", "127.0.0.1:8080"), "listen address (env SUPERSTEP_ADDR); port 0 picks a free one")
	fs.StringVar(&c.db, "db", envOr("SUPERSTEP_DB", "superstep.db"), "SQLite file path, or a postgres:// URL (env SUPERSTEP_DB)")
	fs.StringVar(&c.apiKeys, "api-keys", os.Getenv("SUPERSTEP_API_KEYS"), "file of API keys, one per line as 'key' or 'key owner'; enables bearer auth (env SUPERSTEP_API_KEYS)")
	fs.StringVar(&c.adminKeys, "admin-keys", os.Getenv("SUPERSTEP_ADMIN_KEYS"), "file of admin keys, in the format of --api-keys: accepted like API keys, and the only keys that may read GET /v1/hosts (every key's running responses) (env SUPERSTEP_ADMIN_KEYS)")
	fs.StringVar(&c.logFormat, "log-format", "", "log format: text or json (default: text on a terminal, json otherwise)")
	fs.Int64Var(&c.maxBody, "max-body", responses.MaxBodyBytesDefault, "largest request body in bytes; larger ones get 413")
	fs.IntVar(&c.maxInputItems, "max-input-items", responses.MaxInputItemsDefault, "most input items in one create request; more get 400")
	fs.DurationVar(&c.lease, "lease", host.LeaseDurationDefault, "run lease duration (renewed every third of it)")
	fs.DurationVar(&c.grace, "grace", 10*time.Second, "on SIGINT/SIGTERM, how long running supersteps may take to finish")
	fs.DurationVar(&c.keepAlive, "keepalive", responses.KeepAliveDefault, "idle time before a stream gets a keep-alive comment")
	fs.IntVar(&c.maxSupersteps, "max-supersteps", host.MaxSuperstepsDefault, "most supersteps one run may take")
	fs.IntVar(&c.maxRuns, "max-runs", 0, "most runs this host drives at once; others wait for a host with capacity (0: no limit)")
	fs.IntVar(&c.maxStreams, "max-streams", responses.MaxStreamsDefault, "most SSE streams open at once; more get 429 too_many_streams (0: no limit)")
	fs.IntVar(&c.maxStreamsPerKey, "max-streams-per-key", responses.MaxStreamsPerKeyDefault, "most SSE streams open at once per API key owner, with --api-keys (0: no limit)")
	fs.DurationVar(&c.storeTimeout, "store-timeout", responses.StoreTimeoutDefault, "how long a request waits for the store before it gets 503 with Retry-After (streams and waits for a response's end excepted)")
	fs.IntVar(&c.maxConns, "max-conns", maxConnsDefault, "most client connections open at once; more wait in the listen backlog until one closes")
	fs.DurationVar(&c.bodyTimeout, "body-timeout", responses.BodyTimeoutDefault, "how long a request body may take to arrive; a slower one gets 408 and its connection is closed")
	fs.IntVar(&c.keepCheckpoints, "keep-checkpoints", host.KeepCheckpointsDefault, "checkpoints kept per run when its history is pruned (every 16 commits and when a response finishes); negative keeps all")
	fs.DurationVar(&c.retention, "retention", 0, "delete finished responses (and runs whose responses are all gone) this long after they completed; 0 keeps them forever (env SUPERSTEP_RETENTION)")
	fs.StringVar(&c.hostID, "host-id", os.Getenv("SUPERSTEP_HOST_ID"), "this host's id among hosts sharing a database (env SUPERSTEP_HOST_ID; default hostname-pid-random). Never give two live hosts the same id")
	fs.StringVar(&c.advertise, "advertise-addr", os.Getenv("SUPERSTEP_ADVERTISE_ADDR"), "the address /v1/hosts shows for this host (env SUPERSTEP_ADVERTISE_ADDR; default: the address it listens on)")
	fs.StringVar(&c.modelServer, "model-server", os.Getenv("OPENAI_BASE_URL"), "model server of the LLM demos: \"local\" (the deterministic local test model, in process, offline) or an OpenAI-compatible base URL such as https://api.openai.com/v1 (env OPENAI_BASE_URL)")
	fs.BoolVar(&c.localFollowTools, "local-follow-tools", false, "with --model-server local: a request that offers tools gets a call of the first one, as a real model asked a question its tool answers would (for conformance suites that send their own tools); without it the local model calls a tool only when the message names it")
	// The key's default is read after parsing, so that -h does not print it.
	fs.StringVar(&c.openAIKey, "openai-api-key", "", "API key for the model server (default: env OPENAI_API_KEY); alone, it selects OpenAI's API")
	fs.StringVar(&c.model, "model", agent.DefaultModel, "model name the LLM demos send to the model server (any name works with local)")
	fs.StringVar(&c.modelAPI, "model-api", string(agent.APIChatCompletions), "API the LLM demos use: chat_completions or responses")
	fs.BoolVar(&c.ui, "ui", true, "serve the web console at /ui/ (its files need no key; the API calls it makes use the key entered in it)")
	fs.StringVar(&c.proxyModels, "proxy-models", "", "models of the model server to host as durable models under their own ids: comma-separated ids, or \"all\" for every id its GET /models lists (needs --model-server or --openai-api-key)")
	c.webhook.register(fs)
	fs.BoolVar(&c.noJournal, "no-journal", false, "do not journal finished model and tool calls inside a superstep: a superstep re-run after a crash makes them all again (for measurements)")
	fs.BoolVar(&c.noGroupCommit, "no-group-commit", false, "PostgreSQL: write each superstep's commit in a transaction of its own instead of sharing one among the runs committing at once (for measurements)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, withCode(exitUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, withCode(exitUsage, fmt.Errorf("serve: unexpected arguments %q", fs.Args()))
	}
	if c.openAIKey == "" {
		c.openAIKey = os.Getenv("OPENAI_API_KEY")
	}
	if env := os.Getenv("SUPERSTEP_RETENTION"); env != "" && !flagSet(fs, "retention") {
		d, err := time.ParseDuration(env)
		if err != nil {
			return nil, withCode(exitUsage, fmt.Errorf("serve: SUPERSTEP_RETENTION: %w", err))
		}
		c.retention = d
	}
	if err := c.webhook.resolve(fs); err != nil {
		return nil, withCode(exitUsage, err)
	}
	return c, c.validate()
}

func (c *serveConfig) validate() error {
	var errs []error
	if c.logFormat != "" && c.logFormat != "text" && c.logFormat != "json" {
		errs = append(errs, fmt.Errorf("serve: --log-format must be text or json, got %q", c.logFormat))
	}
	if c.maxBody <= 0 {
		errs = append(errs, fmt.Errorf("serve: --max-body must be positive, got %d", c.maxBody))
	}
	if c.maxInputItems <= 0 {
		errs = append(errs, fmt.Errorf("serve: --max-input-items must be positive, got %d", c.maxInputItems))
	}
	if c.lease <= 0 || c.grace < 0 || c.keepAlive <= 0 || c.maxSupersteps <= 0 {
		errs = append(errs, errors.New("serve: --lease, --keepalive and --max-supersteps must be positive, --grace not negative"))
	}
	if c.maxStreams < 0 || c.maxStreamsPerKey < 0 {
		errs = append(errs, errors.New("serve: --max-streams and --max-streams-per-key must not be negative (0: no limit)"))
	}
	if c.maxConns <= 0 || c.bodyTimeout <= 0 {
		errs = append(errs, errors.New("serve: --max-conns and --body-timeout must be positive"))
	}
	if c.storeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("serve: --store-timeout must be positive, got %v", c.storeTimeout))
	}
	if c.keepCheckpoints == 0 {
		errs = append(errs, errors.New("serve: --keep-checkpoints must be positive, or negative to keep every checkpoint"))
	}
	if c.retention < 0 {
		errs = append(errs, fmt.Errorf("serve: --retention must not be negative, got %v", c.retention))
	}
	if c.modelServer != "" && c.modelServer != modelServerLocal {
		if u, err := url.Parse(c.modelServer); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("serve: --model-server must be %q or an http(s) base URL, got %q", modelServerLocal, redactModelURL(c.modelServer)))
		}
	}
	if c.model == "" {
		errs = append(errs, errors.New("serve: --model must not be empty"))
	}
	if c.proxyModels != "" && c.modelServer == "" && c.openAIKey == "" {
		errs = append(errs, errors.New("serve: --proxy-models needs a model server: --model-server, OPENAI_BASE_URL, --openai-api-key or OPENAI_API_KEY"))
	}
	if c.localFollowTools && c.modelServer != modelServerLocal {
		errs = append(errs, errors.New("serve: --local-follow-tools needs --model-server local"))
	}
	if _, err := proxyIDs(c.proxyModels); err != nil {
		errs = append(errs, err)
	}
	if api := agent.API(c.modelAPI); api != agent.APIChatCompletions && api != agent.APIResponses {
		errs = append(errs, fmt.Errorf("serve: --model-api must be %s or %s, got %q", agent.APIChatCompletions, agent.APIResponses, c.modelAPI))
	}
	return withCode(exitUsage, errors.Join(errs...))
}

// flagSet reports whether the flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// newLogger returns the slog logger for format; "" picks text when w is a
// terminal and JSON otherwise.
func newLogger(format string, w io.Writer) *slog.Logger {
	if format == "" {
		format = "json"
		if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			format = "text"
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, nil))
	}
	return slog.New(slog.NewJSONHandler(w, nil))
}

// runServe implements `superstep serve`: the flags become a serve.Config
// hosting the demos (package examples), and serve.Run serves it. It
// prints the listening address to stdout, serves until ctx ends, then
// shuts down gracefully (see serve.Run).
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseServeFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log := newLogger(cfg.logFormat, stderr)
	tp, stopTracing, err := setupTracing(ctx, log)
	if err != nil {
		return withCode(exitUsage, err)
	}
	defer stopTracing() // runs after serve.Run returned: after the host stopped
	if tp != nil {
		cfg.tracer, log = tp, slog.New(traceLogHandler{log.Handler()})
	}
	keys, adminKeys, err := loadKeys(cfg)
	if err != nil {
		return withCode(exitUsage, err)
	}
	sc := &serve.Config{Addr: cfg.addr, DB: cfg.db, Register: cfg.registerDemos(log),
		ModelServer: cfg.modelServer, ModelAPIKey: cfg.openAIKey, Model: cfg.model, ModelAPI: agent.API(cfg.modelAPI),
		LocalFollowTools: cfg.localFollowTools, APIKeys: keys, AdminKeys: adminKeys,
		HostID: cfg.hostID, AdvertiseAddr: cfg.advertise, LeaseDuration: cfg.lease, MaxSupersteps: cfg.maxSupersteps,
		MaxRuns: cfg.maxRuns, KeepCheckpoints: cfg.keepCheckpoints, Retention: cfg.retention, NoJournal: cfg.noJournal, NoGroupCommit: cfg.noGroupCommit,
		MaxBodyBytes: cfg.maxBody, MaxInputItems: cfg.maxInputItems, KeepAlive: cfg.keepAlive,
		MaxStreams: noLimit(cfg.maxStreams), MaxStreamsPerKey: noLimit(cfg.maxStreamsPerKey),
		StoreTimeout: cfg.storeTimeout, BodyTimeout: cfg.bodyTimeout, MaxConns: cfg.maxConns, Grace: noGrace(cfg.grace),
		NoConsole: !cfg.ui, WebhookURLs: cfg.webhook.urls, WebhookSecret: cfg.webhook.secret,
		WebhookRetryFor: cfg.webhook.retryFor, WebhookTimeout: cfg.webhook.timeout,
		Logger: log, TracerProvider: cfg.tracer,
		Listening: func(addr net.Addr) {
			fmt.Fprintf(stdout, "superstep: listening on http://%s\n", addr)
			if tp != nil { // after the address: tools take the first 127.0.0.1:port printed
				log.Info("superstep: tracing", "tracing", tracingLog(tp))
			}
		}}
	err = serve.Run(ctx, sc)
	if err == nil || exitCode(err) != exitInternal {
		return err // nil, or a class the command's code chose already
	}
	for _, c := range []struct {
		class error
		code  int
	}{{serve.ErrConfig, exitUsage}, {serve.ErrStore, exitStoreOpen}, {serve.ErrListen, exitListen}, {serve.ErrUnclean, exitUnclean}} {
		if errors.Is(err, c.class) {
			return withCode(c.code, err)
		}
	}
	return err
}

// noGrace maps --grace 0 (no grace) to serve.Config's negative.
func noGrace(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// registerDemos returns the serve.Config.Register of the command: the
// demo workflows, and with a model server the LLM demos and the proxied
// models.
func (c *serveConfig) registerDemos(log *slog.Logger) func(context.Context, *host.Host, agent.Options) error {
	return func(ctx context.Context, h *host.Host, model agent.Options) error {
		if err := examples.Register(h); err != nil {
			return fmt.Errorf("register demos: %w", err)
		}
		if c.modelServer == "" && c.openAIKey == "" {
			log.Info("superstep: LLM demos not registered: no model server (use --model-server local for the offline test model, or --model-server URL / OPENAI_BASE_URL, or --openai-api-key / OPENAI_API_KEY)")
			return nil
		}
		llm := &examples.LLMOptions{BaseURL: model.BaseURL, APIKey: model.APIKey, Model: model.Model, API: model.API, HTTPClient: model.HTTPClient}
		where := redactModelURL(c.modelServer)
		switch {
		case c.modelServer == serve.ModelServerLocal:
			where = "local test model at " + model.BaseURL
		case where == "":
			where = "OpenAI's API"
		}
		if err := examples.RegisterLLM(h, llm); err != nil {
			return fmt.Errorf("register LLM demos: %w", err)
		}
		log.Info("superstep: LLM demos registered", "models", strings.Join(examples.LLMNames(), ","),
			"model_server", where, "model", c.model, "model_api", c.modelAPI)
		proxies, err := resolveProxies(ctx, c, llm)
		if err != nil {
			return err
		}
		if err := examples.RegisterProxies(h, llm, proxies); err != nil {
			return withCode(exitUsage, fmt.Errorf("--proxy-models: %w", err))
		}
		if len(proxies) > 0 {
			log.Info("superstep: models proxied as durable models", "models", strings.Join(proxies, ","),
				"model_server", redactModelURL(llm.BaseURL), "model_api", c.modelAPI)
		}
		return nil
	}
}

// loadKeys reads --api-keys and --admin-keys (each optional). A key may
// not be in both files.
func loadKeys(cfg *serveConfig) (keys, adminKeys map[string]string, err error) {
	if cfg.apiKeys != "" {
		if keys, err = loadAPIKeys(cfg.apiKeys); err != nil {
			return nil, nil, err
		}
	}
	if cfg.adminKeys != "" {
		if adminKeys, err = loadAPIKeys(cfg.adminKeys); err != nil {
			return nil, nil, fmt.Errorf("admin keys: %w", err)
		}
	}
	for k := range adminKeys {
		if _, dup := keys[k]; dup {
			return nil, nil, fmt.Errorf("api keys: a key of %s is also in %s; list each key once", cfg.adminKeys, cfg.apiKeys)
		}
	}
	return keys, adminKeys, nil
}

// redactModelURL hides a password in a model server URL, for logs.
func redactModelURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// proxyIDs reads --proxy-models: nil for "", the ids of a comma-separated
// list (each once, none empty), or [proxyAll].
func proxyIDs(list string) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	var ids []string
	seen := map[string]bool{}
	for _, id := range strings.Split(list, ",") {
		id = strings.TrimSpace(id)
		switch {
		case id == "":
			return nil, fmt.Errorf("serve: --proxy-models: empty model id in %q", list)
		case id == proxyAll && list != proxyAll:
			return nil, fmt.Errorf("serve: --proxy-models: %q stands alone", proxyAll)
		case seen[id]:
			return nil, fmt.Errorf("serve: --proxy-models: model %q listed twice", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	return ids, nil
}

// resolveProxies returns the model ids to proxy: those --proxy-models
// lists, or, for "all", those the model server lists (an error if it
// cannot be asked: serve does not start without them).
func resolveProxies(ctx context.Context, cfg *serveConfig, llm *examples.LLMOptions) ([]string, error) {
	ids, err := proxyIDs(cfg.proxyModels)
	if err != nil || len(ids) != 1 || ids[0] != proxyAll {
		return ids, err
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if ids, err = examples.ListModels(lctx, llm); err != nil {
		return nil, fmt.Errorf("--proxy-models all: %w", err)
	}
	if len(ids) == 0 {
		return nil, errors.New("--proxy-models all: the model server lists no models")
	}
	return ids, nil
}

// noLimit maps a flag's 0 ("no limit") to responses.Options' negative.
func noLimit(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// maxConnsDefault is the default of serve --max-conns.
const maxConnsDefault = serve.MaxConnsDefault
