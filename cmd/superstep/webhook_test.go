package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/webhook"
)

func TestParseServeFlags_Webhooks(t *testing.T) {
	t.Setenv("SUPERSTEP_WEBHOOK_URL", "")
	t.Setenv("SUPERSTEP_WEBHOOK_SECRET", "")
	c, err := parseServeFlags(nil, io.Discard)
	if err != nil || len(c.webhook.urls) != 0 || c.webhook.secret != nil || c.webhook.retryFor != webhook.RetryForDefault {
		t.Fatalf("defaults: %+v, %v", c.webhook, err)
	}
	secret := webhook.NewSecret()
	t.Setenv("SUPERSTEP_WEBHOOK_URL", "http://a.test/hook, https://b.test/hook")
	t.Setenv("SUPERSTEP_WEBHOOK_SECRET", secret)
	if c, err = parseServeFlags(nil, io.Discard); err != nil || strings.Join(c.webhook.urls, " ") != "http://a.test/hook https://b.test/hook" || c.webhook.secret == nil {
		t.Fatalf("from the environment: %+v, %v", c.webhook, err)
	}
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(webhook.NewSecret()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = parseServeFlags([]string{"--webhook-url", "http://c.test/1", "--webhook-url", "http://c.test/2",
		"--webhook-secret-file", file, "--webhook-retry-for", "1h"}, io.Discard)
	if err != nil || strings.Join(c.webhook.urls, " ") != "http://c.test/1 http://c.test/2" || c.webhook.secret == nil || c.webhook.retryFor != time.Hour {
		t.Fatalf("flags over the environment: %+v, %v", c.webhook, err)
	}
	t.Setenv("SUPERSTEP_WEBHOOK_SECRET", "")
	for _, args := range [][]string{
		{"--webhook-url", "http://a.test/hook"}, // no secret
		{"--webhook-url", "ftp://a.test/hook", "--webhook-secret-file", file},
		{"--webhook-url", "not a url", "--webhook-secret-file", file},
		{"--webhook-secret-file", filepath.Join(t.TempDir(), "missing")},
		{"--webhook-secret-file", file, "--webhook-retry-for", "0s"},
		{"--webhook-secret-file", file, "--webhook-timeout", "-1s"},
	} {
		if _, err := parseServeFlags(args, io.Discard); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	t.Setenv("SUPERSTEP_WEBHOOK_SECRET", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") // without whsec_
	if _, err := parseServeFlags([]string{"--webhook-url", "http://a.test/hook"}, io.Discard); err == nil || !strings.Contains(err.Error(), "SUPERSTEP_WEBHOOK_SECRET") {
		t.Fatalf("a secret without its prefix: %v", err)
	}
}

// TestServe_Webhooks: serve with --webhook-url posts a finished response's
// event, signed with the secret, and `superstep check` reports the outbox.
func TestServe_Webhooks(t *testing.T) {
	t.Setenv("SUPERSTEP_WEBHOOK_URL", "")
	t.Setenv("SUPERSTEP_WEBHOOK_SECRET", "")
	secret := webhook.NewSecret()
	v, err := webhook.NewVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	// OpenAI's own Go SDK reads our webhooks as it reads OpenAI's.
	oc := openai.NewClient(option.WithAPIKey("unused"), option.WithWebhookSecret(secret))
	got := make(chan protocol.WebhookEvent, 10)
	sdk := make(chan string, 10)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := v.Verify(r.Header, body); err != nil {
			t.Errorf("receiver: %v", err)
		}
		if ev, err := oc.Webhooks.Unwrap(body, r.Header); err != nil {
			t.Errorf("receiver: openai-go Unwrap: %v", err)
		} else {
			sdk <- ev.Type + " " + ev.AsResponseCompleted().Data.ID
		}
		var ev protocol.WebhookEvent
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("receiver: %v", err)
		}
		got <- ev
	}))
	defer rcv.Close()
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "hooks.db")
	base, logs := serveInProcess(t, "--db", db, "--webhook-url", rcv.URL, "--webhook-secret-file", file)
	resp, err := http.Post(base+"/v1/responses", "application/json", strings.NewReader(`{"model":"demo.echo","input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	var r struct{ ID, Status string }
	err = json.NewDecoder(resp.Body).Decode(&r)
	resp.Body.Close()
	if err != nil || r.Status != "completed" {
		t.Fatalf("create: %+v %v", r, err)
	}
	select {
	case ev := <-got:
		if ev.Type != protocol.WebhookCompleted || ev.Data.ID != r.ID || ev.Object != "event" {
			t.Fatalf("event %+v, want response.completed of %s", ev, r.ID)
		}
		if s := <-sdk; s != "response.completed "+r.ID {
			t.Fatalf("openai-go read %q, want response.completed of %s", s, r.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no webhook\n%s", logs)
	}
	var out strings.Builder
	for deadline := time.Now().Add(10 * time.Second); ; {
		out.Reset()
		if err := run(context.Background(), []string{"check", db}, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), "webhooks: 0 pending, 1 delivered, 0 failed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("check output:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond) // the sender reports after the receiver answered: no signal here
	}
}
