package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// chromiumNames are the names Debian's (and others') Chromium goes by.
var chromiumNames = []string{"chromium", "chromium-browser"}

// TestConsoleBrowser runs e2e/browser — the console's pages in headless
// Chromium (playwright-core, --no-sandbox), and its DOM-free modules'
// unit tests — against a real `superstep serve` with an API key and every
// checkpoint kept. Screenshots of each page go to e2e/browser/screenshots
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

	tmp := t.TempDir()
	keys := filepath.Join(tmp, "keys")
	if err := os.WriteFile(keys, []byte("console-key alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, nil, "--db", filepath.Join(tmp, "s.db"), "--api-keys", keys, "--keep-checkpoints", "-1")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "--test-concurrency=1", "unit.test.mjs", "console.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SUPERSTEP_URL="+srv.baseURL, "SUPERSTEP_API_KEY=console-key",
		"CHROMIUM_PATH="+chromium, "SCREENSHOT_DIR="+filepath.Join(dir, "screenshots"))
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("browser tests failed: %v\nserver log:\n%s", err, srv.stderr)
	}
}
