package serve_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/serve"
	"github.com/superstep/superstep/workflow"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func echoWorkflows(agent.Options) ([]*workflow.Workflow, error) {
	ex := workflow.Func("echo", func(c *workflow.Context, in string) error { return c.Yield(in) })
	wf, err := workflow.NewBuilder("echo").SetStart(ex).Outputs(ex).Build()
	return []*workflow.Workflow{wf}, err
}

// TestRun_ErrorClasses: each failure before serving is of its class (the
// command's exit codes hang on them), and none leaves a store behind when
// the configuration is refused.
func TestRun_ErrorClasses(t *testing.T) {
	dir := t.TempDir()
	notDB := filepath.Join(dir, "not-a-db")
	if err := os.WriteFile(notDB, []byte("this is not a database file, not at all, no"), 0o600); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	failing := func(agent.Options) ([]*workflow.Workflow, error) { return nil, errors.New("no graph") }
	for _, c := range []struct {
		name  string
		cfg   serve.Config
		class error
	}{
		{"NothingToServe", serve.Config{}, serve.ErrConfig},
		{"BadModelServer", serve.Config{Workflows: echoWorkflows, ModelServer: "ftp://models.example"}, serve.ErrConfig},
		{"FollowToolsNotLocal", serve.Config{Workflows: echoWorkflows, LocalFollowTools: true}, serve.ErrConfig},
		{"KeyTwice", serve.Config{Workflows: echoWorkflows, APIKeys: map[string]string{"k": "a"}, AdminKeys: map[string]string{"k": "b"}}, serve.ErrConfig},
		{"WorkflowsFail", serve.Config{Workflows: failing}, serve.ErrConfig},
		{"NotADatabase", serve.Config{Workflows: echoWorkflows, DB: notDB}, serve.ErrStore},
		{"AddressTaken", serve.Config{Workflows: echoWorkflows, Addr: busy.Addr().String()}, serve.ErrListen},
	} {
		cfg := c.cfg
		cfg.Logger = quiet()
		if cfg.DB == "" {
			cfg.DB = filepath.Join(dir, c.name+".db")
		}
		if cfg.Addr == "" {
			cfg.Addr = "127.0.0.1:0"
		}
		cfg.Listening = func(net.Addr) { t.Errorf("%s: listening", c.name) }
		err := serve.Run(context.Background(), &cfg)
		for _, other := range []error{serve.ErrConfig, serve.ErrStore, serve.ErrListen, serve.ErrUnclean} {
			if errors.Is(err, other) != (other == c.class) {
				t.Errorf("%s: %v; errors.Is(%v) = %v", c.name, err, other, errors.Is(err, other))
			}
		}
		if c.class == serve.ErrConfig && c.name != "WorkflowsFail" {
			if _, statErr := os.Stat(cfg.DB); !errors.Is(statErr, os.ErrNotExist) {
				t.Errorf("%s: refused configuration created %s (%v)", c.name, cfg.DB, statErr)
			}
		}
	}
}
