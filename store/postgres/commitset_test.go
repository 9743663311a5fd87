package postgres

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// writes are the round trips in rt's list that write: the reads that
// explain a refusal (explainRefusal) are left out.
func writes(sql []string) []string {
	var out []string
	for _, q := range sql {
		if !strings.Contains(q, "cancel_requested") {
			out = append(out, q)
		}
	}
	return out
}

// TestGroupCommit_SetMemberFailsAlone: a batch of plain commits is one
// superstep_commit_batch statement (one round trip, no savepoint), and
// members that are fenced, do not follow their run's last step or name a
// run that does not exist fail alone, each with the error it would get
// alone, while the others are written.
func TestGroupCommit_SetMemberFailsAlone(t *testing.T) {
	t.Parallel()
	rt := &roundTrips{}
	s := openStore(t, newSchemaName(t), &Options{CommitBatchesInFlight: 1, tracer: rt})
	ctx := t.Context()
	const n = 8
	var ps []*store.CommitParams
	for range n {
		c := storetest.CreateResponse(ctx, t, s, nil)
		ps = append(ps, storetest.NextCommit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{Events: 2}))
	}
	fenced, skipped := ps[2], ps[5]
	epoch := fenced.Epoch
	fenced.Epoch++
	skipped.Step++ // not the run's next step
	gone := *ps[6]
	gone.RunID = storetest.NewID("run")
	all := append(ps[:n:n], &gone)
	before := s.CommitStats()
	f := holdCommits(t, s)
	rt.take()
	results := commitAll(counted(ctx), s, all)
	f.waitQueued(t, len(all))
	f.release(t)
	for range all {
		r := <-results
		switch r.p {
		case fenced:
			var fe *store.FencedError
			if !errors.As(r.err, &fe) || fe.CurrentEpoch != epoch || fe.Epoch != epoch+1 {
				t.Errorf("fenced member: %v, want a FencedError (epoch %d, current %d)", r.err, epoch+1, epoch)
			}
		case skipped:
			if !errors.Is(r.err, store.ErrConflict) || errors.Is(r.err, store.ErrFenced) ||
				!strings.Contains(r.err.Error(), "not the next step") {
				t.Errorf("member with a step after the next: %v, want ErrConflict (not the next step)", r.err)
			}
		case &gone:
			if !errors.Is(r.err, store.ErrNotFound) {
				t.Errorf("member of a missing run: %v, want ErrNotFound", r.err)
			}
		default:
			if r.err != nil {
				t.Errorf("member %s: %v", r.p.RunID, r.err)
			}
		}
	}
	if got := writes(rt.take()); len(got) != 1 || !strings.Contains(got[0], "superstep_commit_batch") {
		t.Errorf("batch of %d with three failing members: round trips %q, want one superstep_commit_batch", len(all), got)
	}
	after := s.CommitStats()
	// holdCommits' create is a batch of its own.
	if after.SetBatches-before.SetBatches != 1 || after.Batches-before.Batches-(after.Creates-before.Creates) != 2 {
		t.Errorf("commit stats %+v (before %+v): want the queued commits in one set batch", after, before)
	}
	for _, p := range ps {
		st := storetest.ReadRunState(ctx, t, s, p.RunID)
		want := int64(1)
		if p == fenced || p == skipped {
			want = 0
		}
		if st.Run.LastStep != want || int64(len(st.Events[p.ResponseID])) != 1+2*want || len(st.Checkpoints) != int(1+want) {
			t.Errorf("run %s: %s; want last step %d", p.RunID, st, want)
		}
	}
	if err := store.Check(ctx, s); err != nil {
		t.Fatal(err)
	}
}

// TestGroupCommit_SetDeclined: a member the set statement cannot refuse
// alone (its events do not continue the log; a part it sends by reference
// is gone) makes the store write the batch again member by member: that
// member fails (or, for the part, is retried with its bytes) and the
// others are written once.
func TestGroupCommit_SetDeclined(t *testing.T) {
	t.Parallel()
	s := oneBatchStore(t)
	ctx := t.Context()
	const n = 5
	var ps []*store.CommitParams
	for range n {
		c := storetest.CreateResponse(ctx, t, s, nil)
		ps = append(ps, storetest.NextCommit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{Events: 1}))
	}
	invalid, stale := ps[1], ps[3]
	invalid.Events[0].Seq += 3
	// stale sends a part by reference that the run does not store (as
	// after a prune by another host): the store's cache says it does.
	extra := store.Part{Name: "extra", Data: []byte("never stored")}
	stale.Checkpoint = append(stale.Checkpoint, extra)
	s.parts.set(stale.RunID, map[hash]bool{sha256.Sum256(extra.Data): true}, trustNone, 0)
	before := s.CommitStats()
	f := holdCommits(t, s)
	results := commitAll(ctx, s, ps)
	f.waitQueued(t, n)
	f.release(t)
	for range n {
		r := <-results
		if r.p == invalid {
			if !errors.Is(r.err, store.ErrConflict) {
				t.Errorf("member whose events do not continue the log: %v, want ErrConflict", r.err)
			}
		} else if r.err != nil {
			t.Errorf("member %s: %v", r.p.RunID, r.err)
		}
	}
	if got := s.CommitStats(); got.SetBatches != before.SetBatches || got.SetDeclined <= before.SetDeclined {
		t.Errorf("commit stats %+v: a declined batch counted as a set batch, or not counted as declined", got)
	}
	for _, p := range ps {
		st := storetest.ReadRunState(ctx, t, s, p.RunID)
		want := int64(1)
		if p == invalid {
			want = 0
		}
		if st.Run.LastStep != want || int64(len(st.Events[p.ResponseID])) != 1+want {
			t.Errorf("run %s: %s; want last step %d", p.RunID, st, want)
		}
	}
	if err := store.Check(ctx, s); err != nil {
		t.Fatal(err)
	}
}

// TestCommit_PruneOneRoundTrip: a lone commit that also prunes the run's
// checkpoints (as the one finishing a response does) is one statement,
// alone or with group commit, and reports what it pruned; a fenced one
// prunes nothing.
func TestCommit_PruneOneRoundTrip(t *testing.T) {
	t.Parallel()
	for _, group := range []bool{false, true} {
		t.Run(map[bool]string{false: "Alone", true: "GroupCommit"}[group], func(t *testing.T) {
			rt := &roundTrips{}
			s := openStore(t, newSchemaName(t), &Options{NoGroupCommit: !group, tracer: rt})
			ctx := t.Context()
			c := storetest.CreateResponse(ctx, t, s, nil)
			for range 3 {
				storetest.Commit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{NoEvents: true})
			}
			fenced := storetest.NextCommit(ctx, t, s, c.Run.ID, nil)
			fenced.Epoch++
			fenced.PruneKeep = 1
			if _, err := s.Commit(counted(ctx), fenced); !errors.Is(err, store.ErrFenced) {
				t.Fatalf("fenced commit: %v, want ErrFenced", err)
			}
			if st := storetest.ReadRunState(ctx, t, s, c.Run.ID); len(st.Checkpoints) != 4 {
				t.Errorf("after the fenced commit: %s, want 4 checkpoints", st)
			}
			rt.take()
			p := storetest.NextCommit(ctx, t, s, c.Run.ID, nil)
			p.PruneKeep = 1
			res, err := s.Commit(counted(ctx), p)
			if err != nil {
				t.Fatal(err)
			}
			if got := rt.take(); len(got) != 1 {
				t.Errorf("commit with a prune: %d round trips %q, want 1", len(got), got)
			}
			// Steps 0 to 4: 4 is kept (the last, and the response's
			// commit step), the others are pruned.
			st := storetest.ReadRunState(ctx, t, s, c.Run.ID)
			if res.Pruned != 4 || len(st.Checkpoints) != 1 || st.Run.LastStep != 4 {
				t.Errorf("pruned %d; after: %s", res.Pruned, st)
			}
			if err := store.Check(ctx, s); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestMigrateCommitBatch: a schema of version 13 (before
// superstep_commit_batch) holding a run midway opens, gains the function,
// and the run's next commits (one that prunes, then a batch) use it.
func TestMigrateCommitBatch(t *testing.T) {
	t.Parallel()
	schema := newSchemaName(t)
	ctx := t.Context()
	s := openStore(t, schema, nil)
	c := storetest.CreateResponse(ctx, t, s, nil)
	storetest.Commit(ctx, t, s, c.Run.ID, nil)
	undoStepRows(t, s)
	if _, err := s.pool.Exec(ctx, undoCommitBatch+"DELETE FROM superstep_schema_version WHERE version >= 14"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, schema, &Options{CommitBatchesInFlight: 1})
	var v int
	if err := s.pool.QueryRow(ctx, "SELECT max(version) FROM superstep_schema_version").Scan(&v); err != nil || v != latestVersion(t) {
		t.Fatalf("schema version after reopen %d (%v), want %d", v, err, latestVersion(t))
	}
	p := storetest.NextCommit(ctx, t, s, c.Run.ID, nil)
	p.PruneKeep = 1
	if res, err := s.Commit(ctx, p); err != nil || res.Pruned != 2 {
		t.Fatalf("commit with a prune after the migration: %+v, %v; want 2 pruned (steps 0 and 1)", res, err)
	}
	var ps []*store.CommitParams
	for range 3 {
		o := storetest.CreateResponse(ctx, t, s, nil)
		ps = append(ps, storetest.NextCommit(ctx, t, s, o.Run.ID, nil))
	}
	ps = append(ps, storetest.NextCommit(ctx, t, s, c.Run.ID, nil))
	f := holdCommits(t, s)
	results := commitAll(ctx, s, ps)
	f.waitQueued(t, len(ps))
	f.release(t)
	for range ps {
		if r := <-results; r.err != nil {
			t.Errorf("member %s: %v", r.p.RunID, r.err)
		}
	}
	if st := s.CommitStats(); st.SetBatches != 1 {
		t.Errorf("commit stats %+v: want one set batch", st)
	}
	if st := storetest.ReadRunState(ctx, t, s, c.Run.ID); st.Run.LastStep != 3 || len(st.Events[c.Response.ID]) != 7 {
		t.Errorf("run written across the migration: %s", st)
	}
	checkStore(t, s)
}
