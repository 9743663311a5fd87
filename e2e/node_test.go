package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestNodeClient runs e2e/node (node:test with the openai npm package)
// against a real in-process server. node_modules must have been installed
// (`npm ci --prefix e2e/node`): with CI set its absence fails the test,
// otherwise the test skips and says how to install it.
func TestNodeClient(t *testing.T) {
	t.Parallel()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "node")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node test cannot run (%v): install with `npm ci --prefix e2e/node`", err)
		}
		t.Skipf("node test skipped (%v): run `npm ci --prefix e2e/node` to enable it", err)
	}
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "responses.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SUPERSTEP_BASE_URL="+e.srv.URL+"/v1", "SUPERSTEP_API_KEY=test")
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("node --test failed: %v", err)
	}
}
