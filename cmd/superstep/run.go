package main

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Exit codes, one per failure class.
const (
	exitOK         = 0
	exitInternal   = 1
	exitUsage      = 2
	exitStoreOpen  = 3
	exitCheck      = 4
	exitListen     = 5
	exitUnclean    = 6
	usageFirstLine = "usage: superstep <command> [flags]"
)

// exitError carries the exit code of a failure class.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// exitCode returns the process exit code for err.
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		return exitInternal
	}
	return exitOK
}

const usage = usageFirstLine + `

commands:
  serve   serve the Responses API (flags: superstep serve -h)
  check   verify a store's invariants: superstep check <db>
  hosts   list the live hosts of a running server and their runs (flags: superstep hosts -h)
  runs          list a server's runs (--status, --model, --limit, --after, --order)
  show          a run as a timeline: superstep show <response or run id>
  events        a response's events: superstep events <response id> [--from N] [--follow]
  checkpoints   a run's checkpoint history: superstep checkpoints <run id>
  fork          fork a run from a checkpoint: superstep fork <run id> --step N [--input ...]
  cancel        cancel a response: superstep cancel <response id>
                (these take --addr, --api-key and --json; env SUPERSTEP_ADDR, SUPERSTEP_API_KEY)
  help    print this text
`

// run executes the command line args (without the program name). It
// returns when the command is done or ctx ends (serve shuts down
// gracefully then).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return withCode(exitUsage, errors.New("no command given"))
	}
	switch args[0] {
	case "serve":
		return runServe(ctx, args[1:], stdout, stderr)
	case "check":
		return runCheck(ctx, args[1:], stdout, stderr)
	case "hosts":
		return runHosts(ctx, args[1:], stdout, stderr)
	case "runs", "show", "events", "checkpoints", "fork", "cancel":
		return inspectCommands[args[0]](ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return withCode(exitUsage, fmt.Errorf("unknown command %q", args[0]))
}
