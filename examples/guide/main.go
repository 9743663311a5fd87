// Command guide hosts the workflow of docs/guide.md behind the OpenAI
// Responses API.
package main

import (
	"cmp"
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/serve"
	"github.com/superstep/superstep/workflow"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := serve.Run(ctx, &serve.Config{
		Addr:        os.Getenv("ADDR"),                          // default 127.0.0.1:8080
		DB:          cmp.Or(os.Getenv("DB"), "guide.db"),        // or postgres://user@host/db
		ModelServer: cmp.Or(os.Getenv("MODEL_SERVER"), "local"), // or https://api.openai.com/v1
		Workflows: func(model agent.Options) ([]*workflow.Workflow, error) {
			wf, err := NewWorkflow(model)
			return []*workflow.Workflow{wf}, err
		},
	})
	if err != nil {
		log.Fatal(err)
	}
}
