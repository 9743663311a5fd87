package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// roundTrips counts the round trips (statements sent alone, and pipelined
// batches) made with a context marked by counted, on the connections of
// the store it traces (Options.tracer). The store's own background work
// (notifications, appends) is not marked and not counted.
type roundTrips struct {
	mu  sync.Mutex
	sql []string // one entry per round trip; a batch is "batch"
}

type countedKey struct{}

func counted(ctx context.Context) context.Context { return context.WithValue(ctx, countedKey{}, true) }

func (rt *roundTrips) add(ctx context.Context, what string) {
	if ctx.Value(countedKey{}) == nil {
		return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.sql = append(rt.sql, what)
}

func (rt *roundTrips) take() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := rt.sql
	rt.sql = nil
	return out
}

func (rt *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	rt.add(ctx, d.SQL)
	return ctx
}

func (rt *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (rt *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	rt.add(ctx, "batch")
	return ctx
}

func (rt *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (rt *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// journaled creates a response whose run journaled two entries at step 1
// and returns the commit of step 1 that prunes them.
func journaled(t *testing.T, s *Store) *store.CommitParams {
	t.Helper()
	ctx := t.Context()
	c := storetest.CreateResponse(ctx, t, s, nil)
	err := s.JournalAppend(ctx, &store.JournalAppendParams{RunID: c.Run.ID, Epoch: c.Run.Lease.Epoch, Step: 1,
		Entries: []store.JournalInput{{Key: "a", Hash: "h", Data: []byte("x")}, {Key: "b", Hash: "h"}}})
	if err != nil {
		t.Fatal(err)
	}
	p := storetest.NextCommit(ctx, t, s, c.Run.ID, nil)
	p.JournalPrune = true
	return p
}

func requireJournalLen(t *testing.T, s *Store, runID string, want int) {
	t.Helper()
	got, err := s.JournalList(t.Context(), runID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != want {
		t.Errorf("run %s: %d journal entries, want %d", runID, len(got), want)
	}
}

// TestCommit_JournalPruneOneRoundTrip: a commit that prunes its run's
// journal is one statement (one round trip, autocommit), as a commit
// without it is; a fenced one deletes nothing.
func TestCommit_JournalPruneOneRoundTrip(t *testing.T) {
	t.Parallel()
	for _, group := range []bool{false, true} {
		t.Run(map[bool]string{false: "Alone", true: "GroupCommit"}[group], func(t *testing.T) {
			rt := &roundTrips{}
			s := openStore(t, newSchemaName(t), &Options{NoGroupCommit: !group, tracer: rt})
			ctx := counted(t.Context())

			fenced := journaled(t, s)
			fenced.Epoch++
			if _, err := s.Commit(ctx, fenced); !errors.Is(err, store.ErrFenced) {
				t.Fatalf("fenced commit: %v, want ErrFenced", err)
			}
			rt.take() // the refusal is explained by a read
			requireJournalLen(t, s, fenced.RunID, 2)

			p := journaled(t, s)
			rt.take()
			if _, err := s.Commit(ctx, p); err != nil {
				t.Fatal(err)
			}
			if got := rt.take(); len(got) != 1 {
				t.Errorf("journaled commit: %d round trips %q, want 1", len(got), got)
			}
			requireJournalLen(t, s, p.RunID, 0)
		})
	}
}

// TestGroupCommit_JournalPrunePipelined: members of a batch that prune
// their journals are written with the others, and a batch of plain
// commits is one round trip (one superstep_commit_batch statement), also
// with a fenced member, which fails alone. (Before migration 014: BEGIN,
// the members in savepoints and COMMIT in one pipeline, and with a fenced
// member up to three round trips: the pipeline up to it, the rollback to
// its savepoint, the rest with the COMMIT.)
func TestGroupCommit_JournalPrunePipelined(t *testing.T) {
	t.Parallel()
	rt := &roundTrips{}
	s := openStore(t, newSchemaName(t), &Options{CommitBatchesInFlight: 1, tracer: rt})
	const n = 5
	// No member fenced, one in the middle of the run order, the last
	// one (whose failure skipped the pipeline's COMMIT).
	for _, mode := range []string{"none", "middle", "last"} {
		var ps []*store.CommitParams
		for range n {
			ps = append(ps, journaled(t, s))
		}
		byRun := slices.Clone(ps)
		slices.SortFunc(byRun, func(a, b *store.CommitParams) int { return strings.Compare(a.RunID, b.RunID) })
		fenced := map[string]int{"none": -1, "middle": slices.Index(ps, byRun[2]), "last": slices.Index(ps, byRun[n-1])}[mode]
		if fenced >= 0 {
			ps[fenced].Epoch++ // fails alone; the members after it are sent again
		}
		f := holdCommits(t, s)
		rt.take()
		results := commitAll(counted(t.Context()), s, ps)
		f.waitQueued(t, n)
		f.release(t)
		for range n {
			r := <-results
			if fenced >= 0 && r.p == ps[fenced] {
				if !errors.Is(r.err, store.ErrFenced) {
					t.Errorf("fenced member: %v", r.err)
				}
			} else if r.err != nil {
				t.Errorf("member: %v", r.err)
			}
		}
		got := rt.take()
		if len(got) != 1 {
			t.Errorf("batch of %d journaled commits (fenced %d): %d round trips %q, want 1", n, fenced, len(got), got)
		}
		for i, p := range ps {
			requireJournalLen(t, s, p.RunID, map[bool]int{true: 2, false: 0}[i == fenced])
		}
	}
	if st := s.CommitStats(); st.Sizes[3] != 3 {
		t.Errorf("commit stats %+v: want three batches of 5", st)
	}
	if err := store.Check(t.Context(), s); err != nil {
		t.Fatal(err)
	}
}
