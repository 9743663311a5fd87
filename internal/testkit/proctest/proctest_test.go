package proctest_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/superstep/superstep/internal/testkit/proctest"
)

// helperEnv makes the test binary act as a tiny server instead of running
// tests: the child process the tests start.
const helperEnv = "PROCTEST_HELPER_SERVER"

// decoyEnv makes the helper print another address before its own, as
// `superstep serve --model-server local` does.
const decoyEnv = "PROCTEST_HELPER_DECOY"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperServer())
	}
	goleak.VerifyTestMain(m)
}

// helperServer serves /healthz and /metrics, prints its address like
// `superstep serve` does, and exits 0 on SIGTERM.
func helperServer() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# HELP x_total A counter.\n# TYPE x_total counter\nx_total 3\n"+
			"y_total{op=\"a b\"} 1.5 1700000000\n")
	})
	srv := &http.Server{Handler: mux}
	if os.Getenv(decoyEnv) != "" {
		fmt.Println("helper: model server on http://127.0.0.1:9")
	}
	fmt.Printf("helper: listening on http://%s\n", ln.Addr())
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() { <-term; srv.Close() }()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return 1
	}
	return 0
}

// startHelper starts the test binary as a helper server.
func startHelper(t *testing.T) *proctest.Proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := proctest.Start(ctx, &proctest.Options{Bin: os.Args[0], Env: []string{helperEnv + "=1"},
		LogPath: filepath.Join(t.TempDir(), "helper.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-p.Done():
		default:
			_ = p.Kill()
		}
	})
	return p
}

// healthy reports whether the process answers /healthz within d.
func healthy(p *proctest.Proc, d time.Duration) bool {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: d}
	resp, err := c.Get(p.URL() + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// A stopped process answers nothing until it is continued; SIGTERM then
// ends it cleanly, and its output was logged.
func TestProc_StopContTerminate(t *testing.T) {
	p := startHelper(t)
	if !strings.HasPrefix(p.URL(), "http://127.0.0.1:") || p.Pid() <= 0 {
		t.Fatalf("URL %q pid %d", p.URL(), p.Pid())
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if healthy(p, 300*time.Millisecond) {
		t.Fatal("a stopped process answered /healthz")
	}
	if err := p.Cont(); err != nil {
		t.Fatal(err)
	}
	if !healthy(p, 30*time.Second) {
		t.Fatal("a continued process did not answer /healthz")
	}
	if err := p.Terminate(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	out, err := p.Output()
	if err != nil || !strings.Contains(out, "helper: listening on") {
		t.Fatalf("output %q, %v", out, err)
	}
	if err := p.Stop(); err == nil {
		t.Fatal("Stop of an exited process succeeded")
	}
}

// Kill ends even a stopped process, and a second Kill says it was not
// running.
func TestProc_Kill(t *testing.T) {
	p := startHelper(t)
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.Err() == nil {
		t.Fatal("a killed process exited with status 0")
	}
	if err := p.Kill(); err == nil {
		t.Fatal("Kill of an exited process succeeded")
	}
}

// A process that exits before listening fails Start with its output.
func TestStart_ExitBeforeListening(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := proctest.Start(ctx, &proctest.Options{Bin: "/bin/sh", Args: []string{"-c", "echo boom; exit 3"}})
	if err == nil || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "exited before listening") {
		t.Fatalf("Start: %v", err)
	}
}

func TestScrape(t *testing.T) {
	p := startHelper(t)
	m, err := proctest.Scrape(context.Background(), p.URL())
	if err != nil {
		t.Fatal(err)
	}
	if m["x_total"] != 3 || m[`y_total{op="a b"}`] != 1.5 || len(m) != 2 {
		t.Fatalf("scraped %v", m)
	}
	if err := p.Terminate(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := proctest.Scrape(context.Background(), p.URL()); err == nil {
		t.Fatal("Scrape of an exited server succeeded")
	}
}

func TestParseMetrics_Bad(t *testing.T) {
	for _, in := range []string{"x_total\n", "x_total abc\n", "y{a=\"b\"}\n"} {
		if _, err := proctest.ParseMetrics(strings.NewReader(in)); err == nil {
			t.Errorf("ParseMetrics(%q) succeeded", in)
		}
	}
}

func TestFreePort(t *testing.T) {
	port, err := proctest.FreePort()
	if err != nil || port <= 0 {
		t.Fatalf("FreePort: %d %v", port, err)
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("the free port %d is taken: %v", port, err)
	}
	ln.Close()
}

func TestBuild_Fails(t *testing.T) {
	err := proctest.Build(context.Background(), "./does-not-exist", filepath.Join(t.TempDir(), "x"), false)
	if err == nil || !strings.Contains(err.Error(), "go build") {
		t.Fatalf("Build: %v", err)
	}
}

// A process that prints another address before its own is found by a
// pattern of its own.
func TestStart_AddrPattern(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := proctest.Start(ctx, &proctest.Options{Bin: os.Args[0], Env: []string{helperEnv + "=1", decoyEnv + "=1"},
		AddrPattern: regexp.MustCompile(`listening on http://(127\.0\.0\.1:[0-9]+)`)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Terminate(30 * time.Second); err != nil {
			t.Error(err)
		}
	}()
	if strings.HasSuffix(p.URL(), ":9") || !healthy(p, 30*time.Second) {
		t.Fatalf("URL %s: the decoy address, or not healthy", p.URL())
	}
}

// BuildTemp builds a binary that runs, and its remove function deletes it.
func TestBuildTemp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, remove, err := proctest.BuildTemp(ctx, "./testdata/hello", "hello")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, bin).Output()
	remove()
	if err != nil || string(out) != "hello\n" {
		t.Fatalf("built binary: %q %v", out, err)
	}
	if _, err := os.Stat(bin); !os.IsNotExist(err) {
		t.Fatalf("binary still there after remove: %v", err)
	}
	if _, _, err := proctest.BuildTemp(ctx, "./does-not-exist", "x"); err == nil {
		t.Fatal("BuildTemp of a missing package succeeded")
	}
}

// WorkDir without keep is the test's temporary directory; with keep, a
// directory removed once the test passed.
func TestWorkDir(t *testing.T) {
	var kept, temp string
	t.Run("pass", func(t *testing.T) {
		temp = proctest.WorkDir(t, false, "proctest-workdir")
		kept = proctest.WorkDir(t, true, "proctest-workdir")
		if !strings.Contains(filepath.Base(kept), "proctest-workdir-") || kept == temp {
			t.Fatalf("kept dir %s, temp dir %s", kept, temp)
		}
	})
	for _, dir := range []string{temp, kept} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s still there after a passed test: %v", dir, err)
		}
	}
}
