package host_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/internal/testkit/pgtest"
	"github.com/superstep/superstep/localmodel"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/workflow"
)

// benchWrites counts a store's writes of a live turn: live appends,
// journal appends, commits. With batch off it hides the store's
// store.JournalBatcher, so the host appends every journal entry alone.
type benchWrites struct {
	store.Store
	j                        store.Journal
	batch                    bool
	appends, journal, commit atomic.Int64
}

func (w *benchWrites) EventAppend(ctx context.Context, p *store.EventAppendParams) error {
	w.appends.Add(1)
	return w.Store.EventAppend(ctx, p)
}

func (w *benchWrites) Commit(ctx context.Context, p *store.CommitParams) (*store.CommitResult, error) {
	w.commit.Add(1)
	return w.Store.Commit(ctx, p)
}

func (w *benchWrites) JournalAppend(ctx context.Context, p *store.JournalAppendParams) error {
	w.journal.Add(1)
	return w.j.JournalAppend(ctx, p)
}

func (w *benchWrites) JournalList(ctx context.Context, runID string, step int64) ([]store.JournalEntry, error) {
	return w.j.JournalList(ctx, runID, step)
}

func (w *benchWrites) AppendsJournal() bool { return w.batch }

// BenchmarkHost_JournalTurnLive is BenchmarkHost_JournalTurn in live mode
// on SQLite (synchronous=FULL) and PostgreSQL: an agent turn of 4 model calls and 3 tool
// calls, streamed, with the journal; its entries ride with queued live
// appends (batch=on, store.JournalBatcher) or are appended alone
// (batch=off). It reports the store writes per turn by kind.
func BenchmarkHost_JournalTurnLive(b *testing.B) {
	srv, err := localmodel.Start("127.0.0.1:0", &localmodel.Options{TokenDelay: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	})
	for _, tc := range []struct {
		name            string
		postgres, batch bool
	}{{"sqlite/batch=on", false, true}, {"sqlite/batch=off", false, false},
		{"postgres/batch=on", true, true}, {"postgres/batch=off", true, false}} {
		b.Run(tc.name, func(b *testing.B) {
			var s store.Store
			var err error
			if tc.postgres {
				s, err = postgres.Open(context.Background(), pgtest.URL(), &postgres.Options{Schema: pgtest.Schema(b, "hostbench")})
			} else {
				s, err = sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), nil)
			}
			if err != nil {
				b.Fatal(err)
			}
			w := &benchWrites{Store: s, j: s.(store.Journal), batch: tc.batch}
			h, err := host.New(w, &host.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			calc := agent.MustTool("calculate", "computes", func(ctx context.Context, in struct {
				A float64 `json:"a"`
			}) (string, error) {
				return "42", nil
			})
			a, err := agent.NewChatAgent(&agent.Options{Name: "assistant", BaseURL: srv.URL, APIKey: "test", Model: "local",
				Tools: []*agent.Tool{calc}, Metadata: map[string]string{"tool_calls": "3"}})
			if err != nil {
				b.Fatal(err)
			}
			assistant := agent.Executor("assistant", a)
			wf, err := workflow.NewBuilder("bench.tools").SetStart(assistant).Outputs(assistant).Build()
			if err != nil {
				b.Fatal(err)
			}
			if err := h.RegisterWorkflow("bench.tools", wf, host.WithPublication(host.PublicationLive)); err != nil {
				b.Fatal(err)
			}
			if err := h.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = h.Shutdown(ctx)
				_ = s.Close()
			})
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				r, err := h.Create(context.Background(), &host.CreateParams{Model: "bench.tools", Store: true,
					Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: `calculate {"a":1}`}}})
				if err != nil {
					b.Fatal(err)
				}
				res, err := h.Wait(context.Background(), r.ID, "")
				if err != nil {
					b.Fatal(err)
				}
				if res.Status != "completed" {
					b.Fatalf("response %s: %s", r.ID, res.Status)
				}
			}
			n := float64(b.N)
			b.ReportMetric(float64(w.appends.Load())/n, "appends/op")
			b.ReportMetric(float64(w.journal.Load())/n, "journal-writes/op")
			b.ReportMetric(float64(w.commit.Load())/n, "commits/op")
		})
	}
}
