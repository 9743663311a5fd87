package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/localmodel"
	"github.com/superstep/superstep/responses"
)

func TestParseServeFlags_ModelServer(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	c, err := parseServeFlags(nil, io.Discard)
	if err != nil || c.modelServer != "" || c.openAIKey != "" || c.model != agent.DefaultModel || c.modelAPI != string(agent.APIChatCompletions) {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	t.Setenv("OPENAI_BASE_URL", "http://models.example/v1")
	t.Setenv("OPENAI_API_KEY", "sk-env")
	if c, err = parseServeFlags(nil, io.Discard); err != nil || c.modelServer != "http://models.example/v1" || c.openAIKey != "sk-env" {
		t.Fatalf("from the environment: %+v, %v", c, err)
	}
	var help strings.Builder
	if _, err := parseServeFlags([]string{"-h"}, &help); !strings.Contains(help.String(), "-openai-api-key") || strings.Contains(help.String(), "sk-env") {
		t.Fatalf("-h: %v; help must list the flag without the key:\n%s", err, help.String())
	}
	c, err = parseServeFlags([]string{"--model-server", "local", "--openai-api-key", "sk-flag", "--model", "m1", "--model-api", "responses"}, io.Discard)
	if err != nil || c.modelServer != "local" || c.openAIKey != "sk-flag" || c.model != "m1" || c.modelAPI != "responses" {
		t.Fatalf("flags over the environment: %+v, %v", c, err)
	}
}

func TestParseServeFlags_Storage(t *testing.T) {
	t.Setenv("SUPERSTEP_RETENTION", "")
	c, err := parseServeFlags(nil, io.Discard)
	if err != nil || c.keepCheckpoints != host.KeepCheckpointsDefault || c.retention != 0 {
		t.Fatalf("defaults: keep %d, retention %v, %v", c.keepCheckpoints, c.retention, err)
	}
	t.Setenv("SUPERSTEP_RETENTION", "720h")
	if c, err = parseServeFlags([]string{"--keep-checkpoints", "-1"}, io.Discard); err != nil || c.retention != 720*time.Hour || c.keepCheckpoints != -1 {
		t.Fatalf("from the environment: keep %d, retention %v, %v", c.keepCheckpoints, c.retention, err)
	}
	if c, err = parseServeFlags([]string{"--retention", "1h", "--keep-checkpoints", "5"}, io.Discard); err != nil || c.retention != time.Hour || c.keepCheckpoints != 5 {
		t.Fatalf("flags over the environment: keep %d, retention %v, %v", c.keepCheckpoints, c.retention, err)
	}
	for _, args := range [][]string{{"--keep-checkpoints", "0"}, {"--retention", "-1s"}, {"--retention", "soon"}} {
		if _, err := parseServeFlags(args, io.Discard); err == nil {
			t.Fatalf("%q: no error", args)
		}
	}
	t.Setenv("SUPERSTEP_RETENTION", "forever")
	if _, err := parseServeFlags(nil, io.Discard); err == nil || !strings.Contains(err.Error(), "SUPERSTEP_RETENTION") {
		t.Fatalf("bad SUPERSTEP_RETENTION: %v", err)
	}
}

// syncBuffer is a strings.Builder safe for the logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serveInProcess runs serve with args until the test ends; it returns the
// base URL and the log.
func serveInProcess(t *testing.T, args ...string) (string, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	logs := &syncBuffer{}
	done := make(chan error, 1)
	args = append([]string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "s.db"), "--log-format", "text"}, args...)
	go func() {
		done <- run(ctx, args, pw, logs)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve returned %v after cancel", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not return after cancel")
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no address line: %v\n%s", err, logs)
	}
	m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("address line %q", line)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return m[1], logs
}

// modelIDs lists the models the server hosts.
func modelIDs(t *testing.T, client *http.Client, base string) string {
	t.Helper()
	resp, err := client.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("models: %d %s", resp.StatusCode, body)
	}
	return string(body)
}

// TestServe_ModelServerLocal serves the LLM demos with the in-process
// local model: demo.writer-reviewer answers deterministically.
func TestServe_ModelServerLocal(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	base, logs := serveInProcess(t, "--model-server", "local", "--model", "any-name")
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	if ids := modelIDs(t, client, base); !strings.Contains(ids, examples.WriterReviewer) || !strings.Contains(ids, examples.Tools) {
		t.Fatalf("models %s lack the LLM demos", ids)
	}
	resp, err := client.Post(base+"/v1/responses", "application/json", strings.NewReader(
		`{"model":"demo.writer-reviewer","input":"tides","metadata":{"token_delay_ms":"0"}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Output []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 {
		t.Fatalf("create: %d %v", resp.StatusCode, err)
	}
	var texts []string
	for _, it := range r.Output {
		for _, c := range it.Content {
			texts = append(texts, c.Text)
		}
	}
	want := []string{"Echo: tides", "Echo: " + examples.ReviewPrompt + "Echo: tides"}
	if r.Status != "completed" || strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Fatalf("status %s, output %q; want %q\n%s", r.Status, texts, want, logs)
	}
	if !strings.Contains(logs.String(), "LLM demos registered") || !strings.Contains(logs.String(), "local test model at http://127.0.0.1:") {
		t.Fatalf("log lacks the LLM demos line:\n%s", logs)
	}
}

// TestServe_NoModelServer: without a model server the LLM demos are not
// hosted, and the log says why, once.
func TestServe_NoModelServer(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	base, logs := serveInProcess(t)
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	if ids := modelIDs(t, client, base); strings.Contains(ids, "demo.writer-reviewer") || !strings.Contains(ids, "demo.echo") {
		t.Fatalf("models %s", ids)
	}
	if n := strings.Count(logs.String(), "LLM demos not registered"); n != 1 {
		t.Fatalf("%d log lines about the LLM demos, want 1:\n%s", n, logs)
	}
}

func TestParseServeFlags_Limits(t *testing.T) {
	c, err := parseServeFlags(nil, io.Discard)
	if err != nil || c.maxStreams != responses.MaxStreamsDefault || c.maxStreamsPerKey != responses.MaxStreamsPerKeyDefault ||
		c.storeTimeout != responses.StoreTimeoutDefault {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	c, err = parseServeFlags([]string{"--max-streams", "0", "--max-streams-per-key", "7", "--store-timeout", "3s"}, io.Discard)
	if err != nil || c.maxStreams != 0 || c.maxStreamsPerKey != 7 || c.storeTimeout != 3*time.Second {
		t.Fatalf("flags: %+v, %v", c, err)
	}
	if c.maxConns != maxConnsDefault || c.bodyTimeout != responses.BodyTimeoutDefault {
		t.Fatalf("defaults: conns %d, body timeout %v", c.maxConns, c.bodyTimeout)
	}
	if c, err = parseServeFlags([]string{"--max-conns", "9", "--body-timeout", "5s"}, io.Discard); err != nil || c.maxConns != 9 || c.bodyTimeout != 5*time.Second {
		t.Fatalf("flags: %+v, %v", c, err)
	}
	if noLimit(0) >= 0 || noLimit(7) != 7 {
		t.Fatalf("noLimit(0) = %d, noLimit(7) = %d", noLimit(0), noLimit(7))
	}
	for _, args := range [][]string{{"--max-streams", "-1"}, {"--max-streams-per-key", "-2"}, {"--store-timeout", "0s"}, {"--max-conns", "0"}, {"--body-timeout", "0s"}, {"--max-input-items", "0"}} {
		if _, err := parseServeFlags(args, io.Discard); err == nil {
			t.Fatalf("%q: no error", args)
		}
	}
}

// dialHealthz opens a TCP connection to base's server and sends GET
// /healthz on it (keep-alive); it returns the connection and its reader.
func dialHealthz(t *testing.T, base string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	return conn, bufio.NewReader(conn)
}

// readStatus reads one reply from br within d and returns its status.
func readStatus(conn net.Conn, br *bufio.Reader, d time.Duration) (int, error) {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestServe_ConnectionCap: with --max-conns 2 and two connections open,
// a third is not served until one of them closes; then it is. (Before,
// connections were not capped: 1,000 slow clients held 1,000.)
func TestServe_ConnectionCap(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	base, _ := serveInProcess(t, "--max-conns", "2")
	c1, r1 := dialHealthz(t, base)
	c2, r2 := dialHealthz(t, base)
	for i, c := range []struct {
		conn net.Conn
		br   *bufio.Reader
	}{{c1, r1}, {c2, r2}} {
		if status, err := readStatus(c.conn, c.br, 30*time.Second); status != 200 {
			t.Fatalf("connection %d: %d, %v", i+1, status, err)
		}
	}
	c3, r3 := dialHealthz(t, base) // the kernel accepts it into the backlog
	if status, err := readStatus(c3, r3, 500*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a third connection past --max-conns 2 was served: %d, %v", status, err)
	}
	c1.Close()
	if status, err := readStatus(c3, r3, 30*time.Second); status != 200 {
		t.Fatalf("the third connection after one closed: %d, %v", status, err)
	}
}

// TestServe_BodyTimeout: a request body trickled slower than
// --body-timeout gets a 408 and its connection closed, through the real
// server. (Before, it was held for as long as the client kept sending.)
func TestServe_BodyTimeout(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	base, _ := serveInProcess(t, "--body-timeout", "200ms")
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /v1/responses HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	wg.Go(func() { // a byte every 20 ms, until the server hangs up
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	})
	br := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no reply to a trickled body: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close || !strings.Contains(string(body), `"code":"request_timeout"`) {
		t.Fatalf("reply %d (close %v) %s; want 408 request_timeout and Connection: close", resp.StatusCode, resp.Close, body)
	}
	if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection still open after the 408: %v", err)
	}
}

// TestLoadKeys: --admin-keys alone turns keys on; a key may not be both an
// API key and an admin key.
func TestLoadKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	api, admin, both := write("api", "ka alice\n"), write("admin", "kadm ops\n"), write("both", "ka ops\n")
	keys, adminKeys, err := loadKeys(&serveConfig{apiKeys: api, adminKeys: admin})
	if err != nil || keys["ka"] != "alice" || adminKeys["kadm"] != "ops" || len(keys) != 1 {
		t.Fatalf("keys %v, admin %v, %v", keys, adminKeys, err)
	}
	if keys, adminKeys, err = loadKeys(&serveConfig{adminKeys: admin}); err != nil || keys != nil || len(adminKeys) != 1 {
		t.Fatalf("admin keys alone: %v %v %v", keys, adminKeys, err)
	}
	if _, _, err := loadKeys(&serveConfig{apiKeys: api, adminKeys: both}); err == nil {
		t.Fatal("a key in both files was accepted")
	}
	if _, _, err := loadKeys(&serveConfig{adminKeys: filepath.Join(dir, "missing")}); err == nil {
		t.Fatal("a missing admin keys file was accepted")
	}
}

// --max-input-items reaches the handler: a create with more items than
// the cap is a 400 naming input, one at the cap is accepted.
func TestServe_MaxInputItems(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	base, _ := serveInProcess(t, "--max-input-items", "2")
	post := func(items int) (int, string) {
		var in []string
		for range items {
			in = append(in, `{"role":"user","content":"hi"}`)
		}
		body := `{"model":"demo.echo","input":[` + strings.Join(in, ",") + `]}`
		resp, err := http.Post(base+"/v1/responses", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(3); code != http.StatusBadRequest || !strings.Contains(body, `"param":"input"`) {
		t.Fatalf("3 items past a cap of 2: %d %s", code, body)
	}
	if code, body := post(2); code != http.StatusOK {
		t.Fatalf("2 items at a cap of 2: %d %s", code, body)
	}
}

// postJSON posts body to base's /v1/responses and decodes the reply.
func postJSON(t *testing.T, client *http.Client, base, body string) (int, map[string]any) {
	t.Helper()
	resp, err := client.Post(base+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return resp.StatusCode, r
}

// outputOf returns a Response's output items as "text" or
// "function_call name args call_id".
func outputOf(r map[string]any) []string {
	var out []string
	items, _ := r["output"].([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		switch m["type"] {
		case "message":
			for _, c := range m["content"].([]any) {
				out = append(out, c.(map[string]any)["text"].(string))
			}
		case "function_call":
			out = append(out, fmt.Sprintf("function_call %s %s %s", m["name"], m["arguments"], m["call_id"]))
		}
	}
	return out
}

// TestServe_ProxyModels: --proxy-models all hosts every model the model
// server lists (the local one lists local-echo) as a durable model under
// its own id: GET /v1/models lists it, a create gets the model's reply
// through it, a client tool goes to the model and its call back to the
// client, whose output continues the conversation.
func TestServe_ProxyModels(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	base, logs := serveInProcess(t, "--model-server", "local", "--proxy-models", "all")
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	if ids := modelIDs(t, client, base); !strings.Contains(ids, `"id":"`+localmodel.DefaultModel+`"`) {
		t.Fatalf("models %s lack %s\n%s", ids, localmodel.DefaultModel, logs)
	}
	code, r := postJSON(t, client, base, `{"model":"local-echo","input":"hello there","metadata":{"token_delay_ms":"0"}}`)
	if got := outputOf(r); code != 200 || r["status"] != "completed" || !slices.Equal(got, []string{"Echo: hello there"}) {
		t.Fatalf("create: %d %v %q\n%s", code, r["status"], got, logs)
	}
	tool := `{"type":"function","name":"lookup_order","parameters":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}}`
	code, r = postJSON(t, client, base, `{"model":"local-echo","input":"where is my order?","tools":[`+tool+`],
		"tool_choice":{"type":"function","name":"lookup_order"},"metadata":{"token_delay_ms":"0"}}`)
	got := outputOf(r)
	if code != 200 || r["status"] != "completed" || len(got) != 1 || !strings.HasPrefix(got[0], `function_call lookup_order {"id":"x"} `) {
		t.Fatalf("client tool: %d %v %q", code, r["status"], got)
	}
	callID := strings.Fields(got[0])[3]
	code, r = postJSON(t, client, base, fmt.Sprintf(`{"model":"local-echo","previous_response_id":%q,"tools":[%s],
		"input":[{"type":"function_call_output","call_id":%q,"output":"shipped"}],"metadata":{"token_delay_ms":"0"}}`, r["id"], tool, callID))
	if got := outputOf(r); code != 200 || r["status"] != "completed" || !slices.Equal(got, []string{"Tool lookup_order returned: shipped"}) {
		t.Fatalf("answer: %d %v %q", code, r["status"], got)
	}
	// A demo workflow refuses client tools: 400 naming the field.
	code, r = postJSON(t, client, base, `{"model":"demo.echo","input":"x","tools":[`+tool+`]}`)
	if e, _ := r["error"].(map[string]any); code != 400 || e["param"] != "tools" {
		t.Fatalf("tools for a workflow: %d %v", code, r)
	}
}

// --proxy-models ids are registered as given; a malformed list, one
// without a model server, or an id a demo has are refused.
func TestServe_ProxyModelsFlag(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	for _, args := range [][]string{{"--proxy-models", "a"}, {"--model-server", "local", "--proxy-models", "a,,b"},
		{"--model-server", "local", "--proxy-models", "a,a"}, {"--model-server", "local", "--proxy-models", "all,a"}} {
		if _, err := parseServeFlags(args, io.Discard); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	base, _ := serveInProcess(t, "--model-server", "local", "--proxy-models", "gpt-x, llama-y")
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	if ids := modelIDs(t, client, base); !strings.Contains(ids, `"id":"gpt-x"`) || !strings.Contains(ids, `"id":"llama-y"`) {
		t.Fatalf("models %s", ids)
	}
	err := run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "s.db"),
		"--model-server", "local", "--proxy-models", "demo.echo"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "demo.echo") {
		t.Fatalf("a proxied id clashing with a demo: %v", err)
	}
}

// TestServe_LocalFollowTools: with --local-follow-tools a proxied local
// model offered a tool calls it for a question that does not name it (as a
// conformance suite's tool test expects of a real model); without the flag
// it answers in text. The flag needs the local model.
func TestServe_LocalFollowTools(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	if _, err := parseServeFlags([]string{"--local-follow-tools"}, io.Discard); err == nil {
		t.Error("--local-follow-tools without --model-server local: no error")
	}
	req := `{"model":"gpt-x","input":"What's the weather like in San Francisco?","tools":[{"type":"function","name":"get_weather",
		"parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}],"metadata":{"token_delay_ms":"0"}}`
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, follow := range []bool{false, true} {
		args := []string{"--model-server", "local", "--proxy-models", "gpt-x"}
		if follow {
			args = append(args, "--local-follow-tools")
		}
		base, logs := serveInProcess(t, args...)
		code, r := postJSON(t, client, base, req)
		got := outputOf(r)
		called := len(got) == 1 && strings.HasPrefix(got[0], `function_call get_weather {"location":"x"} `)
		if code != 200 || r["status"] != "completed" || called != follow {
			t.Errorf("follow %v: %d %v %q\n%s", follow, code, r["status"], got, logs)
		}
	}
}
