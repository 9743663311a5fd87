package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden outputs in testdata/inspect")

// liveServer runs `superstep serve` in process on a fresh SQLite file,
// keeping every checkpoint, with one API key; it returns its base URL.
func liveServer(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte("test-key alice\nother-key bob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "s.db"), "--log-format", "text",
			"--host-id", "host-test", "--keep-checkpoints", "-1", "--api-keys", keys}, pw, io.Discard)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not return after cancel")
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no address line: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("address line %q", line)
	}
	return m[1]
}

// post sends a create request with the test key and returns the body.
func post(t *testing.T, base, path, body string) string {
	t.Helper()
	req, err := http.NewRequest("POST", base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer test-key")
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d %v %s", path, resp.StatusCode, err, b)
	}
	return string(b)
}

// responseID returns the id of a Response object, or of the first event's
// response in an SSE body.
func responseID(t *testing.T, body string) string {
	t.Helper()
	m := regexp.MustCompile(`"id":"(resp_[0-9a-f]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no response id in %s", body)
	}
	return m[1]
}

// normalizer replaces ids, in order of first appearance, and times by
// stable names, so outputs can be compared with goldens.
type normalizer struct {
	ids map[string]string
	n   map[string]int
}

var (
	idPattern   = regexp.MustCompile(`\b(resp|run|msg|call|fc)_[0-9A-Za-z_-]{8,}`)
	timePattern = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	unixPattern = regexp.MustCompile(`"(created_at|updated_at|completed_at|expires_at|committed_at)": ?\d{9,}`)
)

func (nz *normalizer) normalize(s string) string {
	s = idPattern.ReplaceAllStringFunc(s, func(id string) string {
		if v, ok := nz.ids[id]; ok {
			return v
		}
		prefix := id[:strings.IndexByte(id, '_')]
		nz.n[prefix]++
		v := fmt.Sprintf("%s_%d", prefix, nz.n[prefix])
		nz.ids[id] = v
		return v
	})
	s = timePattern.ReplaceAllString(s, "TIME")
	return unixPattern.ReplaceAllString(s, `"$1": UNIX`)
}

// cli runs a command line against base with the test key and returns its
// output and error.
func cli(t *testing.T, base string, args ...string) (string, error) {
	t.Helper()
	var out, errOut strings.Builder
	full := append([]string{args[0], "--addr", base, "--api-key", "test-key"}, args[1:]...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := run(ctx, full, &out, &errOut)
	return out.String(), err
}

// golden compares got with testdata/inspect/name, or writes it with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "inspect", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// TestInspectCommands runs every inspection command against a live
// server and compares their outputs, ids and times normalised, with the
// goldens in testdata/inspect.
func TestInspectCommands(t *testing.T) {
	base := liveServer(t)
	nz := &normalizer{ids: map[string]string{}, n: map[string]int{}}
	r1 := responseID(t, post(t, base, "/v1/responses", `{"model":"demo.two-outputs","input":"x"}`))
	r2 := responseID(t, post(t, base, "/v1/responses", `{"model":"demo.two-outputs","input":"y","stream":true}`))
	r3 := responseID(t, post(t, base, "/v1/responses", `{"model":"demo.approval","input":"ship?"}`))
	for _, id := range []string{r1, r2, r3} {
		nz.normalize(id) // resp_1, resp_2, resp_3 in creation order
	}

	step := func(name string, args ...string) string {
		t.Helper()
		out, err := cli(t, base, args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		golden(t, name, nz.normalize(out))
		return out
	}
	step("show.txt", "show", r1)
	step("checkpoints.txt", "checkpoints", r1)
	step("events.txt", "events", r2)
	step("events_from.txt", "events", r2, "--from", "8")
	step("events_plain.txt", "events", r1) // created without stream: read as JSON pages
	step("show_pending.txt", "show", r3)
	step("runs.txt", "runs")
	forked := step("fork.txt", "fork", r1, "--step", "1")
	step("show_fork.txt", "show", strings.Fields(forked)[0])
	step("runs_page.txt", "runs", "--limit", "2", "--order", "asc")

	// A long run, cancelled while it runs.
	long := responseID(t, post(t, base, "/v1/responses",
		`{"model":"demo.silent","input":"z","background":true,"metadata":{"steps":"500","step_delay_ms":"20"}}`))
	step("cancel.txt", "cancel", long)
	waitCancelled(t, base, long)
	// --follow of a response created without stream polls its pages to
	// the terminal event.
	if out, err := cli(t, base, "events", long, "--follow"); err != nil ||
		!strings.Contains(strings.TrimSpace(out)[strings.LastIndexByte(strings.TrimSpace(out), '\n')+1:], "response.cancelled") {
		t.Errorf("events --follow of a background response: %v\n%s", err, out)
	}
	// --follow reads a finished response to its terminal event.
	if out, err := cli(t, base, "events", r2, "--follow"); err != nil || nz.normalize(out) != readGolden(t, "events.txt") {
		t.Errorf("events --follow: %v\n%s", err, out)
	}

	// JSON output is the server's.
	out, err := cli(t, base, "runs", "--json", "--limit", "1")
	var list struct {
		Object string            `json:"object"`
		Data   []json.RawMessage `json:"data"`
	}
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || list.Object != "list" || len(list.Data) != 1 {
		t.Fatalf("runs --json: %v %s", err, out)
	}

	// Errors: the server's message, exit code 2 for a refused request.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"fork", r1, "--step", "99"}, "checkpoint_not_found"},
		{[]string{"fork", r1}, "--step is required"},
		{[]string{"runs", "--status", "bogus"}, "Invalid value for 'status'"},
		{[]string{"show", "resp_0000000000"}, "not found"},
		{[]string{"show", "nonsense"}, "neither a run id"},
		{[]string{"cancel"}, "want one response id"},
	} {
		_, err := cli(t, base, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || exitCode(err) != exitUsage {
			t.Errorf("%v: %v (exit %d), want %q and exit %d", tc.args, err, exitCode(err), tc.want, exitUsage)
		}
	}
	// Another key sees none of these runs.
	var errOut strings.Builder
	var other strings.Builder
	if err := run(context.Background(), []string{"runs", "--addr", base, "--api-key", "other-key"}, &other, &errOut); err != nil ||
		strings.Count(other.String(), "\n") != 1 {
		t.Errorf("runs as another key: %v\n%s", err, other.String())
	}
	// The key comes from SUPERSTEP_API_KEY when --api-key is absent.
	t.Setenv("SUPERSTEP_API_KEY", "test-key")
	var env strings.Builder
	if err := run(context.Background(), []string{"show", r1, "--addr", base}, &env, &errOut); err != nil ||
		nz.normalize(env.String()) != readGolden(t, "show.txt") {
		t.Errorf("show with SUPERSTEP_API_KEY: %v\n%s", err, env.String())
	}
}

func readGolden(t *testing.T, name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", "inspect", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitCancelled waits until the response's cancelled event is committed.
func waitCancelled(t *testing.T, base, id string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := cli(t, base, "show", id, "--json")
		if err == nil && strings.Contains(out, `"completed_at": 1`) && strings.Contains(out, `"status": "cancelled"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("response %s not cancelled: %v %s", id, err, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
