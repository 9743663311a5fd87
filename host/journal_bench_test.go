package host_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
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

// BenchmarkHost_JournalTurn measures what the journal inside the
// superstep costs: one response of an agent whose turn makes 4 model
// calls and 3 tool calls (chat/: one model call, no tool call;
// chat-blocking/: that, as a plain create the caller waits on;
// chat-blocking-live/: that, on a model whose default publication is live) (the local model server, real HTTP, no token
// delay) on SQLite with synchronous=FULL and on PostgreSQL, with the
// journal (7 call appends per response; a ChatAgent alone in its
// superstep journals no completion) and without (Config.NoJournal). The
// difference per call is the journal's cost.
func BenchmarkHost_JournalTurn(b *testing.B) {
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
		name     string
		off      bool
		postgres bool
		calls    int  // model and tool calls per turn
		blocking bool // CreateAndWait (a plain create without stream or background), not Create then Wait
		live     bool // the model's default publication is live, as --proxy-models'
	}{{"sqlite/journal=on", false, false, 7, false, false}, {"sqlite/journal=off", true, false, 7, false, false},
		{"postgres/journal=on", false, true, 7, false, false}, {"postgres/journal=off", true, true, 7, false, false},
		{"chat/sqlite/journal=on", false, false, 1, false, false}, {"chat/sqlite/journal=off", true, false, 1, false, false},
		{"chat/postgres/journal=on", false, true, 1, false, false}, {"chat/postgres/journal=off", true, true, 1, false, false},
		{"chat-blocking/sqlite/journal=on", false, false, 1, true, false}, {"chat-blocking/postgres/journal=on", false, true, 1, true, false},
		{"chat-blocking-live/sqlite/journal=on", false, false, 1, true, true},
		{"chat-blocking-live/postgres/journal=on", false, true, 1, true, true}} {
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
			h, err := host.New(s, &host.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), NoJournal: tc.off})
			if err != nil {
				b.Fatal(err)
			}
			calc := agent.MustTool("calculate", "computes", func(ctx context.Context, in struct {
				A float64 `json:"a"`
			}) (string, error) {
				return "42", nil
			})
			a, err := agent.NewChatAgent(&agent.Options{Name: "assistant", BaseURL: srv.URL, APIKey: "test", Model: "local",
				Tools: []*agent.Tool{calc}, Metadata: map[string]string{"tool_calls": strconv.Itoa((tc.calls - 1) / 2)}})
			if err != nil {
				b.Fatal(err)
			}
			assistantEx := agent.Executor("assistant", a)
			wf, err := workflow.NewBuilder("bench.tools").SetStart(assistantEx).Outputs(assistantEx).Build()
			if err != nil {
				b.Fatal(err)
			}
			var opts []host.ModelOption
			if tc.live {
				opts = append(opts, host.WithPublication(host.PublicationLive))
			}
			if err := h.RegisterWorkflow("bench.tools", wf, opts...); err != nil {
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
				p := &host.CreateParams{Model: "bench.tools", Store: true,
					Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: `calculate {"a":1}`}}}
				var res *store.Response
				if tc.blocking {
					res, err = h.CreateAndWait(context.Background(), p)
				} else {
					var r *store.Response
					if r, err = h.Create(context.Background(), p); err == nil {
						res, err = h.Wait(context.Background(), r.ID, "")
					}
				}
				if err != nil {
					b.Fatal(err)
				}
				if res.Status != "completed" {
					b.Fatalf("response %s: %s", res.ID, res.Status)
				}
			}
			b.ReportMetric(float64(tc.calls), "calls/op")
		})
	}
}
