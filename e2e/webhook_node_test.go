package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/store/storetest"
	"github.com/superstep/superstep/webhook"
)

// TestNodeWebhook: a webhook the sender posts to a node endpoint
// (e2e/node/webhook-receiver.mjs) passes the node:crypto check of
// docs/observability.md and the openai npm package's webhooks.unwrap.
// Like TestNodeClient it needs `npm ci --prefix e2e/node` (it fails in CI
// without it and skips otherwise).
func TestNodeWebhook(t *testing.T) {
	t.Parallel()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "node")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node webhook test cannot run (%v): install with `npm ci --prefix e2e/node`", err)
		}
		t.Skipf("node webhook test skipped (%v): run `npm ci --prefix e2e/node` to enable it", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	secret := webhook.NewSecret()
	cmd := exec.CommandContext(ctx, node, "webhook-receiver.mjs")
	cmd.Dir, cmd.Env, cmd.Stderr = dir, append(os.Environ(), "SUPERSTEP_WEBHOOK_SECRET="+secret), &strings.Builder{}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	port, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("receiver: %q, %v\n%s", line, err, cmd.Stderr)
	}

	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := storetest.CreateResponse(ctx, t, s, nil)
	p := storetest.NextCommit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{Status: store.StatusCompleted})
	p.Webhooks = []store.WebhookInput{{EventID: "evt_node", Type: protocol.WebhookCompleted, Endpoint: "http://127.0.0.1:" + port + "/hook"}}
	if _, err := s.Commit(ctx, p); err != nil {
		t.Fatal(err)
	}
	sec, _ := webhook.ParseSecret(secret)
	snd, err := webhook.New(s, &webhook.Options{Secret: sec, Owner: "node-test", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer snd.Close()

	rest, _ := io.ReadAll(out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("receiver: %v\n%s%s", err, rest, cmd.Stderr)
	}
	var ev protocol.WebhookEvent
	if err := json.Unmarshal(rest, &ev); err != nil || ev.ID != "evt_node" || ev.Type != protocol.WebhookCompleted || ev.Data.ID != c.Response.ID {
		t.Fatalf("receiver printed %s (%v), want the event of %s", rest, err, c.Response.ID)
	}
}
