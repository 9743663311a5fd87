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
		if _, trusted := s.parts.known(c.RunID, newRunEpoch, 2); !trusted {
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
	p.Step, p.Epoch = 2, newRunEpoch
	r := s.newCommitReq(ctx, p, encodeEvents(p.Events), encodeParts(p.Checkpoint, nil, false))
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	created := false
	err = s.createCommitPipelined(ctx, conn.Conn(), newCreateCall(c, nil), r, &created)
	if !errors.Is(r.mapError(err), store.ErrConflict) || !created {
		t.Fatalf("pipeline: %v (create acknowledged: %v), want the commit's conflict after the create", err, created)
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
