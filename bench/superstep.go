package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/workflow"
)

// Model names under which the bench workflows are hosted.
const (
	modelW1 = "bench.w1"
	modelW2 = "bench.w2"
	modelW3 = "bench.w3"
	modelW4 = "bench.w4"
)

func modelOf(w workload) string {
	switch w {
	case w2FanOut:
		return modelW2
	case w3Events:
		return modelW3
	case w4Crash:
		return modelW4
	}
	return modelW1
}

// benchWorkflows builds the three workflow shapes on superstep's engine.
// Every executor calls hook (the crash child journals there).
func benchWorkflows(hook stepHook) (map[string]*workflow.Workflow, error) {
	w1, err1 := chainWorkflow(hook)
	w2, err2 := fanWorkflow(hook)
	w3, err3 := eventsWorkflow(hook)
	w4, err4 := crashWorkflow(hook)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, fmt.Errorf("bench: build workflows: %w", err)
	}
	return map[string]*workflow.Workflow{modelW1: w1, modelW2: w2, modelW3: w3, modelW4: w4}, nil
}

// stepHook is called by every executor with its run id and superstep;
// nil does nothing.
type stepHook func(ctx context.Context, runID string, step int64) error

func (h stepHook) call(c *workflow.Context) error {
	if h == nil {
		return nil
	}
	return h(c.Context(), c.RunID(), c.Step())
}

// chainWorkflow: s0..s9, each hands a 100-byte payload to the next; the
// last yields it as the output.
func chainWorkflow(hook stepHook) (*workflow.Workflow, error) {
	exs := make([]workflow.Executor, chainSteps)
	for i := range exs {
		last := i == chainSteps-1
		exs[i] = workflow.Func(fmt.Sprintf("s%d", i), func(c *workflow.Context, in string) error {
			if err := hook.call(c); err != nil {
				return err
			}
			if last {
				return c.Yield(in)
			}
			return c.Send(payload(payloadBytes))
		})
	}
	b := workflow.NewBuilder(modelW1).SetStart(exs[0]).AddChain(exs...)
	return b.Outputs(exs[chainSteps-1]).Build()
}

// crashWorkflow (W4): like W1, but every step also yields "step-<n>", so
// that lost or duplicated events show in the log.
func crashWorkflow(hook stepHook) (*workflow.Workflow, error) {
	exs := make([]workflow.Executor, chainSteps)
	for i := range exs {
		last := i == chainSteps-1
		exs[i] = workflow.Func(fmt.Sprintf("c%d", i), func(c *workflow.Context, in string) error {
			if err := hook.call(c); err != nil {
				return err
			}
			if err := c.Yield(crashEvent(i + 1)); err != nil || last {
				return err
			}
			return c.Send(payload(payloadBytes))
		})
	}
	b := workflow.NewBuilder(modelW4).SetStart(exs[0]).AddChain(exs...)
	for _, ex := range exs {
		b.Outputs(ex)
	}
	return b.Build()
}

// fanWorkflow: split sends to 8 branches; a fan-in barrier delivers their
// 8 results to join, which yields one output.
func fanWorkflow(hook stepHook) (*workflow.Workflow, error) {
	split := workflow.Func("split", func(c *workflow.Context, in string) error {
		if err := hook.call(c); err != nil {
			return err
		}
		return c.Send(payload(payloadBytes))
	})
	branches := make([]workflow.Executor, fanWidth)
	for i := range branches {
		branches[i] = workflow.Func(fmt.Sprintf("b%d", i), func(c *workflow.Context, in string) error {
			if err := hook.call(c); err != nil {
				return err
			}
			return c.Send(in)
		})
	}
	join := workflow.Func("join", func(c *workflow.Context, in []any) error {
		if err := hook.call(c); err != nil {
			return err
		}
		return c.Yield(fmt.Sprintf("joined %d", len(in)))
	})
	b := workflow.NewBuilder(modelW2).SetStart(split).AddFanOut(split, branches).AddFanIn(branches, join)
	return b.Outputs(join).Build()
}

// eventsWorkflow: one executor yields 200 outputs of 50 bytes in one
// superstep (one commit).
func eventsWorkflow(hook stepHook) (*workflow.Workflow, error) {
	emit := workflow.Func("emit", func(c *workflow.Context, in string) error {
		if err := hook.call(c); err != nil {
			return err
		}
		for i := range eventCount {
			if err := c.Yield(eventText(i)); err != nil {
				return err
			}
		}
		return nil
	})
	return workflow.NewBuilder(modelW3).SetStart(emit).Outputs(emit).Build()
}

// superstepSys hosts the bench workflows on a superstep host over SQLite
// or PostgreSQL, driven in process through host.CreateAndWait: a blocking
// request, whose create rides with its first commit and whose run is
// waited for in memory, without reading the response back.
type superstepSys struct {
	label, stor string
	pgDB        string // PostgreSQL database name; "" for SQLite
	openStore   func(ctx context.Context) (store.Store, io.Closer, error)
	hook        stepHook

	st     *countingStore
	closer io.Closer
	h      *host.Host
}

// storeCounts reports the store calls of the last open.
func (s *superstepSys) storeCounts() storeCounts { return s.st.counts() }

func newSuperstepSQLite(path string, sync sqlite.Synchronous) *superstepSys {
	return &superstepSys{label: "superstep", stor: "SQLite " + string(sync),
		openStore: func(ctx context.Context) (store.Store, io.Closer, error) {
			s, err := sqlite.Open(ctx, path, &sqlite.Options{Synchronous: sync, PageSize: sqlitePageSize})
			return s, s, err
		}}
}

// newSuperstepPostgres opens superstep's PostgreSQL store with maxConns
// pool connections (0: the store's default, pgx's max(4, CPUs)).
func newSuperstepPostgres(url, db string, maxConns int32) *superstepSys {
	stor := "PostgreSQL"
	if maxConns > 0 {
		stor = fmt.Sprintf("PostgreSQL, pool %d", maxConns)
	}
	return &superstepSys{label: "superstep", stor: stor, pgDB: db,
		openStore: func(ctx context.Context) (store.Store, io.Closer, error) {
			s, err := postgres.Open(ctx, url, &postgres.Options{MaxConns: maxConns, NoGroupCommit: !pgGroupCommit,
				CommitBatchesInFlight: pgCommitInFlight})
			return s, s, err
		}}
}

func (s *superstepSys) name() string           { return s.label }
func (s *superstepSys) storage() string        { return s.stor }
func (s *superstepSys) supports(workload) bool { return true }
func (s *superstepSys) pgDatabase() string     { return s.pgDB }

func hostConfig() *host.Config {
	return &host.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func (s *superstepSys) open(ctx context.Context) error {
	st, closer, err := s.openStore(ctx)
	if err != nil {
		return fmt.Errorf("bench: open superstep store: %w", err)
	}
	hs, cs, err := counting(st)
	if err != nil {
		_ = closer.Close()
		return err
	}
	h, err := startHost(ctx, hs, s.hook)
	if err != nil {
		_ = closer.Close()
		return err
	}
	s.st, s.closer, s.h = cs, closer, h
	return nil
}

// startHost creates a host over st with the bench workflows and starts it.
func startHost(ctx context.Context, st store.Store, hook stepHook) (*host.Host, error) {
	return startHostCfg(ctx, st, hook, hostConfig())
}

func startHostCfg(ctx context.Context, st store.Store, hook stepHook, cfg *host.Config) (*host.Host, error) {
	h, err := host.New(st, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: new host: %w", err)
	}
	wfs, err := benchWorkflows(hook)
	if err != nil {
		return nil, err
	}
	for name, wf := range wfs {
		if err := h.RegisterWorkflow(name, wf); err != nil {
			return nil, fmt.Errorf("bench: register %s: %w", name, err)
		}
	}
	if err := h.Start(ctx); err != nil {
		return nil, fmt.Errorf("bench: start host: %w", err)
	}
	return h, nil
}

func (s *superstepSys) do(ctx context.Context, w workload, _ string) error {
	r, err := s.h.CreateAndWait(ctx, blockingParams(w))
	if err != nil {
		return fmt.Errorf("bench: create and wait: %w", err)
	}
	if r.Status != store.StatusCompleted {
		return fmt.Errorf("bench: response %s ended %s: %s", r.ID, r.Status, r.Error)
	}
	return nil
}

// blockingParams is a blocking request for workload w's model, as a
// client's POST without background sends it (what DBOS's RunWorkflow and
// GetResult do): the host may write its create with the first commit.
func blockingParams(w workload) *host.CreateParams {
	text := payload(payloadBytes)
	return &host.CreateParams{
		Model:   modelOf(w),
		Request: []byte(`{"model":"` + modelOf(w) + `","input":"` + text + `"}`),
		Input:   []host.InputItem{{Type: host.InputMessage, Role: "user", Text: text}},
		Store:   true,
	}
}

// createParams is a background create of workload w's model (W4's crash
// child: its create is durable before the run starts).
func createParams(w workload) *host.CreateParams {
	text := payload(payloadBytes)
	return &host.CreateParams{
		Model:      modelOf(w),
		Request:    []byte(`{"model":"` + modelOf(w) + `","input":"` + text + `","background":true}`),
		Input:      []host.InputItem{{Type: host.InputMessage, Role: "user", Text: text}},
		Background: true, Store: true,
	}
}

func (s *superstepSys) close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := s.h.Shutdown(ctx)
	if sq, ok := s.closer.(*sqlite.Store); ok && storeStats {
		st := sq.Stats()
		fmt.Fprintf(os.Stderr, "bench: %s %s: group commit: %d writes in %d transactions (mean %.2f)\n",
			s.label, s.stor, st.Writes, st.Transactions, float64(st.Writes)/float64(max(st.Transactions, 1)))
	}
	if pg, ok := s.closer.(*postgres.Store); ok && (pgCommitStats || storeStats) {
		st := pg.CommitStats()
		fmt.Fprintf(os.Stderr, "bench: %s %s: group commit: %d commits and %d creates in %d transactions (mean %.2f members), "+
			"batch sizes in members %v (bounds %v); without savepoints: %d set batches, %d create batches; "+
			"declined by the set statement %d, by a create %d\n",
			s.label, s.stor, st.Commits, st.Creates, st.Batches, st.MeanBatch(), st.Sizes, st.SizeBounds,
			st.SetBatches, st.CreateBatches, st.SetDeclined, st.CreateDeclined)
	}
	return errors.Join(err, s.closer.Close())
}

// pgGroupCommit and pgCommitStats are the -pg-group-commit and
// -pg-commit-stats flags: superstep's PostgreSQL store group-commits (its
// default), and prints its batch sizes after each run. storeStats is
// -store-stats: print each superstep cell's store time per workflow and
// both stores' batch sizes.
var pgGroupCommit, pgCommitStats, storeStats = true, false, false

// sqlitePageSize is -sqlite-page-size: superstep's SQLite
// Options.PageSize for the bench's new files (0: its default).
var sqlitePageSize int

// pgCommitInFlight is -pg-commit-inflight: superstep's PostgreSQL
// Options.CommitBatchesInFlight (0: its default).
var pgCommitInFlight int
