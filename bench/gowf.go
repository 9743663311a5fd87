package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/sqlite"
	"github.com/cschleiden/go-workflows/client"
	"github.com/cschleiden/go-workflows/worker"
	"github.com/cschleiden/go-workflows/workflow"
)

// gowPollInterval is go-workflows' polling interval of the main gow row
// (its default is 200 ms). A sweep (1, 10, 50, 200 ms) found 1 ms best at
// c=1 and 10 ms best at c=8, so both are measured; targets use the better.
var gowPollInterval = time.Millisecond

// gowSys runs the workloads on go-workflows' SQLite backend
// (synchronous=FULL, WAL, single connection as the backend sets it).
type gowSys struct {
	path        string
	hook        stepHook
	lockTimeout time.Duration // 0: the backend's defaults (1 min workflow, 2 min activity, 30 s sticky)
	workerName  string        // "": the backend's generated name
	poll        time.Duration // polling interval of both workers

	b      backend.Backend
	w      *worker.Worker
	c      *client.Client
	cancel context.CancelFunc
}

// gowCrashLockTimeout is the task lock and sticky timeout of the W4
// child: a task held by a killed worker is taken again only after it; the
// defaults (1 and 2 minutes, 30 s sticky) would make each kill cost
// minutes. The child also keeps one worker name across restarts.
const gowCrashLockTimeout = 2 * time.Second

// gowInstance parses "<instance>/<execution>" as journaled by the start child.
func gowInstance(id string) (*workflow.Instance, error) {
	inst, exec, ok := strings.Cut(id, "/")
	if !ok {
		return nil, fmt.Errorf("bench: go-workflows: instance %q has no execution id", id)
	}
	return &workflow.Instance{InstanceID: inst, ExecutionID: exec}, nil
}

func newGoWorkflows(path string, poll time.Duration) *gowSys {
	return &gowSys{path: path, poll: poll}
}

func (s *gowSys) name() string    { return "go-workflows" }
func (s *gowSys) storage() string { return "SQLite FULL, poll " + s.poll.String() }
func (s *gowSys) supports(w workload) bool {
	return w == w1Chain || w == w2FanOut // no event stream API for W3
}
func (s *gowSys) pgDatabase() string { return "" }

func (s *gowSys) open(ctx context.Context) error {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The backend builds "file:<path>"; the pragma rides along in the DSN.
	bopts := []backend.BackendOption{backend.WithLogger(logger)}
	if s.lockTimeout > 0 {
		bopts = append(bopts, func(o *backend.Options) {
			o.WorkflowLockTimeout, o.ActivityLockTimeout, o.StickyTimeout = s.lockTimeout, s.lockTimeout, s.lockTimeout
		})
	}
	if s.workerName != "" {
		bopts = append(bopts, func(o *backend.Options) { o.WorkerName = s.workerName })
	}
	s.b = sqlite.NewSqliteBackend(s.path+"?_pragma=busy_timeout(5000)&_pragma=synchronous(FULL)", sqlite.WithBackendOptions(bopts...))
	opts := worker.DefaultOptions
	opts.WorkflowPollingInterval, opts.ActivityPollingInterval = s.poll, s.poll
	opts.SingleWorkerMode = true
	s.w = worker.New(s.b, &opts)
	regs := []error{s.w.RegisterWorkflow(s.chain), s.w.RegisterWorkflow(s.fan), s.w.RegisterActivity(s.activity)}
	for _, err := range regs {
		if err != nil {
			return fmt.Errorf("bench: go-workflows: register: %w", err)
		}
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if err := s.w.Start(wctx); err != nil {
		cancel()
		return fmt.Errorf("bench: go-workflows: start worker: %w", err)
	}
	s.cancel, s.c = cancel, client.New(s.b)
	return nil
}

func (s *gowSys) close(context.Context) error {
	s.cancel()
	err := s.w.WaitForCompletion()
	if cerr := s.b.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *gowSys) do(ctx context.Context, w workload, id string) error {
	var wf workflow.Workflow
	switch w {
	case w1Chain:
		wf = s.chain
	case w2FanOut:
		wf = s.fan
	default:
		return fmt.Errorf("bench: go-workflows: workload %s not supported", w)
	}
	inst, err := s.c.CreateWorkflowInstance(ctx, client.WorkflowInstanceOptions{InstanceID: id}, wf, payload(payloadBytes))
	if err != nil {
		return fmt.Errorf("bench: go-workflows: create: %w", err)
	}
	if _, err := client.GetWorkflowResult[string](ctx, s.c, inst, time.Minute); err != nil {
		return fmt.Errorf("bench: go-workflows: result: %w", err)
	}
	return nil
}

// activity is the no-op step: it calls the hook and returns a payload.
func (s *gowSys) activity(ctx context.Context, wfID string, step int64) (string, error) {
	if s.hook != nil {
		if err := s.hook(ctx, wfID, step); err != nil {
			return "", err
		}
	}
	return payload(payloadBytes), nil
}

// chain is W1: ten sequential activities.
func (s *gowSys) chain(ctx workflow.Context, in string) (string, error) {
	id := workflow.WorkflowInstance(ctx).InstanceID
	out := in
	for i := range chainSteps {
		var err error
		out, err = workflow.ExecuteActivity[string](ctx, workflow.DefaultActivityOptions, s.activity, id, int64(i+1)).Get(ctx)
		if err != nil {
			return "", err
		}
	}
	return out, nil
}

// fan is W2: a split activity, eight concurrent activities, a join.
func (s *gowSys) fan(ctx workflow.Context, in string) (string, error) {
	id := workflow.WorkflowInstance(ctx).InstanceID
	if _, err := workflow.ExecuteActivity[string](ctx, workflow.DefaultActivityOptions, s.activity, id, int64(1)).Get(ctx); err != nil {
		return "", err
	}
	fs := make([]workflow.Future[string], fanWidth)
	for i := range fs {
		fs[i] = workflow.ExecuteActivity[string](ctx, workflow.DefaultActivityOptions, s.activity, id, int64(2))
	}
	for _, f := range fs {
		if _, err := f.Get(ctx); err != nil {
			return "", err
		}
	}
	return workflow.ExecuteActivity[string](ctx, workflow.DefaultActivityOptions, s.activity, id, int64(3)).Get(ctx)
}
