package e2e

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/responses"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
)

// env is one real server: responses over a host over a SQLite file, behind
// httptest, with an openai-go client whose connections a test can cut.
type env struct {
	t      testing.TB
	store  store.Store
	host   *host.Host
	srv    *httptest.Server
	dialer *cuttableDialer
	http   *http.Client
	client openai.Client
	apiKey string
}

// envOpts tune newEnv; nil means defaults.
type envOpts struct {
	APIKeys      map[string]string // key -> owner; empty: auth off
	ClientKey    string            // key the default client sends
	MaxBodyBytes int64
	KeepAlive    time.Duration
	// Store, when set, is the store the host runs on (the env closes it);
	// nil: a SQLite file of the test's own.
	Store store.Store
	// Host, when set, is the host's configuration (Logger is filled in).
	Host *host.Config
	// Options, when set, adjusts the handler's options.
	Options func(*responses.Options)
	// Register, when set, registers more models on the host (after the
	// demos, before it starts).
	Register func(*host.Host) error
}

// testLogger returns the hosts' logger: warnings and errors, to stderr
// when SUPERSTEP_E2E_LOG is set and nowhere otherwise.
func testLogger() *slog.Logger {
	var out io.Writer = io.Discard
	if os.Getenv("SUPERSTEP_E2E_LOG") != "" {
		out = os.Stderr
	}
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// newHost opens a SQLite store in file in t's temporary directory and a
// host on it that logs to logger; the caller registers workflows and
// starts it.
func newHost(t testing.TB, file string, logger *slog.Logger) (*sqlite.Store, *host.Host) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), file), nil)
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	h, err := host.New(st, &host.Config{Logger: logger})
	if err != nil {
		t.Fatalf("host.New: %v", err)
	}
	return st, h
}

// newEnvHost returns the store and host of an env: o.Store and o.Host when
// set, else a SQLite file and the default configuration.
func newEnvHost(t testing.TB, o *envOpts, logger *slog.Logger) (store.Store, *host.Host) {
	t.Helper()
	if o.Store == nil && o.Host == nil {
		return newHost(t, "e2e.db", logger)
	}
	st := o.Store
	if st == nil {
		var err error
		if st, err = sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "e2e.db"), nil); err != nil {
			t.Fatalf("sqlite.Open: %v", err)
		}
	}
	cfg := host.Config{}
	if o.Host != nil {
		cfg = *o.Host
	}
	cfg.Logger = logger
	h, err := host.New(st, &cfg)
	if err != nil {
		t.Fatalf("host.New: %v", err)
	}
	return st, h
}

func newEnv(t testing.TB, o *envOpts) *env {
	t.Helper()
	if o == nil {
		o = &envOpts{}
	}
	ctx := context.Background()
	logger := testLogger()
	st, h := newEnvHost(t, o, logger)
	if err := examples.Register(h); err != nil {
		t.Fatalf("examples.Register: %v", err)
	}
	if o.Register != nil {
		if err := o.Register(h); err != nil {
			t.Fatalf("envOpts.Register: %v", err)
		}
	}
	if err := h.Start(ctx); err != nil {
		t.Fatalf("host.Start: %v", err)
	}
	ho := &responses.Options{APIKeys: o.APIKeys, MaxBodyBytes: o.MaxBodyBytes, KeepAlive: o.KeepAlive, Logger: logger}
	if o.Options != nil {
		o.Options(ho)
	}
	handler, err := responses.NewHandler(h, ho)
	if err != nil {
		t.Fatalf("responses.NewHandler: %v", err)
	}
	e := &env{t: t, store: st, host: h, srv: httptest.NewServer(handler), dialer: &cuttableDialer{}, apiKey: o.ClientKey}
	if e.apiKey == "" {
		e.apiKey = "test-key"
	}
	// The timeout turns a hung stream into a failure rather than a hung test.
	e.http = &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: e.dialer.DialContext}}
	e.client = e.newClient(e.apiKey)
	t.Cleanup(e.close)
	return e
}

// newClient returns an openai-go client for the server sending key. SDK
// retries are off so every request the test makes is one request.
func (e *env) newClient(key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(e.srv.URL+"/v1"), option.WithAPIKey(key),
		option.WithHTTPClient(e.http), option.WithMaxRetries(0), option.WithRequestTimeout(30*time.Second))
}

// close ends client connections (so open streams end), stops the server
// and the host, checks the store's invariants and closes it.
func (e *env) close() {
	e.srv.CloseClientConnections()
	e.srv.Close()
	e.http.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.host.Shutdown(ctx); err != nil {
		e.t.Errorf("host.Shutdown: %v", err)
	}
	if err := store.Check(ctx, e.store); err != nil {
		e.t.Errorf("store.Check: %v", err)
	}
	if err := e.store.Close(); err != nil {
		e.t.Errorf("store.Close: %v", err)
	}
}

// cuttableDialer dials TCP and remembers the connections so a test can
// drop them all at once, as a network failure would.
type cuttableDialer struct {
	d     net.Dialer
	mu    sync.Mutex
	conns []net.Conn
}

func (c *cuttableDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.conns = append(c.conns, conn)
	c.mu.Unlock()
	return conn, nil
}

// cut closes every connection dialed so far.
func (c *cuttableDialer) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}
