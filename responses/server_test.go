package responses

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/internal/testkit/pgtest"
	"github.com/superstep/superstep/internal/testkit/tcpproxy"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
	"github.com/superstep/superstep/store/sqlite"
)

// testServer is a real server: the handler over a host (with the demo
// workflows) over a real store, behind httptest.
type testServer struct {
	t     *testing.T
	store store.Store
	host  *host.Host
	srv   *httptest.Server
	http  *http.Client
	key   string // the bearer key requests send ("" when auth is off)
}

// testLogger discards logs unless RESPONSES_TEST_LOG is set.
func testLogger() *slog.Logger {
	var out io.Writer = io.Discard
	if os.Getenv("RESPONSES_TEST_LOG") != "" {
		out = os.Stderr
	}
	return slog.New(slog.NewTextHandler(out, nil))
}

// newTestServer serves st (closed with the server) with opts; nil opts
// mean the defaults.
func newTestServer(t *testing.T, st store.Store, opts *Options) *testServer {
	t.Helper()
	h, err := host.New(st, &host.Config{Logger: testLogger(), CommitBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := examples.Register(h); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.Logger = testLogger()
	handler, err := NewHandler(h, &o)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, store: st, host: h, srv: httptest.NewServer(handler),
		http: &http.Client{Timeout: time.Minute, Transport: &http.Transport{}}}
	t.Cleanup(ts.close)
	return ts
}

func (ts *testServer) close() {
	ts.srv.CloseClientConnections()
	ts.srv.Close()
	ts.http.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := ts.host.Shutdown(ctx); err != nil {
		ts.t.Errorf("host.Shutdown: %v", err)
	}
	if err := ts.store.Close(); err != nil {
		ts.t.Errorf("store.Close: %v", err)
	}
}

// openSQLite opens a SQLite store in a file of the test's own.
func openSQLite(t *testing.T, opts *sqlite.Options) (*sqlite.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "responses.db")
	st, err := sqlite.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	return st, path
}

// openSQLiteFile is openSQLite with the default options, store only.
func openSQLiteFile(t *testing.T) *sqlite.Store {
	t.Helper()
	st, _ := openSQLite(t, nil)
	return st
}

// openPostgresBehindProxy opens a PostgreSQL store on a schema of the
// test's own, connected through a TCP proxy that can cut it off.
func openPostgresBehindProxy(t *testing.T) (*postgres.Store, *tcpproxy.Proxy, string) {
	t.Helper()
	schema := pgtest.Schema(t, "responsestest")
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := tcpproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	u.Host = proxy.Addr()
	st, err := postgres.Open(context.Background(), u.String(), &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	return st, proxy, schema
}

// reply is one HTTP reply, read whole.
type reply struct {
	status int
	header http.Header
	body   string
}

// do sends a request with the server's key and reads the reply.
func (ts *testServer) do(method, path, body string) reply {
	ts.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.srv.URL+path, rd)
	if err != nil {
		ts.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if ts.key != "" {
		req.Header.Set("Authorization", "Bearer "+ts.key)
	}
	resp, err := ts.http.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// createBackground creates a background response and returns its id.
func (ts *testServer) createBackground(body string) string {
	ts.t.Helper()
	rp := ts.do("POST", "/v1/responses", body)
	var r struct {
		ID string `json:"id"`
	}
	if rp.status != 200 || json.Unmarshal([]byte(rp.body), &r) != nil || r.ID == "" {
		ts.t.Fatalf("create: %d %s", rp.status, rp.body)
	}
	return r.ID
}

// waitFor polls cond every 20 ms until it holds, failing the test after
// a minute (a hang, not a measurement).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// errorOf decodes an OpenAI-format error body.
func errorOf(t *testing.T, rp reply) errorObject {
	t.Helper()
	var b errorBody
	if err := json.Unmarshal([]byte(rp.body), &b); err != nil || b.Error.Message == "" {
		t.Fatalf("not an error body (%d): %s", rp.status, rp.body)
	}
	return b.Error
}

// createStreamed creates a response with stream=true, reads its stream to
// the end and returns its id.
func (ts *testServer) createStreamed(body string) string {
	ts.t.Helper()
	rp := ts.do("POST", "/v1/responses", body)
	for line := range strings.SplitSeq(rp.body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Response struct {
				ID string `json:"id"`
			} `json:"response"`
		}
		if json.Unmarshal([]byte(data), &ev) == nil && ev.Response.ID != "" {
			return ev.Response.ID
		}
	}
	ts.t.Fatalf("create (stream): %d %s", rp.status, rp.body)
	return ""
}
