package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	_ "github.com/dbos-inc/dbos-transact-golang/dbos/driver/sqlite" // DBOS's SQLite support
)

// dbosStream is the key of the W3 durable stream.
const dbosStream = "events"

// dbosSys runs the workloads on DBOS Transact Go, on PostgreSQL or SQLite.
type dbosSys struct {
	stor, pgURL, pgDB string
	sqlitePath, sync  string // SQLite: file and synchronous setting
	hook              stepHook

	dctx   dbos.Context
	sqlite *sql.DB
}

func newDBOSPostgres(url, db string) *dbosSys {
	return &dbosSys{stor: "PostgreSQL", pgURL: url, pgDB: db}
}

func newDBOSSQLite(path, sync string) *dbosSys {
	return &dbosSys{stor: "SQLite " + sync, sqlitePath: path, sync: sync}
}

func (s *dbosSys) name() string           { return "DBOS" }
func (s *dbosSys) storage() string        { return s.stor }
func (s *dbosSys) supports(workload) bool { return true }
func (s *dbosSys) pgDatabase() string     { return s.pgDB }

func (s *dbosSys) open(ctx context.Context) error {
	cfg := dbos.Config{AppName: "bench", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		DatabaseURL: s.pgURL, ApplicationVersion: "bench"}
	if s.sqlitePath != "" {
		db, err := openDBOSSQLite(ctx, s.sqlitePath, s.sync)
		if err != nil {
			return err
		}
		s.sqlite, cfg.SQLiteSystemDB = db, db
	}
	dctx, err := dbos.NewContext(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench: dbos: new context: %w", err)
	}
	dbos.RegisterWorkflow(dctx, s.chain, dbos.WithWorkflowName("bench.w1"))
	dbos.RegisterWorkflow(dctx, s.fan, dbos.WithWorkflowName("bench.w2"))
	dbos.RegisterWorkflow(dctx, s.events, dbos.WithWorkflowName("bench.w3"))
	dbos.RegisterWorkflow(dctx, s.crash, dbos.WithWorkflowName("bench.w4"))
	if err := dbos.Launch(dctx); err != nil {
		return fmt.Errorf("bench: dbos: launch: %w", err)
	}
	s.dctx = dctx
	return nil
}

// openDBOSSQLite opens the handle DBOS would open itself (WAL, busy
// timeout, foreign keys, immediate transactions, 8 connections) but with
// the synchronous setting asked for: DBOS's own default is NORMAL.
func openDBOSSQLite(ctx context.Context, path, sync string) (*sql.DB, error) {
	dsn := "file:" + path + "?_txlock=immediate&_pragma=busy_timeout(5000)&_pragma=foreign_keys(ON)" +
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(" + sync + ")"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: dbos sqlite: %w", err)
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(4)
	var mode int
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&mode); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("bench: dbos sqlite pragma: %w", err)
	}
	if want := map[string]int{"NORMAL": 1, "FULL": 2}[sync]; mode != want {
		_ = db.Close()
		return nil, fmt.Errorf("bench: dbos sqlite: synchronous is %d, want %s", mode, sync)
	}
	return db, nil
}

func (s *dbosSys) close(context.Context) error {
	err := dbos.Shutdown(s.dctx, 10*time.Second)
	if s.sqlite != nil {
		err = errors.Join(err, s.sqlite.Close())
	}
	return err
}

func (s *dbosSys) do(_ context.Context, w workload, id string) error {
	var h dbos.WorkflowHandle[string]
	var err error
	in := payload(payloadBytes)
	switch w {
	case w1Chain:
		h, err = dbos.RunWorkflow(s.dctx, s.chain, in, dbos.WithWorkflowID(id))
	case w2FanOut:
		h, err = dbos.RunWorkflow(s.dctx, s.fan, in, dbos.WithWorkflowID(id))
	case w3Events:
		h, err = dbos.RunWorkflow(s.dctx, s.events, in, dbos.WithWorkflowID(id))
	default:
		return fmt.Errorf("bench: dbos: workload %s not supported", w)
	}
	if err != nil {
		return fmt.Errorf("bench: dbos: run workflow: %w", err)
	}
	if _, err := h.GetResult(); err != nil {
		return fmt.Errorf("bench: dbos: result: %w", err)
	}
	return nil
}

// step returns a no-op step that calls the hook and returns a payload.
func (s *dbosSys) step(n int64) dbos.Step[string] {
	return func(ctx context.Context) (string, error) {
		if s.hook != nil {
			id, err := ctx.(dbos.Context).GetWorkflowID()
			if err != nil {
				return "", err
			}
			if err := s.hook(ctx, id, n); err != nil {
				return "", err
			}
		}
		return payload(payloadBytes), nil
	}
}

// chain is W1: ten sequential steps.
func (s *dbosSys) chain(ctx dbos.Context, in string) (string, error) {
	out := in
	for i := range chainSteps {
		var err error
		if out, err = dbos.RunAsStep(ctx, s.step(int64(i+1)), dbos.WithStepName(fmt.Sprintf("s%d", i))); err != nil {
			return "", err
		}
	}
	return out, nil
}

// fan is W2: a split step, eight concurrent steps (dbos.Go), a join step.
func (s *dbosSys) fan(ctx dbos.Context, in string) (string, error) {
	if _, err := dbos.RunAsStep(ctx, s.step(1), dbos.WithStepName("split")); err != nil {
		return "", err
	}
	chans := make([]<-chan dbos.StepOutcome[string], fanWidth)
	for i := range chans {
		ch, err := dbos.Go(ctx, s.step(2), dbos.WithStepName(fmt.Sprintf("b%d", i)))
		if err != nil {
			return "", err
		}
		chans[i] = ch
	}
	for _, ch := range chans {
		if o := <-ch; o.Err != nil {
			return "", o.Err
		}
	}
	return dbos.RunAsStep(ctx, s.step(3), dbos.WithStepName("join"))
}

// events is W3: one step writing 200 values to a durable stream.
func (s *dbosSys) events(ctx dbos.Context, in string) (string, error) {
	return dbos.RunAsStep(ctx, func(sctx context.Context) (string, error) {
		dc := sctx.(dbos.Context)
		if s.hook != nil {
			id, err := dc.GetWorkflowID()
			if err != nil {
				return "", err
			}
			if err := s.hook(sctx, id, 1); err != nil {
				return "", err
			}
		}
		for i := range eventCount {
			if err := dbos.WriteStream(dc, dbosStream, eventText(i)); err != nil {
				return "", err
			}
		}
		return "done", nil
	}, dbos.WithStepName("emit"))
}

// crash is W4: ten sequential steps, each writing "step-<n>" to the
// durable stream inside the step.
func (s *dbosSys) crash(ctx dbos.Context, in string) (string, error) {
	for i := range chainSteps {
		_, err := dbos.RunAsStep(ctx, func(sctx context.Context) (string, error) {
			if _, err := s.step(int64(i + 1))(sctx); err != nil {
				return "", err
			}
			return "", dbos.WriteStream(sctx.(dbos.Context), dbosStream, crashEvent(i+1))
		}, dbos.WithStepName(fmt.Sprintf("c%d", i)))
		if err != nil {
			return "", err
		}
	}
	return "done", nil
}
