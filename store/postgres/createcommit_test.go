package postgres

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// createCommitCase returns a new run's create (a step-0 checkpoint of a
// small part and a large one) and its first commit (two events, the small
// part changed), at now.
func createCommitCase(id string, now time.Time) (*store.ResponseCreateParams, *store.CommitParams) {
	big := bytes.Repeat([]byte("big part "), 300)
	c := storetest.ResponseParams(&storetest.ResponseOpts{ID: "resp_" + id, RunID: "run_" + id, Now: now,
		Checkpoint: []store.Part{{Name: "state", Data: []byte("step-0")}, {Name: "big", Data: big}}})
	p := &store.CommitParams{RunID: c.RunID, ResponseID: c.Response.ID, Step: 1, Status: store.StatusInProgress,
		Checkpoint: []store.Part{{Name: "state", Data: []byte("step-1")}, {Name: "big", Data: big}}, Now: now,
		Snapshot: []byte(`{"step":1}`)}
	for seq := int64(1); seq <= 2; seq++ {
		p.Events = append(p.Events, store.EventInput{Seq: seq, Type: "delta", Payload: fmt.Appendf(nil, `{"seq":%d}`, seq)})
	}
	return c, p
}

// TestCreateCommit_SameRows: CreateCommit writes the rows ResponseCreate
// then Commit write (in another store, with the same ids and times), the
// checkpoint's manifest (what is inline, what a blob) and the lease's
// claim included.
func TestCreateCommit_SameRows(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC().Truncate(time.Microsecond)
	s, ref := newStore(t), newStore(t)
	c, p := createCommitCase("a", now)
	if _, _, err := s.CreateCommit(t.Context(), c, p); err != nil {
		t.Fatal(err)
	}
	c, p = createCommitCase("a", now)
	cr, err := ref.ResponseCreate(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	p.Epoch = cr.Run.Lease.Epoch
	if _, err := ref.Commit(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	if got, want := dumpCreated(t, s), dumpCreated(t, ref); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows differ:\n got  %v\n want %v", got, want)
	}
}

// TestCreateCommit_OneRoundTrip: CreateCommit is one pipeline (BEGIN,
// create, commit, COMMIT), with a checkpoint prune too; a failed one
// takes a ROLLBACK more. Its commit leaves the part cache trusted for the
// run's next commit, as Commit does.
func TestCreateCommit_OneRoundTrip(t *testing.T) {
	t.Parallel()
	rt := &roundTrips{}
	s := openStore(t, newSchemaName(t), &Options{tracer: rt})
	ctx := counted(t.Context())
	for _, tc := range []struct {
		name string
		mod  func(p *store.CommitParams)
		want int
	}{
		{name: "plain", want: 1},
		{name: "pruning", mod: func(p *store.CommitParams) { p.Status, p.Release, p.PruneKeep = store.StatusCompleted, true, 1 }, want: 1},
		{name: "failing", mod: func(p *store.CommitParams) { p.Step = 2 }, want: 2},
	} {
		c, p := createCommitCase(storetest.NewID(tc.name), time.Time{})
		if tc.mod != nil {
			tc.mod(p)
		}
		_, _, err := s.CreateCommit(ctx, c, p)
		if got := rt.take(); len(got) != tc.want {
			t.Errorf("%s: %d round trips %q, want %d", tc.name, len(got), got, tc.want)
		}
		if tc.name == "failing" {
			if !errors.Is(err, store.ErrConflict) {
				t.Errorf("%s: %v, want ErrConflict", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if _, trusted := s.parts.known(c.RunID, store.NewRunEpoch, 2); !trusted {
			t.Errorf("%s: the part cache is not trusted for step 2", tc.name)
		}
	}
}

// TestCreateCommit_FailedPipelineRollsBack: when the commit's statement
// fails, the pipeline's COMMIT is skipped and the create, acknowledged,
// is rolled back: nothing is left, and the connection goes back to the
// pool idle, not in a failed transaction (the pool would drop it).
func TestCreateCommit_FailedPipelineRollsBack(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	c, p := createCommitCase("a", time.Time{})
	p.Step, p.Epoch = 2, store.NewRunEpoch
	r := s.newCommitReq(ctx, p, encodeEvents(p.Events), encodeParts(p.Checkpoint, nil, false))
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	r.fused = newCreateCall(c, nil)
	err = s.createCommitPipelined(ctx, conn.Conn(), r)
	if !errors.Is(r.mapError(err), store.ErrConflict) || !r.created {
		t.Fatalf("pipeline: %v (create acknowledged: %v), want the commit's conflict after the create", err, r.created)
	}
	if st := conn.Conn().PgConn().TxStatus(); st != 'I' {
		t.Fatalf("connection left in transaction status %q, want idle", st)
	}
	if _, err := s.RunGet(ctx, c.RunID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RunGet after the failed pipeline: %v, want ErrNotFound", err)
	}
	for table, rows := range dumpCreated(t, s) {
		if rows != "[]" {
			t.Errorf("%s left %s", table, rows)
		}
	}
}

// TestGroupCommit_CreateCommitMembers: CreateCommits made while a batch is
// in flight ride the next batch with other runs' commits, each in its own
// savepoint after them: the good ones are written (a terminal one with
// its release and prune too), one whose commit is refused fails alone with
// ErrConflict and leaves nothing of its create, and the others' commits
// are not disturbed.
func TestGroupCommit_CreateCommitMembers(t *testing.T) {
	t.Parallel()
	s := oneBatchStore(t)
	ctx := t.Context()
	now := time.Now()
	var plain []*store.CommitParams
	for range 4 {
		c := storetest.CreateResponse(ctx, t, s, nil)
		plain = append(plain, storetest.NextCommit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{Events: 2}))
	}
	type fusedCase struct {
		c    *store.ResponseCreateParams
		p    *store.CommitParams
		fail bool
	}
	var fused []fusedCase
	for i := range 4 {
		c, p := createCommitCase(fmt.Sprintf("gcfused%d_%d", i, now.UnixNano()), now)
		c.Now, p.Now = time.Time{}, time.Time{} // each at its statement's time, as the host sends them
		fc := fusedCase{c: c, p: p}
		switch i {
		case 1:
			p.Step = 2 // not the step after the create's: refused
			fc.fail = true
		case 2:
			p.Status, p.Release, p.PruneKeep = store.StatusCompleted, true, 1
		}
		fused = append(fused, fc)
	}
	before := s.CommitStats()
	f := holdCommits(t, s)
	results := commitAll(ctx, s, plain)
	fusedErrs := make(chan error, len(fused))
	for _, fc := range fused {
		go func() {
			_, _, err := s.CreateCommit(ctx, fc.c, fc.p)
			fusedErrs <- err
		}()
	}
	f.waitQueued(t, len(plain)+len(fused))
	f.release(t)
	for range plain {
		if r := <-results; r.err != nil {
			t.Errorf("commit of run %s: %v", r.p.RunID, r.err)
		}
	}
	var conflicts int
	for range fused {
		err := <-fusedErrs
		switch {
		case errors.Is(err, store.ErrConflict):
			conflicts++
		case err != nil:
			t.Errorf("CreateCommit: %v", err)
		}
	}
	if conflicts != 1 {
		t.Errorf("%d CreateCommits refused, want 1", conflicts)
	}
	after := s.CommitStats()
	if got := after.Sizes[3] - before.Sizes[3]; got != 1 {
		t.Errorf("batches of 5 to 8 members: %d, want 1 (sizes %v -> %v)", got, before.Sizes, after.Sizes)
	}
	for _, p := range plain {
		if st := storetest.ReadRunState(ctx, t, s, p.RunID); st.Run.LastStep != 1 {
			t.Errorf("run %s: last step %d, want 1", p.RunID, st.Run.LastStep)
		}
	}
	for _, fc := range fused {
		run, err := s.RunGet(ctx, fc.c.RunID)
		if fc.fail {
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("run %s of the refused CreateCommit: %v, want ErrNotFound", fc.c.RunID, err)
			}
			if _, err := s.ResponseGet(ctx, fc.c.Response.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("response %s of the refused CreateCommit: %v, want ErrNotFound", fc.c.Response.ID, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("run %s: %v", fc.c.RunID, err)
		}
		terminal := fc.p.Status.Terminal()
		if run.LastStep != 1 || run.Active == terminal || (run.Lease.Owner == "") != terminal {
			t.Errorf("run %s: last step %d, active %v, owner %q (terminal %v)", run.ID, run.LastStep, run.Active, run.Lease.Owner, terminal)
		}
		evs, err := s.EventList(ctx, &store.EventListParams{ResponseID: fc.c.Response.ID, After: -1})
		if err != nil || len(evs) != 1+len(fc.p.Events) {
			t.Errorf("response %s: %d events (%v), want %d", fc.c.Response.ID, len(evs), err, 1+len(fc.p.Events))
		}
	}
	if err := store.Check(ctx, s); err != nil {
		t.Fatal(err)
	}
}
