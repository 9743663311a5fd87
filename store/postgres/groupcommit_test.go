package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// oneBatchStore opens a store on a fresh schema that has at most one
// group-commit batch in flight, so that the commits made while one waits
// all queue for the next.
func oneBatchStore(t *testing.T) *Store {
	t.Helper()
	return openStore(t, newSchemaName(t), &Options{GroupCommit: true, CommitBatchesInFlight: 1})
}

// batchFixture is a store whose commits are held behind one lone commit
// (of run lead) that waits for a row lock, so that the commits made
// meanwhile queue and are then written as one batch.
type batchFixture struct {
	s     *Store
	lead  *store.ResponseCreateResult
	admin *pgx.Conn // holds lead's run row locked until release
	done  chan error
}

// holdCommits starts the lone commit of a fresh run and returns once it
// waits for the lock an admin transaction holds on that run.
func holdCommits(t *testing.T, s *Store) *batchFixture {
	t.Helper()
	ctx := t.Context()
	f := &batchFixture{s: s, lead: storetest.CreateResponse(ctx, t, s, nil), done: make(chan error, 1)}
	f.admin = lockRun(t, s, f.lead.Run.ID)
	p := storetest.NextCommit(ctx, t, s, f.lead.Run.ID, nil)
	go func() {
		_, err := s.Commit(ctx, p)
		f.done <- err
	}()
	waitLocked(t, f.admin, s, "superstep_commit", 1)
	return f
}

// lockRun opens an admin transaction holding runID's row lock.
func lockRun(t *testing.T, s *Store, runID string) *pgx.Conn {
	t.Helper()
	admin, err := pgx.Connect(t.Context(), testURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeConn(admin) })
	if _, err := admin.Exec(t.Context(), "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(t.Context(), "SELECT 1 FROM "+pgx.Identifier{s.opts.Schema, "runs"}.Sanitize()+
		" WHERE id = $1 FOR UPDATE", runID); err != nil {
		t.Fatal(err)
	}
	return admin
}

// waitLocked polls until n backends running a statement containing query
// wait for a lock on s's runs table, and returns their pids.
func waitLocked(t *testing.T, admin *pgx.Conn, s *Store, query string, n int) []int {
	t.Helper()
	for {
		// Inside a transaction PostgreSQL keeps one snapshot of
		// pg_stat_activity: clear it before each look.
		if _, err := admin.Exec(t.Context(), "SELECT pg_stat_clear_snapshot()"); err != nil {
			t.Fatal(err)
		}
		rows, err := admin.Query(t.Context(), `SELECT pid FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%'||$2||'%' AND pid IN (
				SELECT pid FROM pg_locks WHERE relation = $1::regclass)`, s.opts.Schema+".runs", query)
		if err != nil {
			t.Fatal(err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) >= n {
			return pids
		}
		time.Sleep(5 * time.Millisecond) // polling pg_stat_activity: there is no signal
	}
}

// waitQueued polls until n commits are queued behind the batch in flight.
func (f *batchFixture) waitQueued(t *testing.T, n int) {
	t.Helper()
	for {
		f.s.commits.mu.Lock()
		q := len(f.s.commits.queue)
		f.s.commits.mu.Unlock()
		if q >= n {
			return
		}
		if t.Context().Err() != nil {
			t.Fatal(t.Context().Err())
		}
		time.Sleep(time.Millisecond) // polling the queue: there is no signal
	}
}

// release lets the lone commit finish, which must succeed.
func (f *batchFixture) release(t *testing.T) {
	t.Helper()
	rollback(t, f.admin)
	if err := <-f.done; err != nil {
		t.Fatalf("lone commit: %v", err)
	}
}

type memberResult struct {
	p   *store.CommitParams
	res *store.CommitResult
	err error
}

// commitAll makes each commit in a goroutine of its own and returns
// the channel of results (in completion order).
func commitAll(ctx context.Context, s *Store, ps []*store.CommitParams) chan memberResult {
	out := make(chan memberResult, len(ps))
	for _, p := range ps {
		go func() {
			res, err := s.Commit(ctx, p)
			out <- memberResult{p, res, err}
		}()
	}
	return out
}

// TestGroupCommit_MemberFailsAlone: commits of many runs queued at once
// are written in one transaction; one whose epoch is stale fails with
// ErrFenced and one whose events do not continue the log fails with
// ErrConflict, each alone: the others succeed and are all visible, the
// failing ones left nothing.
func TestGroupCommit_MemberFailsAlone(t *testing.T) {
	t.Parallel()
	s := oneBatchStore(t)
	ctx := t.Context()
	const n = 12
	var ps []*store.CommitParams
	for range n {
		c := storetest.CreateResponse(ctx, t, s, nil)
		ps = append(ps, storetest.NextCommit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{Events: 3}))
	}
	// Whatever the order in the transaction (by run), a failing member
	// sits among succeeding ones.
	fenced, invalid := ps[3], ps[8]
	fenced.Epoch++
	invalid.Events[0].Seq += 5
	for i := range invalid.Events[1:] {
		invalid.Events[i+1].Seq = invalid.Events[0].Seq + int64(i+1)
	}
	before := s.CommitStats()
	f := holdCommits(t, s)
	results := commitAll(ctx, s, ps)
	f.waitQueued(t, n)
	f.release(t)
	for range n {
		r := <-results
		switch r.p {
		case fenced:
			if !errors.Is(r.err, store.ErrFenced) {
				t.Errorf("fenced member: %v, want ErrFenced", r.err)
			}
		case invalid:
			if !errors.Is(r.err, store.ErrConflict) || errors.Is(r.err, store.ErrFenced) {
				t.Errorf("member whose events do not continue the log: %v, want ErrConflict", r.err)
			}
		default:
			if r.err != nil {
				t.Errorf("member %s: %v", r.p.RunID, r.err)
			}
		}
	}
	for _, p := range ps {
		st := storetest.ReadRunState(ctx, t, s, p.RunID)
		want := int64(1)
		if p == fenced || p == invalid {
			want = 0
		}
		if st.Run.LastStep != want || int64(len(st.Events[p.ResponseID])) != 1+3*want {
			t.Errorf("run %s: last step %d, %d events; want step %d", p.RunID, st.Run.LastStep, len(st.Events[p.ResponseID]), want)
		}
	}
	after := s.CommitStats()
	// holdCommits' create is a batch of its own.
	if got := after.Batches - before.Batches - (after.Creates - before.Creates); got != 2 {
		t.Errorf("batches: %d, want 2 (the lone commit, then the %d queued)", got, n)
	}
	if got := after.Sizes[4] - before.Sizes[4]; got != 1 {
		t.Errorf("batches of 9 to 16 commits: %d, want 1 (sizes %v)", got, after.Sizes)
	}
	if err := store.Check(ctx, s); err != nil {
		t.Fatal(err)
	}
}

// TestGroupCommit_TransactionDies: when the backend writing a batch is
// terminated mid-batch, every member fails with ErrUnavailable and
// nothing of any member is visible, also of those written before in the
// same transaction; the same commits succeed when made again.
func TestGroupCommit_TransactionDies(t *testing.T) {
	t.Parallel()
	s := oneBatchStore(t)
	ctx := t.Context()
	const n = 6
	var ps []*store.CommitParams
	for range n {
		c := storetest.CreateResponse(ctx, t, s, nil)
		ps = append(ps, storetest.NextCommit(ctx, t, s, c.Run.ID, nil))
	}
	// The batch locks its runs in run order: the last one waits for a
	// lock held here, after the others were written.
	last := slices.MaxFunc(ps, func(a, b *store.CommitParams) int { return strings.Compare(a.RunID, b.RunID) })
	blocker := lockRun(t, s, last.RunID)
	f := holdCommits(t, s)
	results := commitAll(ctx, s, ps)
	f.waitQueued(t, n)
	f.release(t)
	pids := waitLocked(t, blocker, s, "superstep_commit", 1)
	if _, err := blocker.Exec(ctx, "SELECT pg_terminate_backend($1)", pids[0]); err != nil {
		t.Fatal(err)
	}
	for range n {
		r := <-results
		if !errors.Is(r.err, store.ErrUnavailable) {
			t.Errorf("member %s of the terminated batch: %v, want ErrUnavailable", r.p.RunID, r.err)
		}
	}
	rollback(t, blocker)
	for _, p := range ps {
		st := storetest.ReadRunState(ctx, t, s, p.RunID)
		if st.Run.LastStep != 0 || len(st.Events[p.ResponseID]) != 1 || len(st.Checkpoints) != 1 {
			t.Errorf("run %s after the failed batch: %s", p.RunID, st)
		}
	}
	again := commitAll(ctx, s, ps)
	for range n {
		if r := <-again; r.err != nil {
			t.Errorf("commit again after the failed batch: %v", r.err)
		}
	}
	if err := store.Check(ctx, s); err != nil {
		t.Fatal(err)
	}
}

// TestGroupCommit_Prune: members that also prune checkpoints do so
// inside the batch, each alone: a fenced one prunes nothing.
func TestGroupCommit_Prune(t *testing.T) {
	t.Parallel()
	s := oneBatchStore(t)
	ctx := t.Context()
	const n = 4
	var ps []*store.CommitParams
	for range n {
		c := storetest.CreateResponse(ctx, t, s, nil)
		for range 3 {
			storetest.Commit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{NoEvents: true})
		}
		p := storetest.NextCommit(ctx, t, s, c.Run.ID, nil)
		p.PruneKeep = 1
		ps = append(ps, p)
	}
	ps[1].Epoch++ // fenced: prunes nothing
	f := holdCommits(t, s)
	results := commitAll(ctx, s, ps)
	f.waitQueued(t, n)
	f.release(t)
	for range n {
		r := <-results
		if r.p == ps[1] {
			if !errors.Is(r.err, store.ErrFenced) {
				t.Errorf("fenced member: %v", r.err)
			}
		} else if r.err != nil {
			t.Errorf("member: %v", r.err)
		}
	}
	for _, p := range ps {
		// Four checkpoints (steps 0 to 3) before; a fifth written and
		// the old ones pruned, or none of it.
		st := storetest.ReadRunState(ctx, t, s, p.RunID)
		if p == ps[1] && (len(st.Checkpoints) != 4 || st.Run.LastStep != 3) {
			t.Errorf("fenced run %s: %d checkpoints, last step %d; want 4, 3", p.RunID, len(st.Checkpoints), st.Run.LastStep)
		}
		if p != ps[1] && (len(st.Checkpoints) >= 5 || st.Run.LastStep != 4) {
			t.Errorf("run %s: %d checkpoints, last step %d; want fewer than 5, 4", p.RunID, len(st.Checkpoints), st.Run.LastStep)
		}
	}
	if err := store.Check(ctx, s); err != nil {
		t.Fatal(err)
	}
}

// TestGroupCommit_Sustained: many runs committing step after step at once,
// through batches several of which are in flight at a time, all commit.
func TestGroupCommit_Sustained(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchemaName(t), &Options{GroupCommit: true, CommitBatchesInFlight: 3, MaxConns: 8})
	ctx := t.Context()
	const runs, steps = 32, 8
	errs := make(chan error, runs)
	var ids []string
	epochs, heads := map[string]int64{}, map[string]string{}
	for range runs {
		c := storetest.CreateResponse(ctx, t, s, nil)
		ids = append(ids, c.Run.ID)
		epochs[c.Run.ID], heads[c.Run.ID] = c.Run.Lease.Epoch, c.Response.ID
	}
	for _, id := range ids {
		go func() {
			for step := range int64(steps) {
				// Built here, not by storetest.NextCommit, which may
				// call t.Fatal (not allowed outside the test's goroutine).
				p := &store.CommitParams{RunID: id, Epoch: epochs[id], Step: step + 1, ResponseID: heads[id],
					Status: store.StatusInProgress, Snapshot: []byte(`{}`),
					Checkpoint: []store.Part{{Name: "state", Data: []byte{byte(step)}}},
					Events:     []store.EventInput{{Seq: step + 1, Type: "response.output_text.delta", Payload: []byte(`{}`)}}}
				if _, err := s.Commit(ctx, p); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range runs {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for _, id := range ids {
		if st := storetest.ReadRunState(ctx, t, s, id); st.Run.LastStep != steps {
			t.Errorf("run %s: last step %d, want %d", id, st.Run.LastStep, steps)
		}
	}
	if st := s.CommitStats(); st.Commits != runs*steps {
		t.Errorf("stats %+v: want %d commits", st, runs*steps)
	}
	if err := store.Check(ctx, s); err != nil {
		t.Fatal(err)
	}
}

// TestGroupCommit_Journal: members that prune their run's journal
// (CommitParams.JournalPrune) do so inside the batch, each alone: a
// fenced one deletes nothing.
func TestGroupCommit_Journal(t *testing.T) {
	t.Parallel()
	s := oneBatchStore(t)
	ctx := t.Context()
	const n = 4
	var ps []*store.CommitParams
	for range n {
		c := storetest.CreateResponse(ctx, t, s, nil)
		err := s.JournalAppend(ctx, &store.JournalAppendParams{RunID: c.Run.ID, Epoch: c.Run.Lease.Epoch, Step: 1,
			Entries: []store.JournalInput{{Key: "a", Hash: "h", Data: []byte("x")}, {Key: "b", Hash: "h"}}})
		if err != nil {
			t.Fatal(err)
		}
		p := storetest.NextCommit(ctx, t, s, c.Run.ID, nil)
		p.JournalPrune = true
		ps = append(ps, p)
	}
	ps[1].Epoch++ // fenced: deletes nothing
	f := holdCommits(t, s)
	results := commitAll(ctx, s, ps)
	f.waitQueued(t, n)
	f.release(t)
	for range n {
		r := <-results
		if r.p == ps[1] {
			if !errors.Is(r.err, store.ErrFenced) {
				t.Errorf("fenced member: %v", r.err)
			}
		} else if r.err != nil {
			t.Errorf("member: %v", r.err)
		}
	}
	for _, p := range ps {
		got, err := s.JournalList(ctx, p.RunID, 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 2, false: 0}[p == ps[1]]; len(got) != want {
			t.Errorf("run %s: %d journal entries after the batch, want %d", p.RunID, len(got), want)
		}
	}
	if st := s.CommitStats(); st.Batches < 2 || st.Commits < n+1 {
		t.Errorf("commit stats %+v: the members were not written as a batch", st)
	}
}
