package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// TestCommitRace has two stores (two hosts) on one schema commit the same
// step under the same epoch many times: exactly one wins each step and the
// loser gets ErrConflict.
func TestCommitRace(t *testing.T) {
	t.Parallel()
	schema := newSchemaName(t)
	a, b := openStore(t, schema, nil), openStore(t, schema, nil)
	ctx := t.Context()
	res := storetest.CreateResponse(ctx, t, a, nil)
	for step := int64(1); step <= 20; step++ {
		pa := storetest.NextCommit(ctx, t, a, res.Run.ID, &storetest.CommitOpts{Checkpoint: storetest.Parts(2, 64, 'a')})
		pb := storetest.NextCommit(ctx, t, b, res.Run.ID, &storetest.CommitOpts{Checkpoint: storetest.Parts(2, 64, 'b')})
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, p := range []struct {
			s store.Store
			p *store.CommitParams
		}{{a, pa}, {b, pb}} {
			wg.Go(func() { _, errs[i] = p.s.Commit(ctx, p.p) })
		}
		wg.Wait()
		wins := 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, store.ErrConflict):
				t.Fatalf("step %d: loser error %v, want ErrConflict", step, err)
			}
		}
		if wins != 1 {
			t.Fatalf("step %d: %d winners (errors %v), want 1", step, wins, errs)
		}
	}
	run, err := a.RunGet(ctx, res.Run.ID)
	if err != nil || run.LastStep != 20 {
		t.Fatalf("RunGet = %+v, %v; want LastStep 20", run, err)
	}
	checkStore(t, a)
}

// TestCommitFenced takes a run over after its lease expired: the old
// owner's commit, append, renew and release are fenced with both epochs.
func TestCommitFenced(t *testing.T) {
	t.Parallel()
	schema := newSchemaName(t)
	a, b := openStore(t, schema, nil), openStore(t, schema, nil)
	ctx := t.Context()
	now := time.Now()
	res := storetest.CreateResponse(ctx, t, a, &storetest.ResponseOpts{LeaseDuration: time.Minute, Now: now})
	later := now.Add(2 * time.Minute)
	claimed, err := b.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "host-b", Duration: time.Minute, Now: later})
	if err != nil || len(claimed) != 1 || claimed[0].Lease.Epoch != 2 {
		t.Fatalf("LeaseClaim = %+v, %v; want the run at epoch 2", claimed, err)
	}
	p := storetest.NextCommit(ctx, t, a, res.Run.ID, &storetest.CommitOpts{Epoch: 1, Now: later})
	_, err = a.Commit(ctx, p)
	var fe *store.FencedError
	if !errors.As(err, &fe) || !errors.Is(err, store.ErrFenced) || fe.Epoch != 1 || fe.CurrentEpoch != 2 {
		t.Fatalf("Commit at stale epoch: %v, want FencedError 1 -> 2", err)
	}
	err = a.EventAppend(ctx, &store.EventAppendParams{RunID: res.Run.ID, Epoch: 1, ResponseID: res.Response.ID,
		Events: []store.EventInput{{Seq: 1, Type: "x"}}, Now: later})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("EventAppend at stale epoch: %v", err)
	}
	if _, err := a.LeaseRenew(ctx, &store.LeaseParams{RunID: res.Run.ID, Owner: storetest.LeaseOwnerDefault, Epoch: 1, Duration: time.Minute, Now: later}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("LeaseRenew at stale epoch: %v", err)
	}
	if err := a.LeaseRelease(ctx, &store.LeaseParams{RunID: res.Run.ID, Owner: storetest.LeaseOwnerDefault, Epoch: 1, Now: later}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("LeaseRelease at stale epoch: %v", err)
	}
	storetest.Commit(ctx, t, b, res.Run.ID, &storetest.CommitOpts{Now: later})
	checkStore(t, b)
}

// TestEventAppendConcurrent has writers on two stores append to one log
// with caller-chosen sequence numbers; losers of a race get ErrConflict and
// retry. The log ends contiguous with every event exactly once.
func TestEventAppendConcurrent(t *testing.T) {
	t.Parallel()
	schema := newSchemaName(t)
	stores := []*Store{openStore(t, schema, nil), openStore(t, schema, nil)}
	ctx := t.Context()
	res := storetest.CreateResponse(ctx, t, stores[0], nil)
	const writers, perWriter = 6, 15
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for w := range writers {
		s := stores[w%2]
		wg.Go(func() {
			for i := 0; i < perWriter; {
				resp, err := s.ResponseGet(ctx, res.Response.ID)
				if err != nil {
					errc <- err
					return
				}
				err = s.EventAppend(ctx, &store.EventAppendParams{RunID: res.Run.ID, Epoch: 1, ResponseID: res.Response.ID,
					Events: []store.EventInput{
						{Seq: resp.NextSeq, Type: "delta", Payload: fmt.Appendf(nil, "w%d-%d-a", w, i)},
						{Seq: resp.NextSeq + 1, Type: "delta", Payload: fmt.Appendf(nil, "w%d-%d-b", w, i)},
					}})
				switch {
				case err == nil:
					i++
				case !errors.Is(err, store.ErrConflict):
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	events, err := stores[1].EventList(ctx, &store.EventListParams{ResponseID: res.Response.ID, After: -1, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 + 2*writers*perWriter; len(events) != want {
		t.Fatalf("%d events, want %d", len(events), want)
	}
	seen := make(map[string]bool)
	for i, e := range events {
		if e.Seq != int64(i) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		if i > 0 {
			if seen[string(e.Payload)] || e.Step != -1 {
				t.Fatalf("event %d: payload %s repeated or step %d", i, e.Payload, e.Step)
			}
			seen[string(e.Payload)] = true
		}
		// The two events of one append are adjacent.
		if i > 0 && i%2 == 0 && !bytes.Equal(bytes.TrimSuffix(e.Payload, []byte("-b")), bytes.TrimSuffix(events[i-1].Payload, []byte("-a"))) {
			t.Fatalf("events %d and %d are not one append: %s, %s", i-1, i, events[i-1].Payload, e.Payload)
		}
	}
	checkStore(t, stores[0])
}

// TestEventWaitNotify blocks a reader on one store and commits on another:
// the reader wakes (through LISTEN/NOTIFY) and sees the new events. A
// deleted response wakes its waiters too.
func TestEventWaitNotify(t *testing.T) {
	t.Parallel()
	for _, inCommit := range []bool{false, true} {
		t.Run(fmt.Sprintf("NotifyInCommit=%v", inCommit), func(t *testing.T) {
			t.Parallel()
			// A long poll interval: only a notification wakes the reader in time.
			opts := &Options{NotifyInCommit: inCommit, PollInterval: time.Hour}
			testEventWaitNotify(t, opts)
		})
	}
}

func testEventWaitNotify(t *testing.T, opts *Options) {
	schema := newSchemaName(t)
	writer, reader := openStore(t, schema, opts), openStore(t, schema, opts)
	ctx := t.Context()
	res := storetest.CreateResponse(ctx, t, writer, nil)
	for round := range 3 {
		resp, err := reader.ResponseGet(ctx, res.Response.ID)
		if err != nil {
			t.Fatal(err)
		}
		woke := make(chan error, 1)
		go func() { woke <- waitForSeq(ctx, reader, res.Response.ID, resp.NextSeq-1) }()
		storetest.Commit(ctx, t, writer, res.Run.ID, nil)
		select {
		case err := <-woke:
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: reader not woken", round)
		}
	}
	// A waiter whose response is deleted returns nil (woken by the
	// notification: the poll interval is an hour), or ErrNotFound when the
	// delete came before its first read.
	resp, _ := reader.ResponseGet(ctx, res.Response.ID)
	woke := make(chan error, 1)
	go func() { woke <- reader.EventWait(ctx, res.Response.ID, resp.NextSeq-1) }()
	time.Sleep(20 * time.Millisecond) // usually waiting by now
	if err := writer.ResponseDelete(ctx, res.Response.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("EventWait after delete: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a waiter whose response was deleted was not woken")
	}
	// ctx cancellation ends a wait.
	res2 := storetest.CreateResponse(ctx, t, writer, nil)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := reader.EventWait(cctx, res2.Response.ID, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("EventWait with cancelled ctx: %v", err)
	}
}

// waitForSeq waits (tolerating spurious wake-ups) until the response has
// an event after seq.
func waitForSeq(ctx context.Context, s store.Store, id string, seq int64) error {
	for {
		if err := s.EventWait(ctx, id, seq); err != nil {
			return err
		}
		evs, err := s.EventList(ctx, &store.EventListParams{ResponseID: id, After: seq})
		if err != nil {
			return err
		}
		if len(evs) > 0 {
			return nil
		}
	}
}

// TestLeaseClaimSkipLocked claims unowned runs from two stores at once:
// every run is claimed exactly once, at epoch 1.
func TestLeaseClaimSkipLocked(t *testing.T) {
	t.Parallel()
	schema := newSchemaName(t)
	stores := []*Store{openStore(t, schema, nil), openStore(t, schema, nil)}
	ctx := t.Context()
	const runs = 40
	for range runs {
		storetest.CreateResponse(ctx, t, stores[0], &storetest.ResponseOpts{NoLease: true})
	}
	var mu sync.Mutex
	owner := make(map[string]string)
	var wg sync.WaitGroup
	for i, s := range stores {
		for j := range 3 {
			name := fmt.Sprintf("host-%d-%d", i, j)
			wg.Go(func() {
				for {
					got, err := s.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: name, Duration: time.Hour, Limit: 3})
					if err != nil {
						t.Error(err)
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, r := range got {
						if prev, dup := owner[r.ID]; dup || r.Lease.Epoch != 1 || r.Lease.Owner != name {
							t.Errorf("run %s claimed by %s after %q at epoch %d", r.ID, name, prev, r.Lease.Epoch)
						}
						owner[r.ID] = name
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(owner) != runs {
		t.Fatalf("%d runs claimed, want %d", len(owner), runs)
	}
	checkStore(t, stores[0])
}

// TestCheckpointByReference commits 640 KB of unchanged parts plus 1 KB
// that changes: each commit stores only the changed kilobyte (the 10 MB
// case is in storetest and BenchmarkCommitBytes), and a stale
// cache of known parts (the parts were pruned by another host) falls back
// to sending the bytes.
func TestCheckpointByReference(t *testing.T) {
	t.Parallel()
	schema := newSchemaName(t)
	a, b := openStore(t, schema, nil), openStore(t, schema, nil)
	ctx := t.Context()
	big := storetest.Parts(10, 64<<10, 'x')
	res := storetest.CreateResponse(ctx, t, a, &storetest.ResponseOpts{Checkpoint: big})
	for step := range 3 {
		parts := append(append([]store.Part(nil), big...), store.Part{Name: "small", Data: bytes.Repeat([]byte{byte(step)}, 1024)})
		p := storetest.NextCommit(ctx, t, a, res.Run.ID, &storetest.CommitOpts{Checkpoint: parts})
		cr, err := a.Commit(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if cr.BytesWritten != 1024 {
			t.Fatalf("step %d wrote %d checkpoint bytes, want 1024", p.Step, cr.BytesWritten)
		}
	}
	cp, err := b.CheckpointGetLast(ctx, res.Run.ID)
	if err != nil || len(cp.Parts) != 11 || !bytes.Equal(cp.Parts[3].Data, big[3].Data) || cp.Parts[10].Data[0] != 2 {
		t.Fatalf("CheckpointGetLast: %v (%d parts)", err, len(cp.Parts))
	}
	// Host b takes over, replaces every part and prunes: a's cache of the
	// big parts is now stale.
	later := time.Now().Add(2 * storetest.LeaseDurationDefault)
	if _, err := b.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "b", Duration: time.Hour, Now: later}); err != nil {
		t.Fatal(err)
	}
	storetest.Commit(ctx, t, b, res.Run.ID, &storetest.CommitOpts{Now: later})
	if n, err := b.CheckpointPrune(ctx, &store.CheckpointPruneParams{RunID: res.Run.ID, KeepLast: 1}); err != nil || n != 4 {
		t.Fatalf("CheckpointPrune = %d, %v; want 4", n, err)
	}
	later = later.Add(2 * time.Hour)
	if _, err := a.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "a", Duration: time.Hour, Now: later}); err != nil {
		t.Fatal(err)
	}
	p := storetest.NextCommit(ctx, t, a, res.Run.ID, &storetest.CommitOpts{Checkpoint: big, Now: later})
	cr, err := a.Commit(ctx, p)
	if err != nil || cr.BytesWritten != 10*64<<10 {
		t.Fatalf("Commit after prune: %+v, %v; want the 640 KB rewritten", cr, err)
	}
	cp, err = b.CheckpointGetLast(ctx, res.Run.ID)
	if err != nil || len(cp.Parts) != 10 || !bytes.Equal(cp.Parts[9].Data, big[9].Data) {
		t.Fatalf("CheckpointGetLast after re-commit: %v", err)
	}
	checkStore(t, a)
}

// TestOpenRefusesForeignSchemas: a schema written by a newer superstep, or
// holding tables that are not superstep's, is not opened.
func TestOpenRefusesForeignSchemas(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchemaName(t)
	s := openStore(t, schema, nil)
	if _, err := s.pool.Exec(ctx, "INSERT INTO superstep_schema_version VALUES (999, 'future', now())"); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if _, err := Open(ctx, testURL(), &Options{Schema: schema}); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a newer schema: %v", err)
	}
	other := newSchemaName(t)
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer closeConn(conn)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+other+"; CREATE TABLE "+other+".runs (x int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, testURL(), &Options{Schema: other}); err == nil || !strings.Contains(err.Error(), "not a superstep") {
		t.Fatalf("Open of a foreign schema: %v", err)
	}
	if _, err := Open(ctx, testURL(), &Options{Schema: "bad-name;"}); err == nil || !strings.Contains(err.Error(), "Options.Schema") {
		t.Fatalf("Open with a bad schema name: %v", err)
	}
}

// TestClosed: calls after Close fail with ErrClosed.
func TestClosed(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResponseGet(t.Context(), "x"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("ResponseGet after Close: %v", err)
	}
	if err := s.EventWait(t.Context(), "x", 0); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("EventWait after Close: %v", err)
	}
}

func checkStore(t *testing.T, s store.Store) {
	t.Helper()
	if err := store.Check(context.Background(), s); err != nil {
		t.Fatalf("store.Check: %v", err)
	}
}

// TestListenerReconnects kills the listener's backend: the listener
// reconnects, and a reader on that store is woken by a later commit of
// another store.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	schema := newSchemaName(t)
	reader, writer := openStore(t, schema, &Options{PollInterval: time.Hour}), openStore(t, schema, nil)
	ctx := t.Context()
	res := storetest.CreateResponse(ctx, t, writer, nil)
	tag, err := writer.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE query = $1`, "LISTEN "+pgx.Identifier{reader.opts.Channel}.Sanitize())
	if err != nil || tag.RowsAffected() != 2 { // both stores' listeners
		t.Fatalf("terminate listeners: %v, %d rows", err, tag.RowsAffected())
	}
	// Wait until the reader listens again, then commit and expect a wake-up.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		err := writer.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query = $1",
			"LISTEN "+pgx.Identifier{reader.opts.Channel}.Sanitize()).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listeners did not reconnect (%d listening)", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	woke := make(chan error, 1)
	go func() { woke <- waitForSeq(ctx, reader, res.Response.ID, 0) }()
	storetest.Commit(ctx, t, writer, res.Run.ID, nil)
	select {
	case err := <-woke:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("reader not woken after the listener reconnected")
	}
}

// TestEventAppendGroupFailsAlone appends concurrently to many runs, some
// under a stale epoch or a wrong sequence number: those calls fail with
// their own error and the others land, whatever batches they shared.
func TestEventAppendGroupFailsAlone(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	const runs = 24
	var wg sync.WaitGroup
	for i := range runs {
		res := storetest.CreateResponse(ctx, t, s, nil)
		wg.Go(func() {
			for round := range 3 {
				p := &store.EventAppendParams{RunID: res.Run.ID, Epoch: res.Run.Lease.Epoch, ResponseID: res.Response.ID,
					Events: []store.EventInput{{Seq: int64(1 + round), Type: "delta"}}}
				var want error
				switch (i + round) % 4 {
				case 1:
					p.Epoch++
					want = store.ErrFenced
				case 2:
					p.Events[0].Seq += 3
					want = store.ErrConflict
				}
				err := s.EventAppend(ctx, p)
				if want != nil {
					if !errors.Is(err, want) {
						t.Errorf("run %d round %d: %v, want %v", i, round, err, want)
					}
					// Append the event properly so the next round continues.
					p.Epoch, p.Events[0].Seq = res.Run.Lease.Epoch, int64(1+round)
					err = s.EventAppend(ctx, p)
				}
				if err != nil {
					t.Errorf("run %d round %d: %v", i, round, err)
				}
			}
		})
	}
	wg.Wait()
	checkStore(t, s)
}

// TestOpenConcurrently opens one fresh schema from several stores at once
// (hosts starting together): the schema and its migration are created once
// and every store works.
func TestOpenConcurrently(t *testing.T) {
	t.Parallel()
	schema := newSchemaName(t)
	stores := make([]*Store, 4)
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = Open(t.Context(), testURL(), &Options{Schema: schema}) })
	}
	wg.Wait()
	for i, s := range stores {
		if errs[i] != nil {
			t.Fatalf("Open %d: %v", i, errs[i])
		}
		t.Cleanup(func() { _ = s.Close() })
	}
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	var versions int
	if err := stores[0].pool.QueryRow(t.Context(), "SELECT count(*) FROM superstep_schema_version").Scan(&versions); err != nil || versions != len(ms) {
		t.Fatalf("schema versions recorded: %d, %v; want %d (each migration once)", versions, err, len(ms))
	}
	res := storetest.CreateResponse(t.Context(), t, stores[1], nil)
	storetest.Commit(t.Context(), t, stores[2], res.Run.ID, nil)
	checkStore(t, stores[3])
}

// TestOpenSchemaFromURL: a URL's search_path names the schema, which Open
// creates and migrates like Options.Schema.
func TestOpenSchemaFromURL(t *testing.T) {
	t.Parallel()
	schema := newSchemaName(t)
	s, err := Open(t.Context(), withParam(testURL(), "search_path="+schema), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if s.opts.Schema != schema {
		t.Fatalf("schema %q, want %q", s.opts.Schema, schema)
	}
	res := storetest.CreateResponse(t.Context(), t, s, nil)
	var n int
	if err := s.pool.QueryRow(t.Context(), "SELECT count(*) FROM "+schema+".runs WHERE id = $1", res.Run.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("run in schema %s: %d, %v", schema, n, err)
	}
}
