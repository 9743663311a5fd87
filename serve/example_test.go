package serve_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/serve"
	"github.com/superstep/superstep/workflow"
)

// Example hosts a one-executor workflow on a free port and a SQLite file,
// asks it for a response over HTTP, and shuts down.
func Example() {
	dir, _ := os.MkdirTemp("", "serve-example")
	defer os.RemoveAll(dir)
	shout := workflow.Func("shout", func(c *workflow.Context, in string) error {
		return c.Yield(strings.ToUpper(in) + "!")
	})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve.Run(ctx, &serve.Config{
			Addr: "127.0.0.1:0",
			DB:   filepath.Join(dir, "example.db"),
			Workflows: func(agent.Options) ([]*workflow.Workflow, error) {
				wf, err := workflow.NewBuilder("shout").SetStart(shout).Outputs(shout).Build()
				return []*workflow.Workflow{wf}, err
			},
			Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
			Listening: func(a net.Addr) { addr <- a },
		})
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a.String()
	case err := <-done:
		fmt.Println(err)
		return
	}
	resp, err := http.Post(base+"/v1/responses", "application/json", strings.NewReader(`{"model":"shout","input":"hello"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, strings.Contains(string(body), `"text":"HELLO!"`))
	stop()
	fmt.Println("shut down:", <-done)
	// Output:
	// 200 true
	// shut down: <nil>
}
