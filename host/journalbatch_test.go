package host_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/workflow"
)

// writeCounter counts a store's live appends and journal writes. With
// batch it says it appends journal entries with events (the SQLite store
// under it does), and holds each live append that carries no journal entry
// until the host queued a journal entry behind it (or the turn ended): so
// the frames emitted after it are still queued when the next call
// finishes, whatever the machine's speed.
type writeCounter struct {
	store.Store
	j      store.Journal
	batch  bool
	queued func() <-chan int64 // the host's JournalQueued, once it exists
	done   chan struct{}       // closed when the executor ran its last step

	appends, journalWrites, batchedEntries atomic.Int64
	durableEntries                         atomic.Int64 // journal entries whose write returned
	mu                                     sync.Mutex
	arrived                                int
	arrivedCond                            *sync.Cond
}

func (c *writeCounter) EventAppend(ctx context.Context, p *store.EventAppendParams) error {
	c.appends.Add(1)
	c.batchedEntries.Add(int64(len(p.Journal)))
	c.mu.Lock()
	c.arrived++
	c.arrivedCond.Broadcast()
	c.mu.Unlock()
	if c.batch && len(p.Journal) == 0 {
		select {
		case <-c.queued():
		case <-c.done:
		case <-ctx.Done():
		case <-time.After(5 * time.Second): // no entry came: a host that does not batch, failing below
		}
	}
	err := c.Store.EventAppend(ctx, p)
	if err == nil {
		c.durableEntries.Add(int64(len(p.Journal)))
	}
	return err
}

// waitArrived waits until n live appends reached the store (at most 5 s:
// a host that does not batch coalesces differently and fails the counts).
func (c *writeCounter) waitArrived(n int) {
	stop := time.AfterFunc(5*time.Second, func() {
		c.mu.Lock()
		c.arrived = max(c.arrived, n)
		c.arrivedCond.Broadcast()
		c.mu.Unlock()
	})
	defer stop.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.arrived < n {
		c.arrivedCond.Wait()
	}
}

func (c *writeCounter) JournalAppend(ctx context.Context, p *store.JournalAppendParams) error {
	c.journalWrites.Add(1)
	err := c.j.JournalAppend(ctx, p)
	if err == nil {
		c.durableEntries.Add(int64(len(p.Entries)))
	}
	return err
}

func (c *writeCounter) JournalList(ctx context.Context, runID string, step int64) ([]store.JournalEntry, error) {
	return c.j.JournalList(ctx, runID, step)
}

func (c *writeCounter) AppendsJournal() bool { return c.batch }

// TestHost_JournalBatch_LiveTurn: a live executor streams and finishes n
// journaled steps (workflow.RunStep; model and tool calls take the same
// path), each after two tokens. On a store that appends journal entries
// with live events, each step's entry goes with the frames queued when it
// finishes: n journal entries, no journal write of their own, every entry
// durable (the executor went on only after its batch returned). Without
// that capability the same turn makes one journal write per step. SQLite
// and PostgreSQL.
func TestHost_JournalBatch_LiveTurn(t *testing.T) {
	t.Parallel()
	const n = 4
	for _, tc := range []struct {
		backend string
		batch   bool
	}{{"sqlite", true}, {"sqlite", false}, {"postgres", true}, {"postgres", false}} {
		batch := tc.batch
		t.Run(fmt.Sprintf("%s/batch=%v", tc.backend, batch), func(t *testing.T) {
			t.Parallel()
			var raw store.Store
			if tc.backend == "sqlite" {
				raw = openStore(t, filepath.Join(t.TempDir(), "h.db"))
			} else {
				raw = openPG(t, pgSchema(t))
			}
			defer raw.Close()
			c := &writeCounter{Store: raw, j: raw.(store.Journal), batch: batch, done: make(chan struct{})}
			c.arrivedCond = sync.NewCond(&c.mu)
			var h *host.Host
			c.queued = func() <-chan int64 { return h.JournalQueued() }
			var durable []int // journal entries durable when each step returned
			register := func(t *testing.T, h *host.Host) {
				w := workflow.Func("writer", func(wc *workflow.Context, _ string) error {
					var text strings.Builder
					for i := range n {
						for k, tok := range []string{fmt.Sprintf("s%da ", i), fmt.Sprintf("s%db ", i)} {
							if err := wc.EmitLive(tok); err != nil {
								return err
							}
							text.WriteString(tok)
							if batch && k == 0 {
								// The first token's append is at the store
								// (held there): the second stays queued.
								c.waitArrived(2*i + 1)
							}
						}
						if _, err := workflow.RunStep(wc.Context(), fmt.Sprintf("step%d", i), func(context.Context) (int, error) { return i, nil }); err != nil {
							return err
						}
						durable = append(durable, int(c.durableEntries.Load()))
					}
					close(c.done)
					return wc.Yield(text.String())
				})
				wf, err := workflow.NewBuilder("steps").SetStart(w).Outputs(w).Build()
				if err != nil {
					t.Fatal(err)
				}
				if err := h.RegisterWorkflow("steps", wf, host.WithPublication(host.PublicationLive)); err != nil {
					t.Fatal(err)
				}
			}
			cfg := host.Config{HostID: "h1", CommitBackoff: time.Millisecond}
			h = newHost(t, c, &cfg, register)
			defer shutdown(t, h)
			r := create(t, h, "steps", "go", nil)
			if got := wait(t, h, r.ID); got.Status != store.StatusCompleted {
				t.Fatalf("status %s", got.Status)
			}
			checkLog(t, collect(t, h, r.ID, -1))
			for i, d := range durable {
				if d != i+1 {
					t.Fatalf("journal entries durable as each step returned %v, want 1 to %d", durable, n)
				}
			}
			appends, journal, batched := c.appends.Load(), c.journalWrites.Load(), c.batchedEntries.Load()
			t.Logf("batch=%v: %d live appends (%d journal entries with them), %d journal writes", batch, appends, batched, journal)
			if batch && (journal != 0 || batched != n || appends != 2*n) {
				t.Fatalf("%d live appends carrying %d journal entries, %d journal writes; want %d appends carrying all %d entries, no journal write",
					appends, batched, journal, 2*n, n)
			}
			if !batch && (journal != n || batched != 0) {
				t.Fatalf("%d journal writes, %d entries with live appends; want %d writes", journal, batched, n)
			}
		})
	}
}
