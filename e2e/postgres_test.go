package e2e

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/superstep/superstep/internal/testkit/pgtest"
)

// TestBinary_Postgres serves from PostgreSQL (--db postgres://...):
// streaming, a background run with polling, then `superstep check` on the
// database after a graceful stop.
func TestBinary_Postgres(t *testing.T) {
	t.Parallel()
	db := pgtest.Database(t, "superstep_e2e")
	p := startServer(t, nil, "--db", db)
	c := p.client("k")
	ctx := context.Background()
	s := drain(c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "demo.two-outputs", Input: textInput("x")}), nil)
	requireLifecycle(t, s, "response.completed")
	if got := streamTexts(s); strings.Join(got, ",") != "first-2,second-2,done" {
		t.Fatalf("streamed %q", got)
	}
	bg, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo.silent", Input: textInput("go"),
		Background: openai.Bool(true), Metadata: shared.Metadata{"steps": "3"}})
	if err != nil {
		t.Fatal(err)
	}
	if final := pollTerminal(t, c, bg.ID); final.OutputText() != "done after 3" {
		t.Fatalf("background output %q", final.OutputText())
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, p.stderr)
	}
	out, err := exec.Command(superstepBinary(t), "check", db).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok") {
		t.Fatalf("superstep check: %v\n%s", err, out)
	}
}
