package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/workflow"
)

// secrets are what the failures below carry that no client may see: a
// database's user and name, and addresses.
var secrets = []string{"secretuser", "secretdb", "127.0.0.1", "10.9.8.7", "responses-secret.db"}

// failWith registers a one-executor workflow model whose executor returns
// err().
func failWith(t *testing.T, h *host.Host, model string, err func() error) {
	t.Helper()
	ex := workflow.Func("worker", func(c *workflow.Context, in string) error { return err() })
	wf, berr := workflow.NewBuilder(model).SetStart(ex).Build()
	if berr != nil {
		t.Fatal(berr)
	}
	if err := h.RegisterWorkflow(model, wf); err != nil {
		t.Fatal(err)
	}
}

// failedMessage runs model to its end and returns the message of the
// failed response's error, after checking that nothing of secrets is in
// its stored snapshot or in any event of its log.
func failedMessage(t *testing.T, h *host.Host, model string) string {
	t.Helper()
	r := create(t, h, model, "go", nil)
	final := wait(t, h, r.ID)
	var e struct{ Code, Message string }
	if final.Status != store.StatusFailed || json.Unmarshal(final.Error, &e) != nil || e.Code != "server_error" {
		t.Fatalf("%s: status %s, error %s", model, final.Status, final.Error)
	}
	shown := string(final.Snapshot)
	for _, ev := range collect(t, h, r.ID, -1) {
		if ev.Response != nil && ev.Response.Error != nil {
			shown += ev.Response.Error.Message
		}
	}
	for _, s := range secrets {
		if strings.Contains(shown, s) {
			t.Errorf("%s: a client sees %q: %s", model, s, e.Message)
		}
	}
	return e.Message
}

// TestHost_FailedResponseHidesInternals: a failed response's error says
// what failed without internals (issue 12 #21; before, a database cut's
// message named the database's user, name and address):
//   - an executor's own error keeps its message;
//   - an executor error wrapping a network error (here a real failed
//     PostgreSQL connect, whose text names user, database and address)
//     keeps the executor's words and says a server could not be reached;
//   - an executor or agent error carrying a store error says the storage
//     failed;
//   - a failure outside the workflow (a commit the store refused with an
//     error naming the database) says only that the run failed.
//
// On SQLite and PostgreSQL.
func TestHost_FailedResponseHidesInternals(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, db testDB) {
		ctx := testCtx(t)
		pgErr := func() error {
			conn, err := pgx.Connect(ctx, "postgres://secretuser:pw@127.0.0.1:1/secretdb?sslmode=disable&connect_timeout=5")
			if err == nil {
				conn.Close(ctx)
				return errors.New("connected to a closed port")
			}
			return fmt.Errorf("load invoice: %w", err)
		}
		closed, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "responses-secret.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		closed.Close()
		_, storeErr := closed.ResponseGet(ctx, "resp_x")
		if !errors.Is(storeErr, store.ErrClosed) {
			t.Fatalf("a closed store's error: %v", storeErr)
		}
		var failCommit atomic.Bool
		cfg := host.Config{CommitRetries: -1, Test: host.TestConfig{FaultFunc: func(_ context.Context, f *host.Fault) error {
			if f.Point == host.FaultCommitBefore && failCommit.CompareAndSwap(true, false) {
				return errors.New(`store/postgres: commit: failed to connect to "user=secretuser database=secretdb": 10.9.8.7:5432`)
			}
			return nil
		}}}
		st := db.open(t)
		t.Cleanup(func() { st.Close() })
		h := newHost(t, st, &cfg, func(t *testing.T, h *host.Host) {
			failWith(t, h, "own", func() error { return errors.New("the invoice has no total") })
			failWith(t, h, "network", pgErr)
			failWith(t, h, "store", func() error { return fmt.Errorf("save invoice: %w", storeErr) })
			failWith(t, h, "fine", func() error { return nil })
			err := h.RegisterAgent("agent-network", agent.AgentFunc(func(ctx context.Context, _ *agent.Session, _ []agent.Message) iter.Seq2[agent.Update, error] {
				return func(yield func(agent.Update, error) bool) {
					req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:1/v1/tools", nil)
					_, err := http.DefaultClient.Do(req)
					yield(agent.Update{}, fmt.Errorf("tool lookup: %w", err))
				}
			}))
			if err != nil {
				t.Fatal(err)
			}
		})
		t.Cleanup(func() { shutdown(t, h) })

		if got := failedMessage(t, h, "own"); !strings.Contains(got, `executor "worker": the invoice has no total`) {
			t.Errorf("own error: %q", got)
		}
		got := failedMessage(t, h, "network")
		if !strings.Contains(got, `executor "worker": load invoice: `) || !strings.Contains(got, "could not be reached") {
			t.Errorf("network error: %q", got)
		}
		if got := failedMessage(t, h, "store"); !strings.Contains(got, "storage failed") {
			t.Errorf("store error: %q", got)
		}
		if got := failedMessage(t, h, "agent-network"); !strings.HasPrefix(got, "tool lookup: ") || !strings.Contains(got, "could not be reached") {
			t.Errorf("agent's network error: %q", got)
		}
		failCommit.Store(true)
		if got := failedMessage(t, h, "fine"); !strings.Contains(got, "internal error") {
			t.Errorf("refused commit: %q", got)
		}
	})
}

// TestHost_FailedResponseHidesInternals_Timeout: a network timeout is
// named as one.
func TestHost_FailedResponseHidesInternals_Timeout(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0") // accepts into the backlog, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b := setup(t, &setupOpts{noReg: true})
	failWith(t, b.host, "slow", func() error {
		c := &http.Client{Timeout: 50 * time.Millisecond}
		_, err := c.Get("http://" + ln.Addr().String() + "/tool")
		return fmt.Errorf("call tool: %w", err)
	})
	if got := failedMessage(t, b.host, "slow"); !strings.Contains(got, "call tool: ") || !strings.Contains(got, "did not answer in time") {
		t.Errorf("timeout: %q", got)
	}
}
