package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/localmodel"
)

// nodeTests are the node:test files of e2e/node, and nodePackages the npm
// packages they import (each must be installed in e2e/node/node_modules).
var (
	nodeTests    = []string{"responses.test.mjs", "ai-sdk.test.mjs", "langchain.test.mjs", "conversations.test.mjs", "openresponses.test.mjs"}
	nodePackages = []string{"openai", "ai", "@ai-sdk/openai", "@langchain/openai", "@langchain/core"}
)

// chatModel is the plain conversation agent the node tests talk to: a
// ChatAgent on the local model server (it echoes the last user message;
// usage counts the tokens of every message it was sent) with an add tool.
const chatModel = "chat.local"

// specModel is what openresponses.test.mjs sends the OpenResponses suite's
// requests to: a proxied model (examples.ProxyAgent, no tools of its own)
// on a local model server that follows the tools a request offers.
const specModel = "spec.local"

// TestNodeClient runs e2e/node (node:test with the openai npm package, the
// Vercel AI SDK and LangChain JS) against a real in-process server hosting
// the demos, the LLM demos and chatModel on the local model server.
// node_modules must have been installed (`npm ci --prefix e2e/node`): with
// CI set its absence fails the test, otherwise the test skips and says how
// to install it.
func TestNodeClient(t *testing.T) {
	t.Parallel()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "node")
	node, err := exec.LookPath("node")
	for _, pkg := range nodePackages {
		if err == nil {
			_, err = os.Stat(filepath.Join(dir, "node_modules", filepath.FromSlash(pkg), "package.json"))
		}
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node test cannot run (%v): install with `npm ci --prefix e2e/node`", err)
		}
		t.Skipf("node test skipped (%v): run `npm ci --prefix e2e/node` to enable it", err)
	}
	e := newNodeEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"--test", "--test-reporter=spec"}, nodeTests...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SUPERSTEP_BASE_URL="+e.srv.URL+"/v1", "SUPERSTEP_API_KEY=test",
		"SUPERSTEP_CHAT_MODEL="+chatModel, "SUPERSTEP_SPEC_MODEL="+specModel)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("node --test failed: %v", err)
	}
}

// newNodeEnv is newEnv with the LLM demos and chatModel, on a local model
// server of the test's own.
func newNodeEnv(t *testing.T) *env {
	t.Helper()
	ms, err := localmodel.Start("127.0.0.1:0", &localmodel.Options{TokenDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the env's close: the host no longer calls it
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ms.Close(ctx); err != nil {
			t.Errorf("local model server: %v", err)
		}
	})
	follow, err := localmodel.Start("127.0.0.1:0", &localmodel.Options{TokenDelay: time.Millisecond, FollowTools: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := follow.Close(ctx); err != nil {
			t.Errorf("local model server: %v", err)
		}
	})
	retry := agent.RetryPolicy{Retries: 1, Backoff: 10 * time.Millisecond}
	return newEnv(t, &envOpts{Register: func(h *host.Host) error {
		err := examples.RegisterLLM(h, &examples.LLMOptions{BaseURL: ms.URL, APIKey: "local", Model: "e2e-model", Retry: retry})
		if err != nil {
			return err
		}
		add := agent.MustTool("add", "Adds a and b.", func(_ context.Context, in struct {
			A int `json:"a"`
			B int `json:"b"`
		}) (int, error) {
			return in.A + in.B, nil
		})
		chat, err := agent.NewChatAgent(&agent.Options{Name: "assistant", BaseURL: ms.URL, APIKey: "local", Model: "e2e-model",
			Instructions: "You are a helpful assistant.", Tools: []*agent.Tool{add}, Retry: retry})
		if err != nil {
			return err
		}
		if err := h.RegisterAgent("history", historyAgent); err != nil { // conversations.test.mjs
			return err
		}
		err = examples.RegisterProxies(h, &examples.LLMOptions{BaseURL: follow.URL, APIKey: "local", Retry: retry}, []string{specModel})
		if err != nil {
			return err
		}
		return h.RegisterAgent(chatModel, chat)
	}})
}
