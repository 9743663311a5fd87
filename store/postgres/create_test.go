package postgres

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// createTables are the tables a create writes, dumped by dumpCreated.
var createTables = []string{"runs", "lease_claims", "responses", "event_records", "checkpoints", "blobs"}

// dumpCreated returns the rows of createTables in s's schema as JSON, in
// a stable order and without responses.ord (a sequence's draw).
func dumpCreated(t *testing.T, s *Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, table := range createTables {
		var js string
		err := s.pool.QueryRow(t.Context(), `SELECT coalesce(jsonb_agg(j ORDER BY j::text), '[]')::text
			FROM (SELECT to_jsonb(x) - 'ord' AS j FROM `+table+` x) AS y`).Scan(&js)
		if err != nil {
			t.Fatal(err)
		}
		out[table] = js
	}
	return out
}

// createCase is a ResponseCreate made in a store and in a reference store
// that takes the transaction path for every create (Options.createInTx).
type createCase struct {
	name   string
	before func(p *store.ResponseCreateParams) []*store.ResponseCreateParams // creates made first, in both
	params func() *store.ResponseCreateParams
	want   error // nil for a success
}

// TestCreateNewRun_SameAsTransaction: the one statement of a new run's
// create (superstep_create, migration 019) writes the rows the
// transaction of several statements writes, returns the same result, and
// fails with the same errors, writing nothing then.
func TestCreateNewRun_SameAsTransaction(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC().Truncate(time.Microsecond) // the one time of both stores; commits follow, on the clock
	base := func(mod func(p *store.ResponseCreateParams)) func() *store.ResponseCreateParams {
		return func() *store.ResponseCreateParams {
			p := storetest.ResponseParams(&storetest.ResponseOpts{ID: "resp_a", RunID: "run_a", Now: now})
			if mod != nil {
				mod(p)
			}
			return p
		}
	}
	existing := func(id, run string) func(*store.ResponseCreateParams) []*store.ResponseCreateParams {
		return func(*store.ResponseCreateParams) []*store.ResponseCreateParams {
			return []*store.ResponseCreateParams{storetest.ResponseParams(&storetest.ResponseOpts{ID: id, RunID: run, Now: now})}
		}
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 4096) // a blob, not inline
	cases := []createCase{
		{name: "Default", params: base(nil)},
		{name: "NoCheckpointNoLease", params: base(func(p *store.ResponseCreateParams) {
			p.Checkpoint, p.LeaseOwner, p.LeaseDuration = nil, "", 0
		})},
		{name: "EmptyCheckpoint", params: base(func(p *store.ResponseCreateParams) { p.Checkpoint = []store.Part{} })},
		{name: "BlobParts", params: base(func(p *store.ResponseCreateParams) {
			p.Checkpoint = []store.Part{{Name: "a", Data: big}, {Name: "b", Data: big}, {Name: "c", Data: []byte("small")}}
		})},
		{name: "NoEvents", params: base(func(p *store.ResponseCreateParams) { p.Events = nil })},
		{name: "ManyEvents", params: base(func(p *store.ResponseCreateParams) {
			for i := 1; i < 5; i++ {
				p.Events = append(p.Events, store.EventInput{Seq: int64(i), Type: "t", Payload: bytes.Repeat([]byte{'x'}, i*100)})
			}
		})},
		{name: "Terminal", params: base(func(p *store.ResponseCreateParams) {
			p.Response.Status = store.StatusCompleted
		})},
		{name: "Queued", params: base(func(p *store.ResponseCreateParams) {
			p.Response.Status, p.LeaseOwner = store.StatusQueued, ""
		})},
		{name: "AllFacts", params: base(func(p *store.ResponseCreateParams) {
			r := p.Response
			r.Owner, r.CreatedAt, r.Error, r.Usage = "owner-1", now.Add(-time.Second), []byte(`{"e":1}`), []byte(`{"u":2}`)
			r.CancelRequested, r.Publication, r.Input, r.TraceContext = true, "live", []byte(`[1]`), "00-abc-def-01"
			r.Snapshot = bytes.Repeat([]byte("s"), 5000) // long: stored by reference to response.created (snapref)
			p.Events[0].Payload = r.Snapshot
		})},
		{name: "Fork", params: base(func(p *store.ResponseCreateParams) {
			p.ForkedFrom = &store.ForkPoint{RunID: "run_origin", Step: 3}
		})},
		{name: "RunExists", before: existing("resp_other", "run_a"), params: base(nil), want: store.ErrConflict},
		{name: "RunExistsNoLease", before: existing("resp_other", "run_a"), want: store.ErrConflict,
			params: base(func(p *store.ResponseCreateParams) { p.LeaseOwner, p.LeaseDuration = "", 0 })},
		{name: "ResponseExists", before: existing("resp_a", "run_other"), params: base(nil), want: store.ErrConflict},
		{name: "ResponseExistsFork", before: existing("resp_a", "run_other"), want: store.ErrConflict,
			params: base(func(p *store.ResponseCreateParams) { p.ForkedFrom = &store.ForkPoint{RunID: "run_other", Step: 0} })},
		{name: "BothExist", before: existing("resp_a", "run_a"), params: base(nil), want: store.ErrConflict},
		{name: "FirstSeqNotZero", params: base(func(p *store.ResponseCreateParams) { p.Events[0].Seq = 1 }), want: store.ErrConflict},
		{name: "InvalidStatus", params: base(func(p *store.ResponseCreateParams) { p.Response.Status = "bogus" }),
			want: errors.New("invalid status")},
	}
	// Both ways of writing the one statement: by the group commit's
	// committer (the default; a lone create is a batch of one) and by
	// createNewRun (NoGroupCommit).
	modes := []struct {
		name string
		opts func() *Options
	}{{"GroupCommit", func() *Options { return nil }}, {"NoGroupCommit", func() *Options { return &Options{NoGroupCommit: true} }}}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			sameAsTransaction(t, cases, mode.opts)
		})
	}
}

// sameAsTransaction runs TestCreateNewRun_SameAsTransaction's cases in
// stores opened with opts.
func sameAsTransaction(t *testing.T, cases []createCase, opts func() *Options) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s := openStore(t, newSchemaName(t), opts())
			ref := openStore(t, newSchemaName(t), &Options{createInTx: true})
			var results [2]*store.ResponseCreateResult
			var errs [2]error
			for i, st := range []*Store{s, ref} {
				p := c.params()
				if c.before != nil {
					for _, q := range c.before(p) {
						if _, err := st.ResponseCreate(ctx, q); err != nil {
							t.Fatal(err)
						}
					}
				}
				results[i], errs[i] = st.ResponseCreate(ctx, p)
			}
			switch {
			case c.want == nil:
				if errs[0] != nil || errs[1] != nil {
					t.Fatalf("create: %v; in a transaction: %v", errs[0], errs[1])
				}
				if !reflect.DeepEqual(results[0], results[1]) {
					t.Errorf("result\n%+v\n%+v\nin a transaction\n%+v\n%+v", results[0].Run, results[0].Response,
						results[1].Run, results[1].Response)
				}
			case errors.Is(c.want, store.ErrConflict):
				if !errors.Is(errs[0], c.want) || !errors.Is(errs[1], c.want) {
					t.Fatalf("create: %v; in a transaction: %v; want %v", errs[0], errs[1], c.want)
				}
			default:
				if errs[0] == nil || errs[1] == nil || !strings.Contains(errs[0].Error(), c.want.Error()) ||
					errs[0].Error() != errs[1].Error() {
					t.Fatalf("create: %v; in a transaction: %v; want %q", errs[0], errs[1], c.want)
				}
			}
			got, want := dumpCreated(t, s), dumpCreated(t, ref)
			for _, table := range createTables {
				if got[table] != want[table] {
					t.Errorf("%s:\n%s\nin a transaction:\n%s", table, got[table], want[table])
				}
			}
			if c.want == nil {
				// What was written reads back, through the part cache and
				// without it.
				if r := results[0]; r.Run.Lease.Owner != "" && r.Run.Active {
					storetest.Commit(ctx, t, s, "run_a", nil)
				}
				if err := store.Check(ctx, s); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestCreateNewRun_OneRoundTrip: the create of a new run is one round
// trip; the other creates (here one with an idempotency key) keep their
// transaction.
func TestCreateNewRun_OneRoundTrip(t *testing.T) {
	t.Parallel()
	rt := &roundTrips{}
	s := openStore(t, newSchemaName(t), &Options{tracer: rt})
	ctx := counted(t.Context())
	if _, err := s.ResponseCreate(ctx, storetest.ResponseParams(nil)); err != nil {
		t.Fatal(err)
	}
	if got := rt.take(); len(got) != 1 {
		t.Errorf("create of a new run: %d round trips %q, want 1", len(got), got)
	}
	p := storetest.ResponseParams(nil)
	p.IdempotencyKey = "k"
	if _, err := s.ResponseCreate(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := rt.take(); len(got) < 3 || got[0] != "begin" {
		t.Errorf("create with an idempotency key: round trips %q, want a transaction", got)
	}
}

// TestCreateNewRun_DatabaseClock: without Now, the one statement takes
// every time from the database's clock, once: the run's, the claim's, the
// response's and the checkpoint's are one instant, and the lease expires
// LeaseDuration after it.
func TestCreateNewRun_DatabaseClock(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	p := storetest.ResponseParams(nil)
	p.Response.CreatedAt = time.Time{}
	res, err := s.ResponseCreate(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	run, resp := res.Run, res.Response
	claims, err := s.RunClaims(ctx, run.ID)
	if err != nil || len(claims) != 1 {
		t.Fatalf("claims %+v, %v", claims, err)
	}
	cp, err := s.CheckpointGetLast(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	at := run.CreatedAt
	if !run.UpdatedAt.Equal(at) || !resp.CreatedAt.Equal(at) || !resp.UpdatedAt.Equal(at) || !claims[0].ClaimedAt.Equal(at) ||
		!cp.CreatedAt.Equal(at) || !run.Lease.ExpiresAt.Equal(at.Add(p.LeaseDuration)) || time.Since(at) > time.Minute {
		t.Errorf("times: run %+v, response %v %v, claim %v, checkpoint %v", run, resp.CreatedAt, resp.UpdatedAt,
			claims[0].ClaimedAt, cp.CreatedAt)
	}
}

// TestMigrateCreateFunction: a schema of version 18 (before
// superstep_create) opens with this build, gains the function, and a new
// run's create uses it (one round trip) and commits.
func TestMigrateCreateFunction(t *testing.T) {
	t.Parallel()
	schema := newSchemaName(t)
	ctx := t.Context()
	pool := migrateSchemaTo(t, schema, 18)
	var has bool
	if err := pool.QueryRow(ctx, "SELECT to_regproc('superstep_create') IS NOT NULL").Scan(&has); err != nil || has {
		t.Fatalf("version 18 has superstep_create: %v, %v", has, err)
	}
	rt := &roundTrips{}
	s := openStore(t, schema, &Options{tracer: rt})
	var v int
	if err := s.pool.QueryRow(ctx, "SELECT max(version) FROM superstep_schema_version").Scan(&v); err != nil || v != latestVersion(t) {
		t.Fatalf("schema version after open %d (%v), want %d", v, err, latestVersion(t))
	}
	res, err := s.ResponseCreate(counted(ctx), storetest.ResponseParams(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := rt.take(); len(got) != 1 {
		t.Errorf("create after the migration: %d round trips %q, want 1", len(got), got)
	}
	storetest.Commit(ctx, t, s, res.Run.ID, &storetest.CommitOpts{Status: store.StatusCompleted})
	checkStore(t, s)
}

// TestGroupCommit_CreatesRide: creates of new runs made while a batch is
// in flight are written in the next batch's transaction with the commits
// queued then; each returns what it returns alone (the same result as the
// transaction path's, for the same parameters), and one that conflicts
// fails alone with ErrConflict, writing nothing, the others written.
func TestGroupCommit_CreatesRide(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := oneBatchStore(t)
	ref := openStore(t, newSchemaName(t), &Options{createInTx: true})
	now := time.Now().UTC().Truncate(time.Microsecond) // the one time of both stores; commits follow, on the clock
	var commits []*store.CommitParams
	for range 3 {
		c := storetest.CreateResponse(ctx, t, s, nil)
		commits = append(commits, storetest.NextCommit(ctx, t, s, c.Run.ID, nil))
	}
	taken := storetest.CreateResponse(ctx, t, s, nil)
	opts := []*storetest.ResponseOpts{{ID: "resp_1", RunID: "run_1", Now: now},
		{ID: "resp_2", RunID: "run_2", Now: now, NoLease: true, NoCheckpoint: true},
		{ID: "resp_3", RunID: "run_3", Now: now, Owner: "o"}}
	var creates []*store.ResponseCreateParams
	for _, o := range opts {
		creates = append(creates, storetest.ResponseParams(o))
	}
	creates[2].ForkedFrom = &store.ForkPoint{RunID: "run_x", Step: 2}
	runExists := storetest.ResponseParams(&storetest.ResponseOpts{RunID: taken.Run.ID})
	respExists := storetest.ResponseParams(&storetest.ResponseOpts{ID: taken.Response.ID})
	dbClock := storetest.ResponseParams(nil)
	dbClock.Response.CreatedAt = time.Time{}
	all := append(slices.Clone(creates), runExists, respExists, dbClock)

	f := holdCommits(t, s)
	before := s.CommitStats()
	type createResult struct {
		p   *store.ResponseCreateParams
		res *store.ResponseCreateResult
		err error
	}
	created := make(chan createResult, len(all))
	for _, p := range all {
		go func() {
			res, err := s.ResponseCreate(ctx, p)
			created <- createResult{p, res, err}
		}()
	}
	committed := commitAll(ctx, s, commits)
	f.waitQueued(t, len(all)+len(commits))
	f.release(t)
	for range commits {
		if r := <-committed; r.err != nil {
			t.Errorf("commit of run %s: %v", r.p.RunID, r.err)
		}
	}
	for range all {
		r := <-created
		switch r.p {
		case runExists, respExists:
			if !errors.Is(r.err, store.ErrConflict) {
				t.Errorf("create %s in run %s: %v, want ErrConflict", r.p.Response.ID, r.p.RunID, r.err)
			}
		case dbClock:
			if r.err != nil {
				t.Fatal(r.err)
			}
			run, resp := r.res.Run, r.res.Response
			if !run.UpdatedAt.Equal(run.CreatedAt) || !resp.CreatedAt.Equal(run.CreatedAt) || !resp.UpdatedAt.Equal(run.CreatedAt) ||
				!run.Lease.ExpiresAt.Equal(run.CreatedAt.Add(r.p.LeaseDuration)) || time.Since(run.CreatedAt) > time.Minute {
				t.Errorf("create on the database's clock: run %+v, response %+v", run, resp)
			}
		default:
			if r.err != nil {
				t.Fatalf("create %s: %v", r.p.Response.ID, r.err)
			}
			want, err := ref.ResponseCreate(ctx, r.p)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.res, want) {
				t.Errorf("create %s in a batch:\n%+v\n%+v\nin a transaction:\n%+v\n%+v", r.p.Response.ID,
					r.res.Run, r.res.Response, want.Run, want.Response)
			}
		}
	}
	after := s.CommitStats()
	if after.Creates-before.Creates != int64(len(all)) || after.Commits-before.Commits != int64(len(commits)) ||
		after.Batches-before.Batches != 1 || after.Sizes[4]-before.Sizes[4] != 1 {
		t.Errorf("commit stats %+v (before %+v, the lone commit counted): want one batch of %d creates and %d commits",
			after, before, len(all), len(commits))
	}
	// The batch was tried without savepoints (the set statement and the
	// creates), undone by the conflicting creates, and written again in
	// savepoints.
	if after.CreateDeclined-before.CreateDeclined != 1 || after.SetDeclined != before.SetDeclined ||
		after.SetBatches != before.SetBatches || after.CreateBatches != before.CreateBatches {
		t.Errorf("commit stats %+v (before %+v): want one batch declined by a create", after, before)
	}
	if _, err := s.RunGet(ctx, respExists.RunID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("run of the create whose response exists: %v, want ErrNotFound", err)
	}
	if run, err := s.RunGet(ctx, taken.Run.ID); err != nil || run.HeadResponseID != taken.Response.ID {
		t.Errorf("run the refused create named: %+v, %v", run, err)
	}
	for _, p := range append(creates[:1], dbClock) {
		storetest.Commit(ctx, t, s, p.RunID, nil) // the part cache was filled by the create
	}
	checkStore(t, s)
}

// TestGroupCommit_CreatesWithSetCommits: a batch of creates and plain
// commits is one round trip, one transaction without savepoints (the
// creates' statements and one superstep_commit_batch statement); a
// fenced commit fails alone there, the others written.
func TestGroupCommit_CreatesWithSetCommits(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rt := &roundTrips{}
	s := openStore(t, newSchemaName(t), &Options{CommitBatchesInFlight: 1, tracer: rt})
	var commits []*store.CommitParams
	for range 3 {
		c := storetest.CreateResponse(ctx, t, s, nil)
		commits = append(commits, storetest.NextCommit(ctx, t, s, c.Run.ID, nil))
	}
	fenced := commits[1]
	fenced.Epoch++
	var creates []*store.ResponseCreateParams
	for range 3 {
		creates = append(creates, storetest.ResponseParams(nil))
	}
	f := holdCommits(t, s)
	before := s.CommitStats()
	rt.take()
	created := make(chan error, len(creates))
	for _, p := range creates {
		go func() {
			_, err := s.ResponseCreate(counted(ctx), p)
			created <- err
		}()
	}
	committed := commitAll(counted(ctx), s, commits)
	f.waitQueued(t, len(creates)+len(commits))
	f.release(t)
	for range creates {
		if err := <-created; err != nil {
			t.Errorf("create: %v", err)
		}
	}
	for range commits {
		r := <-committed
		if r.p == fenced {
			if !errors.Is(r.err, store.ErrFenced) {
				t.Errorf("fenced commit: %v, want ErrFenced", r.err)
			}
		} else if r.err != nil {
			t.Errorf("commit of run %s: %v", r.p.RunID, r.err)
		}
	}
	if got := rt.take(); len(got) != 1 {
		t.Errorf("batch of creates and commits: %d round trips %q, want 1", len(got), got)
	}
	after := s.CommitStats()
	if after.SetBatches-before.SetBatches != 1 || after.SetDeclined != before.SetDeclined ||
		after.Creates-before.Creates != int64(len(creates)) || after.Batches-before.Batches != 1 {
		t.Errorf("commit stats %+v (before %+v): want one set batch of the creates and commits", after, before)
	}
	for _, p := range creates {
		if run, err := s.RunGet(ctx, p.RunID); err != nil || run.HeadResponseID != p.Response.ID || run.Lease.Epoch != 1 {
			t.Errorf("created run %s: %+v, %v", p.RunID, run, err)
		}
		storetest.Commit(ctx, t, s, p.RunID, nil)
	}
	for _, p := range commits {
		want := int64(1)
		if p == fenced {
			want = 0
		}
		if st := storetest.ReadRunState(ctx, t, s, p.RunID); st.Run.LastStep != want {
			t.Errorf("run %s: last step %d, want %d", p.RunID, st.Run.LastStep, want)
		}
	}
	checkStore(t, s)
}

// TestGroupCommit_CreateAfterCommits: a create that rides a batch runs
// after the batch's commits, so after any wait of theirs for a run's row:
// its times (its lease's expiry among them) are not before that wait
// ended, so it does not return with a lease that ran out while the batch
// waited. Both ways of writing a batch: the set statement with the
// creates, and savepoints (a commit with webhooks). The create's run
// sorts before the commit's, so run order alone would put it first. It
// also shows that a batched create's times are its statement's
// (statement_timestamp), not the batch transaction's start (now()),
// which precedes the wait: it fails with either reverted.
func TestGroupCommit_CreateAfterCommits(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"set", "savepoints"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s := oneBatchStore(t)
			x := storetest.CreateResponse(ctx, t, s, nil)
			o := &storetest.CommitOpts{}
			if path == "savepoints" {
				o.Status = store.StatusCompleted
			}
			px := storetest.NextCommit(ctx, t, s, x.Run.ID, o)
			if path == "savepoints" {
				px.Webhooks = []store.WebhookInput{{EventID: storetest.NewID("evt"), Type: "response.completed", Endpoint: "http://hooks.test/a"}}
			}
			pr := storetest.ResponseParams(&storetest.ResponseOpts{RunID: "a" + storetest.NewID("run")})
			pr.Response.CreatedAt = time.Time{} // the database's clock
			blocker := lockRun(t, s, x.Run.ID)
			f := holdCommits(t, s)
			before := s.CommitStats()
			committed := commitAll(ctx, s, []*store.CommitParams{px})
			type createResult struct {
				res *store.ResponseCreateResult
				err error
			}
			created := make(chan createResult, 1)
			go func() {
				res, err := s.ResponseCreate(ctx, pr)
				created <- createResult{res, err}
			}()
			f.waitQueued(t, 2)
			f.release(t)
			// The batch's commit of x waits for x's row.
			waitLocked(t, blocker, s, "superstep_commit", 1)
			var waited time.Time
			if err := blocker.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&waited); err != nil {
				t.Fatal(err)
			}
			rollback(t, blocker)
			if r := <-committed; r.err != nil {
				t.Fatalf("commit of run %s: %v", x.Run.ID, r.err)
			}
			r := <-created
			if r.err != nil {
				t.Fatal(r.err)
			}
			run := r.res.Run
			if run.CreatedAt.Before(waited) || !run.Lease.ExpiresAt.Equal(run.CreatedAt.Add(pr.LeaseDuration)) {
				t.Errorf("create in the batch at %v, lease until %v: before the commit's wait ended (after %v)",
					run.CreatedAt, run.Lease.ExpiresAt, waited)
			}
			after := s.CommitStats()
			if sets := after.SetBatches - before.SetBatches; after.Batches-before.Batches != 1 || after.Creates-before.Creates != 1 ||
				after.Commits-before.Commits != 1 || (sets == 1) != (path == "set") {
				t.Errorf("commit stats %+v (before %+v): want one batch of the commit and the create", after, before)
			}
			checkStore(t, s)
		})
	}
}

// TestGroupCommit_CreatesOnly: creates queued together with no commit
// are one batch written without savepoints, counted as CreateBatches,
// not as a set batch.
func TestGroupCommit_CreatesOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := oneBatchStore(t)
	f := holdCommits(t, s)
	before := s.CommitStats()
	var creates []*store.ResponseCreateParams
	for range 3 {
		creates = append(creates, storetest.ResponseParams(nil))
	}
	created := make(chan error, len(creates))
	for _, p := range creates {
		go func() {
			_, err := s.ResponseCreate(ctx, p)
			created <- err
		}()
	}
	f.waitQueued(t, len(creates))
	f.release(t)
	for range creates {
		if err := <-created; err != nil {
			t.Errorf("create: %v", err)
		}
	}
	after := s.CommitStats()
	if after.CreateBatches-before.CreateBatches != 1 || after.SetBatches != before.SetBatches ||
		after.SetDeclined != before.SetDeclined || after.CreateDeclined != before.CreateDeclined ||
		after.Batches-before.Batches != 1 || after.Creates-before.Creates != int64(len(creates)) || after.Commits != before.Commits {
		t.Errorf("commit stats %+v (before %+v): want one batch of %d creates", after, before, len(creates))
	}
	for _, p := range creates {
		storetest.Commit(ctx, t, s, p.RunID, nil)
	}
	checkStore(t, s)
}
