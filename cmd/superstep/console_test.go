package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serve mounts the console at /ui/: its files need no key while the API
// still does, and --ui=false leaves it out.
func TestServe_Console(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("k1 alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	status := func(base, path string) (int, string) {
		t.Helper()
		res, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}

	base, _ := serveInProcess(t, "--api-keys", keys)
	if code, body := status(base, "/ui/"); code != http.StatusOK || !strings.Contains(body, "superstep console") {
		t.Fatalf("GET /ui/ without a key: %d\n%s", code, body)
	}
	if code, _ := status(base, "/ui/js/app.js"); code != http.StatusOK {
		t.Fatalf("GET /ui/js/app.js without a key: %d", code)
	}
	if code, _ := status(base, "/ui"); code != http.StatusMovedPermanently {
		t.Fatalf("GET /ui: %d, want a redirect to /ui/", code)
	}
	if code, _ := status(base, "/v1/models"); code != http.StatusUnauthorized {
		t.Fatalf("GET /v1/models without a key: %d, want 401 (the console must not open the API)", code)
	}

	off, _ := serveInProcess(t, "--ui=false")
	if code, _ := status(off, "/ui/"); code != http.StatusNotFound {
		t.Fatalf("GET /ui/ with --ui=false: %d, want 404", code)
	}
	if code, _ := status(off, "/v1/models"); code != http.StatusOK {
		t.Fatalf("GET /v1/models with --ui=false: %d", code)
	}
}
