package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// superstepBinary builds cmd/superstep once per test run.
func superstepBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		binary.dir, binary.err = os.MkdirTemp("", "superstep-e2e-bin")
		if binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "superstep")
		_, file, _, _ := runtime.Caller(0)
		cmd := exec.Command("go", "build", "-o", binary.path, "./cmd/superstep")
		cmd.Dir = filepath.Join(filepath.Dir(file), "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			binary.err = fmt.Errorf("go build ./cmd/superstep: %v\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

func cleanupBinary() {
	if binary.dir != "" {
		_ = os.RemoveAll(binary.dir)
	}
}

// serverProc is a running `superstep serve` child process.
type serverProc struct {
	cmd     *exec.Cmd
	baseURL string // http://host:port
	stderr  *lockedBuffer
	exited  chan struct{}
	waitErr error
}

var listenRE = regexp.MustCompile(`listening on (http://\S+)`)

// startServer runs `superstep serve --addr 127.0.0.1:0` plus args and
// waits for it to print its address.
func startServer(t *testing.T, env []string, args ...string) *serverProc {
	t.Helper()
	cmd := exec.Command(superstepBinary(t), append([]string{"serve", "--addr", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &serverProc{cmd: cmd, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.kill() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case p.baseURL = <-addr:
	case <-p.exited:
		t.Fatalf("server exited before listening: %v\n%s", p.waitErr, p.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("server did not print its address:\n%s", p.stderr)
	}
	return p
}

// stop sends sig and waits for the exit; it returns the exit code.
func (p *serverProc) stop(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("server did not exit after %v:\n%s", sig, p.stderr)
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *serverProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

func (p *serverProc) client(key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(p.baseURL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0),
		option.WithRequestTimeout(time.Minute), // a hung server fails the test instead of hanging it
		option.WithHTTPClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}))
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBinary_ServeStreamBackgroundShutdown runs the real binary with API
// keys: streaming, background + polling, another key's 404, health and
// metrics, `superstep check` while it serves, a graceful SIGTERM, then
// `superstep check` on the file and a restart that still serves the stored responses.
func TestBinary_ServeStreamBackgroundShutdown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "serve.db")
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte("# test keys\nkey-alice alice\nkey-bob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServer(t, []string{"SUPERSTEP_DB=" + db}, "--api-keys", keys)
	ctx := context.Background()
	alice, bob := p.client("key-alice"), p.client("key-bob")

	s := drain(alice.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "demo.echo", Input: textInput("from the binary")}), nil)
	requireLifecycle(t, s, "response.completed")
	if got := s.last().Response.OutputText(); got != "from the binary" {
		t.Fatalf("streamed %q", got)
	}
	bg, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "demo.fanout", Input: textInput("x"),
		Background: openai.Bool(true), Metadata: shared.Metadata{"workers": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	final := pollTerminal(t, alice, bg.ID)
	if final.OutputText() != "worker-0,worker-1" {
		t.Fatalf("background output %q", final.OutputText())
	}
	_, err = bob.Responses.Get(ctx, bg.ID, responses.ResponseGetParams{})
	requireStatus(t, err, http.StatusNotFound)
	stranger := p.client("wrong")
	_, err = stranger.Responses.Get(ctx, bg.ID, responses.ResponseGetParams{})
	requireStatus(t, err, http.StatusUnauthorized)
	requireGet(t, p.baseURL+"/healthz", "ok")
	requireGet(t, p.baseURL+"/metrics", "superstep_http_requests_total")
	// check opens the file read-only, so it works while the server holds it.
	if out, err := exec.Command(superstepBinary(t), "check", db).CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "ok") {
		t.Fatalf("superstep check while serving: %v\n%s", err, out)
	}

	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code after SIGTERM %d:\n%s", code, p.stderr)
	}
	out, err := exec.Command(superstepBinary(t), "check", db).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok") {
		t.Fatalf("superstep check: %v\n%s", err, out)
	}
	p2 := startServer(t, []string{"SUPERSTEP_DB=" + db, "SUPERSTEP_API_KEYS=" + keys})
	alice2 := p2.client("key-alice")
	again, err := alice2.Responses.Get(ctx, bg.ID, responses.ResponseGetParams{})
	if err != nil || again.OutputText() != "worker-0,worker-1" {
		t.Fatalf("after restart: %v %+v", err, again)
	}
	if code := p2.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("exit code after SIGINT %d", code)
	}
}

// TestBinary_ExitCodes checks the distinct exit code of each failure class.
func TestBinary_ExitCodes(t *testing.T) {
	t.Parallel()
	bin := superstepBinary(t)
	dir := t.TempDir()
	notDB := filepath.Join(dir, "not-a-db")
	if err := os.WriteFile(notDB, []byte("this is not a database file, not at all, no"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"NoCommand", nil, 2},
		{"UnknownCommand", []string{"frobnicate"}, 2},
		{"BadFlag", []string{"serve", "--nope"}, 2},
		{"BadLogFormat", []string{"serve", "--log-format", "xml"}, 2},
		{"MissingKeysFile", []string{"serve", "--api-keys", filepath.Join(dir, "missing")}, 2},
		{"CheckNoArg", []string{"check"}, 2},
		{"CheckMissingFile", []string{"check", filepath.Join(dir, "missing.db")}, 3},
		{"CheckNotADatabase", []string{"check", notDB}, 3},
		{"ListenFails", []string{"serve", "--addr", "256.0.0.1:1", "--db", filepath.Join(dir, "l.db")}, 5},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, bin, tt.args...)
		cmd.Dir = dir // a serve that got too far would leave its files here
		out, err := cmd.CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != tt.code {
			t.Errorf("%s: superstep %v: %v, want exit code %d\n%s", tt.name, tt.args, err, tt.code, out)
		}
	}
}

func pollTerminal(t *testing.T, c openai.Client, id string) *responses.Response {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r, err := c.Responses.Get(context.Background(), id, responses.ResponseGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != "queued" && r.Status != "in_progress" {
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s not terminal after 30s", id)
	return nil
}

func requireGet(t *testing.T, url, contains string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: time.Minute}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != 200 || !strings.Contains(string(body), contains) {
		t.Fatalf("GET %s: %d, body lacks %q:\n%.500s", url, resp.StatusCode, contains, body)
	}
}

// TestBinary_RestartResumesRun stops the server (SIGTERM) while a
// background run is mid-way and a client follows its stream: the stream
// breaks (not a clean end), the server exits 0, and a new server on the
// same file finishes the run; the client resumes there with StartingAfter
// without a gap or a duplicate. The demo journal shows no superstep ran
// twice (graceful shutdown lets the running superstep commit).
func TestBinary_RestartResumesRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, journal := filepath.Join(dir, "restart.db"), filepath.Join(dir, "journal")
	env := []string{"SUPERSTEP_DEMO_JOURNAL=" + journal}
	p := startServer(t, env, "--db", db)
	ctx := context.Background()
	c1 := p.client("k")
	first := drain(c1.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "demo.silent", Input: textInput("go"),
		Background: openai.Bool(true), Metadata: shared.Metadata{"steps": "12", "step_delay_ms": "100"}}),
		func(ev responses.ResponseStreamEventUnion) bool {
			if ev.Type == "response.in_progress" {
				time.Sleep(300 * time.Millisecond) // a few supersteps commit
				go func() { _ = p.cmd.Process.Signal(syscall.SIGTERM) }()
			}
			return false
		})
	if first.Err == nil || slices.Contains(first.types(), "response.completed") {
		t.Fatalf("stream through the shutdown: err %v, events %v; want a broken stream", first.Err, first.types())
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("server did not exit within 30s of SIGTERM:\n%s", p.stderr)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM:\n%s", code, p.stderr)
	}
	p2 := startServer(t, env, "--db", db)
	c2 := p2.client("k")
	id := first.responseID(t)
	rest := drain(c2.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(first.last().SequenceNumber)}), nil)
	all := streamed{Events: append(slices.Clone(first.Events), rest.Events...)}
	requireLifecycle(t, all, "response.completed")
	if got := all.last().Response.OutputText(); got != "done after 12" {
		t.Fatalf("final output %q", got)
	}
	if code := p2.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("second server exit code %d", code)
	}
	t.Logf("first server:\n%s\nsecond server:\n%s", p.stderr, p2.stderr)
	requireJournalOnce(t, journal, id, 13)
}

// requireJournalOnce checks that the demo journal holds supersteps
// 1..steps of the response, each exactly once.
func requireJournalOnce(t *testing.T, path, id string, steps int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == id {
			seen[f[1]]++
		}
	}
	for step := 1; step <= steps; step++ {
		if n := seen[fmt.Sprint(step)]; n != 1 {
			t.Errorf("superstep %d ran %d times (journal %v)", step, n, seen)
		}
	}
	if len(seen) != steps {
		t.Errorf("journal has supersteps %v, want 1..%d", seen, steps)
	}
}
