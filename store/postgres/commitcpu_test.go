package postgres

import (
	"errors"
	"strings"
	"testing"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// undoCommitCPU puts back the commit functions of version 17 (as migration
// 016 made them) in place of migration 018's.
func undoCommitCPU(t *testing.T) string {
	t.Helper()
	b, err := migrationFS.ReadFile("migration/016_step_rows.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	i := strings.Index(src, "CREATE FUNCTION superstep_write_step(")
	j := strings.Index(src, "-- superstep_append_batch")
	if i < 0 || j < i {
		t.Fatal("migration 016: superstep_write_step .. superstep_commit_batch not found")
	}
	sql := strings.ReplaceAll(src[i:j], "CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")
	// The DROPs are of version 15's signatures, gone by now.
	return strings.ReplaceAll(sql, "DROP FUNCTION", "DROP FUNCTION IF EXISTS")
}

// TestMigrateCommitCPU: a schema of version 17 holding runs midway (their
// commits written by version 17's functions) opens, gets migration 018's
// commit functions, and the runs go on: a lone commit with events and a
// new part, a batch with a fenced member that fails alone, and the first
// commit of a run without a step-0 checkpoint, whose parent is none (-1).
func TestMigrateCommitCPU(t *testing.T) {
	t.Parallel()
	schema := newSchemaName(t)
	ctx := t.Context()
	s := openStore(t, schema, nil)
	if _, err := s.pool.Exec(ctx, undoCommitCPU(t)+"; DELETE FROM superstep_schema_version WHERE version >= 18"); err != nil {
		t.Fatal(err)
	}
	if v := schemaVersionOf(t, s); v != 17 {
		t.Fatalf("schema version %d after the undo, want 17", v)
	}
	// Runs midway, written by version 17's superstep_commit.
	var runs []*store.ResponseCreateResult
	for range 3 {
		c := storetest.CreateResponse(ctx, t, s, nil)
		storetest.Commit(ctx, t, s, c.Run.ID, nil)
		storetest.Commit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{NoEvents: true})
		runs = append(runs, c)
	}
	bare := storetest.CreateResponse(ctx, t, s, nil)
	if _, err := s.pool.Exec(ctx, "DELETE FROM checkpoints WHERE run_id = $1", bare.Run.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, schema, &Options{CommitBatchesInFlight: 1})
	if v := schemaVersionOf(t, s); v < 18 || v != latestVersion(t) {
		t.Fatalf("schema version %d after Open, want the latest, %d (at least 18)", v, latestVersion(t))
	}
	var config []string
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(proconfig, '{}') FROM pg_proc
		WHERE proname = 'superstep_write_step' AND pronamespace = $1::regnamespace`, schema).Scan(&config); err != nil || len(config) != 0 {
		t.Fatalf("superstep_write_step's settings after the migration: %q, %v; want none", config, err)
	}
	// A lone commit with events and a new part.
	p := storetest.NextCommit(ctx, t, s, runs[0].Run.ID, &storetest.CommitOpts{Events: 3,
		Checkpoint: storetest.Parts(2, 3000, 7)})
	if _, err := s.Commit(ctx, p); err != nil {
		t.Fatalf("lone commit after the migration: %v", err)
	}
	// A batch: the runs' next steps and the bare run's first, one member fenced.
	var ps []*store.CommitParams
	for _, c := range runs {
		ps = append(ps, storetest.NextCommit(ctx, t, s, c.Run.ID, nil))
	}
	ps = append(ps, storetest.NextCommit(ctx, t, s, bare.Run.ID, nil))
	fenced := ps[1]
	fenced.Epoch++
	f := holdCommits(t, s)
	results := commitAll(ctx, s, ps)
	f.waitQueued(t, len(ps))
	f.release(t)
	for range ps {
		r := <-results
		if r.p == fenced {
			if !errors.Is(r.err, store.ErrFenced) {
				t.Errorf("fenced member: %v, want ErrFenced", r.err)
			}
		} else if r.err != nil {
			t.Errorf("member %s: %v", r.p.RunID, r.err)
		}
	}
	if st := s.CommitStats(); st.SetBatches != 1 {
		t.Errorf("commit stats %+v: want one set batch", st)
	}
	for i, c := range runs {
		// The create's event, then the commits' (none at step 2).
		want, events := int64(3), 1+2+2
		switch i {
		case 0:
			want, events = 4, 1+2+3+2
		case 1:
			want, events = 2, 1+2 // fenced
		}
		st := storetest.ReadRunState(ctx, t, s, c.Run.ID)
		if st.Run.LastStep != want || len(st.Events[c.Response.ID]) != events {
			t.Errorf("run %d written across the migration: %s; want last step %d, %d events", i, st, want, events)
		}
	}
	requireCheckpoints(t, s, runs[0].Run.ID, map[int64][]store.Part{3: p.Checkpoint}, "lone commit")
	st := storetest.ReadRunState(ctx, t, s, bare.Run.ID)
	if len(st.Checkpoints) != 1 || st.Checkpoints[0].Step != 1 || st.Checkpoints[0].ParentStep != -1 {
		t.Errorf("first commit of a run without a step-0 checkpoint: checkpoints %+v, want step 1 with parent -1", st.Checkpoints)
	}
	checkStore(t, s)
}
