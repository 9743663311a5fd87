package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// openTemp opens a store on a new file of t's, closed when t ends.
func openTemp(ctx context.Context, t *testing.T) *Store {
	t.Helper()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// runAsBatch runs the writes as one group-commit batch, in their order:
// it holds the writer's leadership while it starts them one by one (each
// queued before the next starts), then leads their batch itself.
func runAsBatch(t *testing.T, s *Store, writes ...func()) {
	t.Helper()
	s.mu.Lock()
	if s.leading {
		s.mu.Unlock()
		t.Fatal("a batch is in flight")
	}
	s.leading = true
	s.mu.Unlock()
	var wg sync.WaitGroup
	for i, w := range writes {
		wg.Go(w)
		deadline := time.Now().Add(10 * time.Second)
		for {
			s.mu.Lock()
			n := len(s.queue)
			s.mu.Unlock()
			if n == i+1 {
				break
			}
			if time.Now().After(deadline) {
				// The write returned before it queued (refused up front):
				// fail here rather than at the binary's timeout.
				t.Fatalf("write %d did not queue (queue length %d)", i, n)
			}
			time.Sleep(time.Millisecond) // waiting for the write to queue
		}
	}
	st := s.Stats()
	s.lead()
	wg.Wait()
	if got := s.Stats(); got.Transactions != st.Transactions+1 || got.Writes != st.Writes+int64(len(writes)) {
		t.Fatalf("the %d writes took %d transactions, %d writes; want 1 and %d", len(writes),
			got.Transactions-st.Transactions, got.Writes-st.Writes, len(writes))
	}
}

// TestRunBatch_FailingWriteFailsAlone: in a group-commit batch, a write
// that fails after writing (a conversation append whose item id is taken:
// it moved the conversation's next_seq first) fails alone with its own
// error and none of its changes; the writes before and after it commit,
// each as if it had been alone, the write after it seeing the state
// without the failed one; writes applied a second time (the batch is
// redone without the failed write: the LeaseClaim before it) return what
// they did once.
func TestRunBatch_FailingWriteFailsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(ctx, t)
	a := storetest.CreateResponse(ctx, t, s, nil)
	b := storetest.CreateResponse(ctx, t, s, nil)
	free := storetest.CreateResponse(ctx, t, s, &storetest.ResponseOpts{NoLease: true})
	conv, _, err := s.ConversationCreate(ctx, &store.ConversationCreateParams{
		Conversation: &store.Conversation{ID: "conv_batch"},
		Items:        []store.ConversationItem{{ID: "item_0", Data: []byte(`{}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	pa := storetest.NextCommit(ctx, t, s, a.Run.ID, nil)
	pb := storetest.NextCommit(ctx, t, s, b.Run.ID, nil)
	var (
		resA, resB       *store.CommitResult
		errA, errB       error
		items1, items3   []store.ConversationItem
		err1, err2, err3 error
		claimed          []*store.Run
		errClaim         error
	)
	runAsBatch(t, s,
		func() { resA, errA = s.Commit(ctx, pa) },
		func() {
			claimed, errClaim = s.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "host-b", Duration: time.Hour})
		},
		func() {
			items1, err1 = s.ConversationItemsAdd(ctx, conv.ID, []store.ConversationItem{{ID: "item_1", Data: []byte(`{}`)}})
		},
		func() {
			// item_2 is new, item_0 taken: the insert of item_0 fails
			// after next_seq moved by 2 and item_2 was inserted.
			_, err2 = s.ConversationItemsAdd(ctx, conv.ID, []store.ConversationItem{
				{ID: "item_2", Data: []byte(`{}`)}, {ID: "item_0", Data: []byte(`{}`)}})
		},
		func() {
			items3, err3 = s.ConversationItemsAdd(ctx, conv.ID, []store.ConversationItem{{ID: "item_3", Data: []byte(`{}`)}})
		},
		func() { resB, errB = s.Commit(ctx, pb) },
	)
	if !errors.Is(err2, store.ErrConflict) {
		t.Fatalf("the failing write: %v, want ErrConflict", err2)
	}
	for i, err := range []error{errA, errClaim, err1, err3, errB} {
		if err != nil {
			t.Fatalf("write %d of the batch: %v", i, err)
		}
	}
	if got := s.Stats().Redone; got != 1 {
		t.Fatalf("Stats().Redone = %d, want 1", got)
	}
	if resA.NextSeq != pa.Events[len(pa.Events)-1].Seq+1 || resB.NextSeq != pb.Events[len(pb.Events)-1].Seq+1 {
		t.Fatalf("commit results %+v, %+v", resA, resB)
	}
	if len(claimed) != 1 || claimed[0].ID != free.Run.ID {
		t.Fatalf("LeaseClaim returned %d runs (%v), want run %s once", len(claimed), claimed, free.Run.ID)
	}
	if len(items1) != 1 || items1[0].Seq != 1 || len(items3) != 1 || items3[0].Seq != 2 {
		t.Fatalf("appended items %+v and %+v, want seq 1 and 2 (as if the failed append had not run)", items1, items3)
	}
	list, _, err := s.ConversationItemList(ctx, &store.ConversationItemListParams{ConversationID: conv.ID})
	if err != nil {
		t.Fatal(err)
	}
	var ids string
	for _, it := range list {
		ids += fmt.Sprintf(" %s@%d", it.ID, it.Seq)
	}
	if want := " item_0@0 item_1@1 item_3@2"; ids != want {
		t.Fatalf("conversation items%s, want%s", ids, want)
	}
	got, err := s.ConversationGet(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != conv.Version+2 {
		t.Fatalf("conversation version %d, want %d (two appends)", got.Version, conv.Version+2)
	}
	requireLastStep(ctx, t, s, a.Run.ID, 1)
	requireLastStep(ctx, t, s, b.Run.ID, 1)
}

// TestRunBatch_FullWriteFailsAlone: a write failing with a SQLite error
// that may have rolled the transaction back (SQLITE_FULL, a checkpoint
// too big for the room left) in the first pass fails alone: the batch is
// redone without it and the other writes commit.
func TestRunBatch_FullWriteFailsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, cs, ps := fullStore(t, 3)
	ps[1].Checkpoint = []store.Part{{Name: "big", Data: make([]byte, 1<<20)}}
	errs := make([]error, 3)
	runAsBatch(t, s,
		func() { _, errs[0] = s.Commit(ctx, ps[0]) },
		func() { _, errs[1] = s.Commit(ctx, ps[1]) },
		func() { _, errs[2] = s.Commit(ctx, ps[2]) },
	)
	requireCode(t, errs[1], sqlite3.ErrFull)
	if !errors.Is(errs[1], store.ErrUnavailable) {
		t.Fatalf("the big write: %v, want ErrUnavailable", errs[1])
	}
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("the other writes: %v, %v; want them committed", errs[0], errs[2])
	}
	if got := s.Stats().Redone; got != 1 {
		t.Fatalf("Stats().Redone = %d, want 1", got)
	}
	for i, want := range []int64{1, 0, 1} {
		requireLastStep(ctx, t, s, cs[i].Run.ID, want)
	}
}

// TestRunBatch_PoisonedBatchFails: a write failing in the redo (the first
// pass failed at an earlier write) with a SQLite error that may have
// rolled the transaction back (SQLITE_FULL) fails the whole batch, every
// write with an error naming it (the write that failed the first pass
// with its own), and nothing of the batch is committed.
func TestRunBatch_PoisonedBatchFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, cs, ps := fullStore(t, 4)
	ps[1].Epoch++ // fenced: fails the first pass
	ps[2].Checkpoint = []store.Part{{Name: "big", Data: make([]byte, 1<<20)}}
	errs := make([]error, 4)
	runAsBatch(t, s,
		func() { _, errs[0] = s.Commit(ctx, ps[0]) },
		func() { _, errs[1] = s.Commit(ctx, ps[1]) },
		func() { _, errs[2] = s.Commit(ctx, ps[2]) },
		func() { _, errs[3] = s.Commit(ctx, ps[3]) },
	)
	if !errors.Is(errs[1], store.ErrFenced) {
		t.Fatalf("the fenced write: %v, want ErrFenced", errs[1])
	}
	if got := s.Stats().Redone; got != 1 {
		t.Fatalf("Stats().Redone = %d, want 1", got)
	}
	for i, err := range errs {
		if i != 1 {
			requireCode(t, err, sqlite3.ErrFull)
			if !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("write %d: %v, want ErrUnavailable", i, err)
			}
		}
		requireLastStep(ctx, t, s, cs[i].Run.ID, 0) // its batch failed
	}
	if _, err := s.wconn.ExecContext(ctx, "PRAGMA max_page_count = 1073741823"); err != nil {
		t.Fatal(err)
	}
	ps[1].Epoch--
	for i, p := range ps {
		if _, err := s.Commit(ctx, p); err != nil {
			t.Fatalf("commit %d once there is room: %v", i, err)
		}
	}
}

// requireLastStep fails t unless run runID's last step is want.
func requireLastStep(ctx context.Context, t *testing.T, s *Store, runID string, want int64) {
	t.Helper()
	run, err := s.RunGet(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	if run.LastStep != want {
		t.Fatalf("run %s at step %d, want %d", runID, run.LastStep, want)
	}
}

// fullStore opens a store with n responses and their next commits, then
// leaves the database room for a few pages only.
func fullStore(t *testing.T, n int) (*Store, []*store.ResponseCreateResult, []*store.CommitParams) {
	t.Helper()
	ctx := context.Background()
	s := openTemp(ctx, t)
	cs := make([]*store.ResponseCreateResult, n)
	ps := make([]*store.CommitParams, n)
	for i := range cs {
		cs[i] = storetest.CreateResponse(ctx, t, s, nil)
		ps[i] = storetest.NextCommit(ctx, t, s, cs[i].Run.ID, nil)
	}
	var pages int64
	if err := s.wconn.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.wconn.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages+4)); err != nil {
		t.Fatal(err)
	}
	return s, cs, ps
}

// TestCommit_AllInlineSkipsParent: a commit whose parts are all inline
// does not read its parent checkpoint (it refers to no blob, so nothing
// of the parent is needed): it succeeds over a damaged parent manifest,
// while a commit with a part stored as a blob still reads the parent and
// reports the damage. Either way the checkpoint written reads back whole.
func TestCommit_AllInlineSkipsParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(ctx, t)
	c := storetest.CreateResponse(ctx, t, s, nil)
	if _, err := s.wconn.ExecContext(ctx, "UPDATE checkpoints SET manifest = x'05ff' WHERE k = (SELECT num FROM runs WHERE id = ?) << 32",
		c.Run.ID); err != nil {
		t.Fatal(err)
	}
	blob := storetest.NextCommit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{Checkpoint: []store.Part{{Name: "big", Data: make([]byte, 2000)}}})
	if _, err := s.Commit(ctx, blob); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("commit of a blob part over a damaged parent: %v, want ErrCorrupt", err)
	}
	inline := []store.Part{{Name: "small", Data: []byte("inline")}}
	p := storetest.NextCommit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{Checkpoint: inline})
	if _, err := s.Commit(ctx, p); err != nil {
		t.Fatalf("commit of inline parts over a damaged parent: %v", err)
	}
	cp, err := s.CheckpointGet(ctx, c.Run.ID, p.Step)
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.Parts) != 1 || cp.Parts[0].Name != "small" || string(cp.Parts[0].Data) != "inline" {
		t.Fatalf("checkpoint read back: %+v", cp.Parts)
	}
}

// TestBegin_RollsBackLeftOpenTransaction: when the writer's connection is
// left inside a transaction (a COMMIT failed and left it open, and the
// ROLLBACK after it failed too), the next write still succeeds: begin
// rolls the transaction left open back instead of failing every later
// write with "cannot start a transaction within a transaction". What
// the transaction left open had written is not committed.
func TestBegin_RollsBackLeftOpenTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(ctx, t)
	c := storetest.CreateResponse(ctx, t, s, nil)
	p := storetest.NextCommit(ctx, t, s, c.Run.ID, nil)
	for i, q := range []string{"BEGIN IMMEDIATE", "UPDATE runs SET last_step = 7"} {
		if _, err := s.wconn.ExecContext(ctx, q); err != nil {
			t.Fatalf("statement %d: %v", i, err)
		}
	}
	if !s.inTx() {
		t.Fatal("inTx = false inside a transaction")
	}
	if _, err := s.Commit(ctx, p); err != nil {
		t.Fatalf("commit after a transaction was left open: %v", err)
	}
	if s.inTx() {
		t.Fatal("inTx = true after the commit")
	}
	d := storetest.CreateResponse(ctx, t, s, nil)
	requireLastStep(ctx, t, s, c.Run.ID, 1)
	requireLastStep(ctx, t, s, d.Run.ID, 0)
}

// TestRunBatch_SwallowedRollbackFailsAlone: a write whose apply ends the
// batch's transaction (here a ROLLBACK, as SQLite does on some errors)
// and returns nil fails: the writes after it are not left to run as
// separate autocommits, durable while their callers are told the batch
// failed. The batch is redone without it: the other writes commit once.
func TestRunBatch_SwallowedRollbackFailsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(ctx, t)
	a := storetest.CreateResponse(ctx, t, s, nil)
	b := storetest.CreateResponse(ctx, t, s, nil)
	pa := storetest.NextCommit(ctx, t, s, a.Run.ID, nil)
	pb := storetest.NextCommit(ctx, t, s, b.Run.ID, nil)
	var errA, errB, errS error
	runAsBatch(t, s,
		func() { _, errA = s.Commit(ctx, pa) },
		func() {
			errS = s.write(ctx, "swallow", func(ctx context.Context, tx *sql.Conn) error {
				tx.ExecContext(ctx, "ROLLBACK") // the error that ended the transaction, swallowed
				return nil
			})
		},
		func() { _, errB = s.Commit(ctx, pb) },
	)
	if !errors.Is(errS, errTxEnded) {
		t.Fatalf("the swallowing write: %v, want errTxEnded", errS)
	}
	if errA != nil || errB != nil {
		t.Fatalf("the other writes: %v, %v; want them committed", errA, errB)
	}
	if got := s.Stats().Redone; got != 1 {
		t.Fatalf("Stats().Redone = %d, want 1", got)
	}
	requireLastStep(ctx, t, s, a.Run.ID, 1)
	requireLastStep(ctx, t, s, b.Run.ID, 1)
	if _, err := s.Commit(ctx, storetest.NextCommit(ctx, t, s, a.Run.ID, nil)); err != nil {
		t.Fatalf("commit after the batch: %v", err)
	}
}

// TestOpen_JournalSizeLimitInFilePages: the WAL's size limit is counted in
// the file's own page size, which Options.PageSize sets only for a new
// file: a file made with 1 KB pages, opened with the 4 KB default, keeps a
// limit of 4 × WALAutocheckpoint × 1 KB, not 4 × 4 KB.
func TestOpen_JournalSizeLimitInFilePages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	s, err := Open(ctx, path, &Options{PageSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(ctx, path, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var pageSize, limit int
	if err := s.wconn.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	if err := s.wconn.QueryRowContext(ctx, "PRAGMA journal_size_limit").Scan(&limit); err != nil {
		t.Fatal(err)
	}
	if want := 4 * WALAutocheckpointDefault * 1024; pageSize != 1024 || limit != want {
		t.Fatalf("page size %d, journal_size_limit %d; want 1024 and %d", pageSize, limit, want)
	}
}
