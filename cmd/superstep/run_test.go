package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/dburl"
)

// TestRun_ServeUntilCancelled runs serve in process: it prints its
// address, answers, and returns nil once ctx ends (the signal path).
func TestRun_ServeUntilCancelled(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "s.db"), "--log-format", "text", "--host-id", "host-under-test"}, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no address line: %v (run: %v)", err, <-done)
	}
	m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("address line %q", line)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(m[1] + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "demo.echo") {
		t.Fatalf("models: %d %s", resp.StatusCode, body)
	}
	var out strings.Builder
	if err := run(ctx, []string{"hosts", "--addr", m[1]}, &out, io.Discard); err != nil {
		t.Fatalf("hosts: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "HOST") {
		t.Fatalf("hosts printed %q, want a header and this host", out.String())
	}
	// The host's id is --host-id and its address the bound one, not ":0".
	if f := strings.Fields(lines[1]); len(f) < 2 || f[0] != "host-under-test" || "http://"+f[1] != m[1] {
		t.Fatalf("hosts printed %q, want host-under-test at %s", lines[1], m[1])
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v after cancel", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return after cancel")
	}
}

func TestRun_UsageAndCodes(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		args []string
		code int
	}{
		{nil, exitUsage},
		{[]string{"nope"}, exitUsage},
		{[]string{"serve", "--max-body", "0"}, exitUsage},
		{[]string{"serve", "extra"}, exitUsage},
		{[]string{"serve", "--model-server", "ftp://models.example"}, exitUsage},
		{[]string{"serve", "--model-server", "not a url"}, exitUsage},
		{[]string{"serve", "--model-api", "completions"}, exitUsage},
		{[]string{"serve", "--model", ""}, exitUsage},
		{[]string{"check"}, exitUsage},
		{[]string{"check", filepath.Join(t.TempDir(), "missing.db")}, exitStoreOpen},
		{[]string{"help"}, exitOK},
		{[]string{"serve", "-h"}, exitOK},
	}
	for _, tt := range tests {
		err := run(ctx, tt.args, io.Discard, io.Discard)
		if got := exitCode(err); got != tt.code {
			t.Errorf("run %v: %v (exit %d), want exit %d", tt.args, err, got, tt.code)
		}
	}
}

func TestCheck_FreshStore(t *testing.T) {
	db := filepath.Join(t.TempDir(), "c.db")
	st, err := openStore(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := run(context.Background(), []string{"check", db}, &out, io.Discard); err != nil || !strings.HasPrefix(out.String(), "ok: ") {
		t.Fatalf("check: %v %q", err, out.String())
	}
}

func TestLoadAPIKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keys, err := loadAPIKeys(write("ok", "# comment\n\nk1 alice\n  k2  \n"))
	if err != nil || len(keys) != 2 || keys["k1"] != "alice" || !strings.HasPrefix(keys["k2"], "key-") || strings.Contains(keys["k2"], "k2") {
		t.Fatalf("keys %v, %v", keys, err)
	}
	for name, content := range map[string]string{"empty": "# none\n", "dup": "a\na\n", "fields": "a b c\n"} {
		if _, err := loadAPIKeys(write(name, content)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := loadAPIKeys(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:secret@h:5432/db": "postgres://u:xxxxx@h:5432/db",
		"postgres://u@h/db":             "postgres://u@h/db",
		"/tmp/x.db":                     "/tmp/x.db",
	} {
		if got := dburl.Redact(in); got != want {
			t.Errorf("dburl.Redact(%q) = %q", in, got)
		}
	}
}

func TestExitCode(t *testing.T) {
	if exitCode(nil) != 0 || exitCode(errors.New("x")) != exitInternal || exitCode(withCode(exitCheck, errors.New("x"))) != exitCheck {
		t.Fatal("exitCode mapping")
	}
}
