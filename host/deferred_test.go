package host_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/workflow"
)

// registerDeferred registers the workflows of the deferred-create tests:
// d.echo answers in one superstep after sleeping for the request's
// metadata "sleep" (a duration; none by default); d.journal journals a
// sub-step before it answers.
func registerDeferred(t *testing.T, h *host.Host) {
	t.Helper()
	echo := workflow.Func("echo", func(c *workflow.Context, in string) error {
		if d, err := time.ParseDuration(c.Invocation().Metadata["sleep"]); err == nil {
			select {
			case <-time.After(d):
			case <-c.Context().Done():
				return c.Context().Err()
			}
		}
		return c.Yield("echo: " + in)
	})
	wf, err := workflow.NewBuilder("d.echo").SetStart(echo).Outputs(echo).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.RegisterWorkflow("d.echo", wf); err != nil {
		t.Fatal(err)
	}
	journal := workflow.Func("journal", func(c *workflow.Context, in string) error {
		n, err := workflow.RunStep(c.Context(), "count", func(context.Context) (int, error) { return len(in), nil })
		if err != nil {
			return err
		}
		return c.Yield(in + " " + string(rune('0'+n%10)))
	})
	wf, err = workflow.NewBuilder("d.journal").SetStart(journal).Outputs(journal).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.RegisterWorkflow("d.journal", wf); err != nil {
		t.Fatal(err)
	}
	// d.live streams a delta, journals a sub-step and answers; its
	// publication is live by default.
	streamer := workflow.Func("streamer", func(c *workflow.Context, in string) error {
		if err := c.EmitLive(agent.Update{Kind: agent.UpdateTextDelta, Text: in}); err != nil {
			return err
		}
		if _, err := workflow.RunStep(c.Context(), "count", func(context.Context) (int, error) { return len(in), nil }); err != nil {
			return err
		}
		return c.Yield(in)
	})
	wf, err = workflow.NewBuilder("d.live").SetStart(streamer).Outputs(streamer).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.RegisterWorkflow("d.live", wf, host.WithPublication(host.PublicationLive)); err != nil {
		t.Fatal(err)
	}
	fail := workflow.Func("fail", func(c *workflow.Context, in string) error {
		return errors.New("the first superstep fails")
	})
	wf, err = workflow.NewBuilder("d.fail").SetStart(fail).Outputs(fail).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.RegisterWorkflow("d.fail", wf); err != nil {
		t.Fatal(err)
	}
}

func blocking(model, text string, md map[string]string) *host.CreateParams {
	return &host.CreateParams{Model: model, Store: true, Metadata: md,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: text}}}
}

// writes returns the SQLite store's writes so far.
func writes(t *testing.T, s store.Store) int64 {
	t.Helper()
	return s.(*sqlite.Store).Stats().Writes
}

// TestCreateAndWait_CreateRidesFirstCommit: a blocking request's create is
// written with its first commit, one store write for a one-superstep
// workflow where Create and Wait make two, and the finished response, as
// stored and as returned, is what Create and Wait give.
func TestCreateAndWait_CreateRidesFirstCommit(t *testing.T) {
	b := setup(t, &setupOpts{noReg: true, cfg: &host.Config{CommitBackoff: time.Millisecond}})
	registerDeferred(t, b.host)
	ctx := testCtx(t)

	w0 := writes(t, b.store)
	got, err := b.host.CreateAndWait(ctx, blocking("d.echo", "hi", nil))
	if err != nil {
		t.Fatal(err)
	}
	deferred := writes(t, b.store) - w0

	w0 = writes(t, b.store)
	r, err := b.host.Create(ctx, blocking("d.echo", "hi", nil))
	if err != nil {
		t.Fatal(err)
	}
	want, err := b.host.WaitStarted(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	plain := writes(t, b.store) - w0
	if deferred != 1 || plain != 2 {
		t.Fatalf("store writes: CreateAndWait %d, Create+WaitStarted %d; want 1 and 2", deferred, plain)
	}
	stored, err := b.host.Get(ctx, got.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*store.Response{got, stored} {
		if r.Status != store.StatusCompleted || r.NextSeq != want.NextSeq || r.CommitStep != want.CommitStep {
			t.Fatalf("response %s: status %s, NextSeq %d, CommitStep %d; want %s %d %d", r.ID, r.Status, r.NextSeq,
				r.CommitStep, want.Status, want.NextSeq, want.CommitStep)
		}
		if s := snapshot(t, r); len(s.Output) != 1 || s.Output[0].Content[0].Text != "echo: hi" {
			t.Fatalf("response %s output %+v", r.ID, s.Output)
		}
	}
	if evs, ws := collect(t, b.host, got.ID, -1), collect(t, b.host, want.ID, -1); types(evs) != types(ws) {
		t.Fatalf("events %s, want %s", types(evs), types(ws))
	}
}

// TestCreateAndWait_PendingRunOutlivesLease: while its create is not
// written, a run is not the lease loops' (no lease to renew, none to
// guard): a first superstep longer than the lease finishes, and the
// response's lease is then the one its create claimed.
func TestCreateAndWait_PendingRunOutlivesLease(t *testing.T) {
	b := setup(t, &setupOpts{noReg: true, cfg: &host.Config{CommitBackoff: time.Millisecond, LeaseDuration: 300 * time.Millisecond}})
	registerDeferred(t, b.host)
	got, err := b.host.CreateAndWait(testCtx(t), blocking("d.echo", "slow", map[string]string{"sleep": "900ms"}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusCompleted {
		t.Fatalf("status %s (%s), want completed", got.Status, got.Error)
	}
}

// TestCreateAndWait_CreateRidesFirstJournalEntry: a run that journals before
// its first commit has its create written with the journal entry (which
// needs the run in the store), in one store write, then commits as usual.
func TestCreateAndWait_CreateRidesFirstJournalEntry(t *testing.T) {
	b := setup(t, &setupOpts{noReg: true})
	registerDeferred(t, b.host)
	w0 := writes(t, b.store)
	got, err := b.host.CreateAndWait(testCtx(t), blocking("d.journal", "abc", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusCompleted {
		t.Fatalf("status %s (%s), want completed", got.Status, got.Error)
	}
	if s := snapshot(t, got); len(s.Output) != 1 || s.Output[0].Content[0].Text != "abc 3" {
		t.Fatalf("output %+v", s.Output)
	}
	if n := writes(t, b.store) - w0; n != 2 {
		t.Fatalf("store writes %d, want 2 (the create with the journal entry, the commit)", n)
	}
}

// TestCreateAndWait_LiveDefaultPublishedAtCommits: a blocking request's
// response is read by nobody before it ends, so a model that streams by
// default (live publication) answers it published at commits: no live
// append, and the create rides with the journal entry: 2 store writes.
// A request that asks for live in its metadata keeps it.
func TestCreateAndWait_LiveDefaultPublishedAtCommits(t *testing.T) {
	b := setup(t, &setupOpts{noReg: true})
	registerDeferred(t, b.host)
	for _, tc := range []struct {
		md     map[string]string
		writes func(int64) bool
		want   string
	}{
		{nil, func(n int64) bool { return n == 2 }, "2 (the create with the journal entry, the commit)"},
		{map[string]string{"publication": "live"}, func(n int64) bool { return n >= 3 }, "3 or more (the create, live appends, the commit)"},
	} {
		w0 := writes(t, b.store)
		got, err := b.host.CreateAndWait(testCtx(t), blocking("d.live", "abc", tc.md))
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != store.StatusCompleted {
			t.Fatalf("metadata %v: status %s (%s)", tc.md, got.Status, got.Error)
		}
		if s := snapshot(t, got); len(s.Output) != 1 || s.Output[0].Content[0].Text != "abc" {
			t.Fatalf("metadata %v: output %+v", tc.md, s.Output)
		}
		if n := writes(t, b.store) - w0; !tc.writes(n) {
			t.Fatalf("metadata %v: %d store writes, want %s", tc.md, n, tc.want)
		}
	}
}

// TestCreateAndWait_StoppedBeforeFirstCommit: a run stopped before its
// first commit (the host shuts down) leaves nothing stored, and its
// waiting caller gets ErrHostClosed (a 503 over HTTP, not a 404).
func TestCreateAndWait_StoppedBeforeFirstCommit(t *testing.T) {
	b := setup(t, &setupOpts{noReg: true})
	registerDeferred(t, b.host)
	errc := make(chan error, 1)
	var id string
	go func() {
		r, err := b.host.CreateAndWait(testCtx(t), blocking("d.echo", "never", map[string]string{"sleep": "1m"}))
		if r != nil {
			id = r.ID
		}
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond) // the run is sleeping in its first superstep
	shutdownOnce.Store(b.host, true)   // not again at cleanup
	sctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_ = b.host.Shutdown(sctx) // the run is interrupted when sctx ends
	select {
	case err := <-errc:
		if !errors.Is(err, host.ErrHostClosed) {
			t.Fatalf("CreateAndWait: response %q, %v; want ErrHostClosed", id, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CreateAndWait did not return after the host shut down")
	}
	runs, err := b.store.(*sqlite.Store).RunList(context.Background(), &store.RunListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 0 {
		t.Fatalf("%d runs stored, want none", len(runs))
	}
}

// TestCreateAndWait_FirstSuperstepFails: a run whose first superstep
// fails finishes its response as failed, written with its create in one
// store write, and CreateAndWait returns it as Create and Wait would.
func TestCreateAndWait_FirstSuperstepFails(t *testing.T) {
	b := setup(t, &setupOpts{noReg: true})
	registerDeferred(t, b.host)
	w0 := writes(t, b.store)
	got, err := b.host.CreateAndWait(testCtx(t), blocking("d.fail", "x", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusFailed || len(got.Error) == 0 {
		t.Fatalf("status %s, error %s; want failed with an error", got.Status, got.Error)
	}
	if n := writes(t, b.store) - w0; n != 1 {
		t.Fatalf("store writes %d, want 1 (the create with the failing commit)", n)
	}
	stored, err := b.host.Get(testCtx(t), got.ID, "")
	if err != nil || stored.Status != store.StatusFailed {
		t.Fatalf("stored: %v, %v", stored, err)
	}
	if evs := collect(t, b.host, got.ID, -1); len(evs) == 0 || evs[0].Type != "response.created" || evs[len(evs)-1].Type != "response.failed" {
		t.Fatalf("events %s", types(evs))
	}
}

// createCounter counts a store's ResponseCreate, CreateCommit and
// CreateJournalAppend calls (it is a store.CreateCommitter and a
// store.CreateJournaler over one).
type createCounter struct {
	store.Store
	creates, createCommits, createJournals atomic.Int64
}

func (c *createCounter) CreateJournalAppend(ctx context.Context, cp *store.ResponseCreateParams, p *store.JournalAppendParams) (*store.ResponseCreateResult, error) {
	c.createJournals.Add(1)
	return c.Store.(store.CreateJournaler).CreateJournalAppend(ctx, cp, p)
}

func (c *createCounter) JournalAppend(ctx context.Context, p *store.JournalAppendParams) error {
	return c.Store.(store.Journal).JournalAppend(ctx, p)
}

func (c *createCounter) JournalList(ctx context.Context, runID string, step int64) ([]store.JournalEntry, error) {
	return c.Store.(store.Journal).JournalList(ctx, runID, step)
}

func (c *createCounter) ResponseCreate(ctx context.Context, p *store.ResponseCreateParams) (*store.ResponseCreateResult, error) {
	c.creates.Add(1)
	return c.Store.ResponseCreate(ctx, p)
}

func (c *createCounter) CreateCommit(ctx context.Context, cp *store.ResponseCreateParams, p *store.CommitParams) (*store.ResponseCreateResult, *store.CommitResult, error) {
	c.createCommits.Add(1)
	return c.Store.(store.CreateCommitter).CreateCommit(ctx, cp, p)
}

// TestCreateAndWait_Postgres: on PostgreSQL a blocking request's create
// rides with its first commit too (CreateCommit, no ResponseCreate),
// concurrent requests share group-commit batches, and every response is
// as Create and Wait leave it.
func TestCreateAndWait_Postgres(t *testing.T) {
	t.Parallel()
	raw := openPG(t, pgSchema(t))
	defer raw.Close()
	s := &createCounter{Store: raw}
	h := newHost(t, s, nil, registerDeferred)
	defer shutdown(t, h)
	ctx := testCtx(t)
	const n = 16
	errc := make(chan error, n)
	for i := range n {
		go func() {
			r, err := h.CreateAndWait(ctx, blocking("d.echo", fmt.Sprint(i), nil))
			if err == nil && (r.Status != store.StatusCompleted || snapshot(t, r).Output[0].Content[0].Text != "echo: "+fmt.Sprint(i)) {
				err = fmt.Errorf("response %s: status %s", r.ID, r.Status)
			}
			errc <- err
		}()
	}
	for range n {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if c, cc := s.creates.Load(), s.createCommits.Load(); c != 0 || cc != n {
		t.Fatalf("%d ResponseCreate and %d CreateCommit calls, want 0 and %d", c, cc, n)
	}
	if st := raw.(*postgres.Store).CommitStats(); st.Commits != n || st.Creates != n {
		t.Fatalf("group commit counted %d commits and %d creates, want %d each", st.Commits, st.Creates, n)
	}
	if err := store.Check(ctx, raw); err != nil {
		t.Fatal(err)
	}
}

// flakyCreates is a store.CreateCommitter whose first CreateCommit and
// first ResponseCreate fail as an unreachable store does, writing nothing.
type flakyCreates struct {
	createCounter
	createCommitFailed, createFailed atomic.Bool
}

func (f *flakyCreates) ResponseCreate(ctx context.Context, p *store.ResponseCreateParams) (*store.ResponseCreateResult, error) {
	if f.createFailed.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("injected: %w", store.ErrUnavailable)
	}
	return f.createCounter.ResponseCreate(ctx, p)
}

func (f *flakyCreates) CreateCommit(ctx context.Context, cp *store.ResponseCreateParams, p *store.CommitParams) (*store.ResponseCreateResult, *store.CommitResult, error) {
	if f.createCommitFailed.CompareAndSwap(false, true) {
		return nil, nil, fmt.Errorf("injected: %w", store.ErrUnavailable)
	}
	return f.createCounter.CreateCommit(ctx, cp, p)
}

// flakyCreateJournal is a createCounter whose first CreateJournalAppend
// fails as an unreachable store does, writing nothing.
type flakyCreateJournal struct {
	createCounter
	failed atomic.Bool
}

func (f *flakyCreateJournal) CreateJournalAppend(ctx context.Context, cp *store.ResponseCreateParams, p *store.JournalAppendParams) (*store.ResponseCreateResult, error) {
	if f.failed.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("injected: %w", store.ErrUnavailable)
	}
	return f.createCounter.CreateJournalAppend(ctx, cp, p)
}

// TestCreateAndWait_CreateJournalRetried: the write of a blocking
// request's create with its first journal entry that fails as an
// unreachable store does is made again, and the request completes, its
// create never written alone.
func TestCreateAndWait_CreateJournalRetried(t *testing.T) {
	raw := openStore(t, filepath.Join(t.TempDir(), "flaky.db"))
	defer raw.Close()
	s := &flakyCreateJournal{createCounter: createCounter{Store: raw}}
	h := newHost(t, s, nil, registerDeferred)
	defer shutdown(t, h)
	got, err := h.CreateAndWait(testCtx(t), blocking("d.journal", "abc", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusCompleted {
		t.Fatalf("status %s (%s), want completed", got.Status, got.Error)
	}
	if !s.failed.Load() || s.createJournals.Load() != 1 || s.creates.Load() != 0 || s.createCommits.Load() != 0 {
		t.Fatalf("CreateJournalAppend failed once %v, then %d calls; %d ResponseCreate, %d CreateCommit; want the failure, 1, 0, 0",
			s.failed.Load(), s.createJournals.Load(), s.creates.Load(), s.createCommits.Load())
	}
}

// TestCreateAndWait_TransientFailureRetried: a first commit with its create
// that fails as an unreachable store does is made again, as any commit's
// transient failure is, and the request completes; it is not lost (before,
// the host wrote the create alone instead, and when that failed too the run
// stopped with nothing stored and its caller got a not-found).
func TestCreateAndWait_TransientFailureRetried(t *testing.T) {
	raw := openStore(t, filepath.Join(t.TempDir(), "flaky.db"))
	defer raw.Close()
	s := &flakyCreates{createCounter: createCounter{Store: raw}}
	h := newHost(t, s, nil, registerDeferred)
	defer shutdown(t, h)
	got, err := h.CreateAndWait(testCtx(t), blocking("d.echo", "again", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusCompleted {
		t.Fatalf("status %s (%s), want completed", got.Status, got.Error)
	}
	if !s.createCommitFailed.Load() || s.createCommits.Load() != 1 {
		t.Fatalf("CreateCommit: failed once %v, then %d calls; want the failure and one call", s.createCommitFailed.Load(), s.createCommits.Load())
	}
}
