// Command superstep serves durable agent workflows behind the OpenAI
// Responses API and inspects its stores.
//
//	superstep serve [--addr 127.0.0.1:8080] [--db superstep.db | --db postgres://...] [--api-keys FILE]
//	                [--model-server local | --model-server URL] [--openai-api-key KEY] [--model NAME]
//	superstep check <db>
//	superstep runs | show <id> | events <response id> | checkpoints <run id> | fork <run id> --step N | cancel <response id>
//	          [--addr 127.0.0.1:8080] [--api-key KEY] [--json]
//
// Exit codes: 0 ok, 1 internal failure, 2 usage, 3 store cannot be opened,
// 4 store check found a violation, 5 cannot listen, 6 shutdown did not
// finish within the grace period.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "superstep:", err)
		os.Exit(exitCode(err))
	}
}
