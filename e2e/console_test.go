package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/testkit/pgtest"
)

// chromiumNames are the names Debian's (and others') Chromium goes by.
var chromiumNames = []string{"chromium", "chromium-browser"}

// TestConsoleBrowser runs e2e/browser — the console's pages in headless
// Chromium (playwright-core, --no-sandbox), and its DOM-free modules'
// unit tests — against two real `superstep serve` hosts on one PostgreSQL
// database, with an API key and every checkpoint kept. Screenshots of each page go to e2e/browser/screenshots
// (git-ignored). It needs Chromium (`apt-get install chromium`) and
// `npm ci --prefix e2e/browser`: with CI set their absence fails the test,
// otherwise it skips and says what to install.
func TestConsoleBrowser(t *testing.T) {
	t.Parallel()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "browser")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "playwright-core", "package.json"))
	}
	chromium := os.Getenv("CHROMIUM_PATH")
	for _, name := range chromiumNames {
		if err == nil && chromium == "" {
			chromium, _ = exec.LookPath(name)
		}
	}
	if err == nil && chromium == "" {
		err = errors.New("no chromium on PATH")
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("browser test cannot run (%v): install with `apt-get install -y chromium` and `npm ci --prefix e2e/browser`", err)
		}
		t.Skipf("browser test skipped (%v): `apt-get install -y chromium` and `npm ci --prefix e2e/browser` enable it", err)
	}

	// Two hosts on one PostgreSQL database with a short lease: the page
	// talks to host-a; the takeover test SIGKILLs host-b while it drives
	// a run, and host-a takes the run over.
	db := pgtest.Database(t, "superstep_console")
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("console-key alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--db", db, "--api-keys", keys, "--keep-checkpoints", "-1", "--lease", "1500ms"}
	a := startServer(t, nil, append(args, "--host-id", "host-a")...)
	b := startServer(t, nil, append(args, "--host-id", "host-b")...)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "--test-concurrency=1", "unit.test.mjs", "console.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SUPERSTEP_URL="+a.baseURL, "SUPERSTEP_API_KEY=console-key",
		"SUPERSTEP_VICTIM_URL="+b.baseURL, "SUPERSTEP_VICTIM_PID="+strconv.Itoa(b.cmd.Process.Pid),
		"CHROMIUM_PATH="+chromium, "SCREENSHOT_DIR="+filepath.Join(dir, "screenshots"))
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("browser tests failed: %v\nhost-a log:\n%s\nhost-b log:\n%s", err, a.stderr, b.stderr)
	}
	select {
	case <-b.exited: // the takeover test killed it
	default:
		t.Fatal("host-b is still running: the takeover test did not kill it")
	}
}
