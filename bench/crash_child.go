package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cschleiden/go-workflows/client"
	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
	"github.com/superstep/superstep/store/sqlite"
)

// childArgs are the flags of the W4 child process (a re-exec of bench).
type childArgs struct {
	mode    string // "start": begin the workflow; "resume": recover it
	sys     string // entry key
	db      string // SQLite path or PostgreSQL URL
	journal string // append-only journal of step executions
	id      string // workflow id (superstep: the response id, for resume)
	delay   time.Duration
}

func (a *childArgs) register(fs *flag.FlagSet) {
	fs.StringVar(&a.mode, "child", "", "internal: W4 child mode (start|resume)")
	fs.StringVar(&a.sys, "child-sys", "", "internal: W4 child system key")
	fs.StringVar(&a.db, "child-db", "", "internal: W4 child database")
	fs.StringVar(&a.journal, "child-journal", "", "internal: W4 child journal")
	fs.StringVar(&a.id, "child-id", "", "internal: W4 workflow id")
	fs.DurationVar(&a.delay, "child-delay", 30*time.Millisecond, "internal: W4 step duration")
}

// journal appends one line per record; a line written before SIGKILL is
// in the page cache and survives the process.
type journal struct {
	mu sync.Mutex
	f  *os.File
}

func openJournal(path string) (*journal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("bench: journal: %w", err)
	}
	return &journal{f: f}, nil
}

func (j *journal) write(kind, id string, step int64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	_, err := fmt.Fprintf(j.f, "%s %s %d %d\n", kind, id, step, time.Now().UnixNano())
	return err
}

// hook journals a step execution, then takes the step's time, so that a
// kill lands inside a step.
func (j *journal) hook(delay time.Duration) stepHook {
	return func(ctx context.Context, id string, step int64) error {
		if err := j.write("step", id, step); err != nil {
			return err
		}
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// childResult is what a resume child prints: the events of the finished
// workflow in log order.
type childResult struct {
	Events []string `json:"events"`
	Note   string   `json:"note,omitempty"`
}

func runChild(ctx context.Context, a *childArgs) error {
	j, err := openJournal(a.journal)
	if err != nil {
		return err
	}
	defer j.f.Close()
	_ = j.write("main", a.id, 0)
	hook := j.hook(a.delay)
	switch {
	case strings.HasPrefix(a.sys, "superstep"):
		return childSuperstep(ctx, a, j, hook)
	case strings.HasPrefix(a.sys, "dbos"):
		return childDBOS(ctx, a, j, hook)
	case strings.HasPrefix(a.sys, "gow"):
		return childGoWorkflows(ctx, a, j, hook)
	}
	return fmt.Errorf("bench: child: unknown system %q", a.sys)
}

func printResult(j *journal, r childResult) error {
	_ = j.write("done", "-", 0)
	return json.NewEncoder(os.Stdout).Encode(r)
}

func childSuperstep(ctx context.Context, a *childArgs, j *journal, hook stepHook) error {
	var st store.Store
	var err error
	if a.sys == "superstep-pg" {
		st, err = postgres.Open(ctx, a.db, nil)
	} else {
		st, err = sqlite.Open(ctx, a.db, nil)
	}
	if err != nil {
		return fmt.Errorf("bench: child: open store: %w", err)
	}
	_ = j.write("opened", a.id, 0)
	cfg := hostConfig()
	cfg.ExclusiveStore = true // one host: a lease found at start is a dead process's
	h, err := startHostCfg(ctx, st, hook, cfg)
	if err != nil {
		return err
	}
	_ = j.write("started", a.id, 0)
	id := a.id
	if a.mode == "start" {
		r, err := h.Create(ctx, createParams(w4Crash))
		if err != nil {
			return fmt.Errorf("bench: child: create: %w", err)
		}
		id = r.ID
		_ = j.write("created", id, 0)
	}
	r, err := h.Wait(ctx, id, "")
	if err != nil {
		return fmt.Errorf("bench: child: wait: %w", err)
	}
	res := childResult{Note: string(r.Status)}
	for ev, err := range h.Events(ctx, id, "", -1) {
		if err != nil {
			return fmt.Errorf("bench: child: events: %w", err)
		}
		if ev.Type == "response.output_text.done" {
			var d protocol.OutputTextEvent
			if err := json.Unmarshal(ev.Payload, &d); err != nil || d.Text == nil {
				return fmt.Errorf("bench: child: event %d: %v", ev.Seq, err)
			}
			res.Events = append(res.Events, *d.Text)
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return errors.Join(printResult(j, res), h.Shutdown(sctx), st.(interface{ Close() error }).Close())
}

func childDBOS(ctx context.Context, a *childArgs, j *journal, hook stepHook) error {
	var s *dbosSys
	if a.sys == "dbos-pg" {
		s = newDBOSPostgres(a.db, "")
	} else {
		s = newDBOSSQLite(a.db, "FULL")
	}
	s.hook = hook
	if err := s.open(ctx); err != nil {
		return err
	}
	_ = j.write("opened", a.id, 0)
	var h dbos.WorkflowHandle[string]
	var err error
	if a.mode == "start" {
		h, err = dbos.RunWorkflow(s.dctx, s.crash, payload(payloadBytes), dbos.WithWorkflowID(a.id))
	} else {
		h, err = dbos.RetrieveWorkflow[string](s.dctx, a.id)
	}
	if err == nil {
		_, err = h.GetResult()
	}
	if err != nil {
		return errors.Join(fmt.Errorf("bench: child: dbos workflow: %w", err), s.close(ctx))
	}
	vals, _, err := dbos.ReadStream[string](s.dctx, a.id, dbosStream, dbos.WithReadStreamSnapshot())
	if err != nil {
		return errors.Join(fmt.Errorf("bench: child: read stream: %w", err), s.close(ctx))
	}
	return errors.Join(printResult(j, childResult{Events: vals}), s.close(ctx))
}

func childGoWorkflows(ctx context.Context, a *childArgs, j *journal, hook stepHook) error {
	s := newGoWorkflows(a.db, gowPollInterval)
	s.hook, s.lockTimeout, s.workerName = hook, gowCrashLockTimeout, "bench-w4-worker"
	if err := s.open(ctx); err != nil {
		return err
	}
	_ = j.write("opened", a.id, 0)
	inst, err := gowInstance(a.id)
	if a.mode == "start" {
		inst, err = s.c.CreateWorkflowInstance(ctx, client.WorkflowInstanceOptions{InstanceID: a.id}, s.chain, payload(payloadBytes))
		if err == nil {
			_ = j.write("created", inst.InstanceID+"/"+inst.ExecutionID, 0)
		}
	}
	if err == nil {
		_, err = client.GetWorkflowResult[string](ctx, s.c, inst, 5*time.Minute)
	}
	res := childResult{Note: "go-workflows has no event stream: events n/a"}
	return errors.Join(err, printResult(j, res), s.close(ctx))
}
