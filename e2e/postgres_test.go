package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// postgresDB creates a database of its own for t (dropped at cleanup) and
// returns its URL. Unreachable PostgreSQL fails the test when CI is set
// and skips it otherwise.
func postgresDB(t *testing.T) string {
	t.Helper()
	admin := os.Getenv("SUPERSTEP_TEST_POSTGRES")
	if admin == "" {
		admin = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL at %s unreachable in CI: %v", admin, err)
		}
		t.Skipf("PostgreSQL at %s unreachable (set SUPERSTEP_TEST_POSTGRES): %v", admin, err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("superstep_e2e_%d_%d", os.Getpid(), time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// TestBinary_Postgres serves from PostgreSQL (--db postgres://...):
// streaming, a background run with polling, then `superstep check` on the
// database after a graceful stop.
func TestBinary_Postgres(t *testing.T) {
	t.Parallel()
	db := postgresDB(t)
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
