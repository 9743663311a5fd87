// Package storetest is the conformance suite every store backend runs, in
// the manner of river's riverdrivertest: a normal package with one entry
// point, Run, that a backend's own TestStore calls with a Harness. It
// imports no backend.
//
// The suite is split into files by area (commit.go, concurrent.go, createcommit.go, events.go, records.go, lease.go,
// response.go, retention.go, fault.go, crash.go, hosts.go, webhook.go, journal.go). The first t.Run
// level names the method, the second the behaviour. Every subtest gets a store of
// its own and ends with store.Check.
package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/superstep/superstep/store"
)

// Harness tells the suite how to make and reopen stores of one backend.
//
// Stores must make Close idempotent and answer store.ErrClosed after it
// (the per-subtest store.Check cleanup skips closed stores). A backend may
// release leases when it opens a database (SQLite does); the suite
// re-claims runs after a reopen and ignores leases when comparing state
// across one.
type Harness struct {
	// New returns a fresh, empty, isolated store and registers a cleanup
	// that closes it and removes its database. Required.
	New func(t *testing.T) store.Store
	// Reopen closes s and opens the same database again, registering a
	// cleanup that closes the new store. Optional: nil means close s and
	// Open(DSN(s)).
	Reopen func(t *testing.T, s store.Store) store.Store
	// DSN returns a string naming s's database that Open accepts in this
	// or another process (the crash cases run a child process). Required.
	DSN func(t *testing.T, s store.Store) string
	// Open opens an existing database named by DSN and registers a cleanup
	// that closes the store (and does not remove the database). Required.
	Open func(t *testing.T, dsn string) store.Store
	// FaultPoints lists the fault.Point names the backend's writes pass.
	// In a -tags faults build the atomicity cases require that each of
	// them fired. Optional.
	FaultPoints []string
}

// Run runs the whole conformance suite against h's backend. Subtests run
// in parallel, each on a store of its own. The crash case re-executes the
// test binary with -test.run naming itself and kills it
// -storetest.crashes times (default 3). The injected-failure loop needs a
// build with -tags faults; without it the atomicity cases that need no
// fault points still run.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil || h.DSN == nil || h.Open == nil {
		t.Fatal("storetest: Harness.New, DSN and Open are required")
	}
	if isCrashChild() {
		// Re-executed by a crash case: run only that case's child side.
		t.Run("Crash", func(t *testing.T) { testCrash(t, h) })
		return
	}
	t.Run("CancelRead", func(t *testing.T) { testCancelRead(t, h) })
	t.Run("Check", func(t *testing.T) { testCheck(t, h) })
	t.Run("Checkpoint", func(t *testing.T) { testCheckpoint(t, h) })
	t.Run("Commit", func(t *testing.T) { testCommit(t, h) })
	t.Run("Conversation", func(t *testing.T) { testConversation(t, h) })
	t.Run("CreateCommit", func(t *testing.T) { testCreateCommit(t, h) })
	t.Run("CreateJournal", func(t *testing.T) { testCreateJournal(t, h) })
	t.Run("CommitConcurrent", func(t *testing.T) { testCommitConcurrent(t, h) })
	t.Run("Crash", func(t *testing.T) { testCrash(t, h) })
	t.Run("EventAppend", func(t *testing.T) { testEventAppend(t, h) })
	t.Run("EventList", func(t *testing.T) { testEventList(t, h) })
	t.Run("EventRecords", func(t *testing.T) { testEventRecords(t, h) })
	t.Run("EventWait", func(t *testing.T) { testEventWait(t, h) })
	t.Run("Fault", func(t *testing.T) { testFault(t, h) })
	t.Run("HostRegistry", func(t *testing.T) { testHostRegistry(t, h) })
	t.Run("Idempotency", func(t *testing.T) { testIdempotency(t, h) })
	t.Run("Journal", func(t *testing.T) { testJournal(t, h) })
	t.Run("JournalBatch", func(t *testing.T) { testJournalBatch(t, h) })
	t.Run("Lease", func(t *testing.T) { testLease(t, h) })
	t.Run("RequestParts", func(t *testing.T) { testRequestParts(t, h) })
	t.Run("LeaseClock", func(t *testing.T) { testLeaseClock(t, h) })
	t.Run("LeaseBatch", func(t *testing.T) { testLeaseBatch(t, h) })
	t.Run("LongSnapshot", func(t *testing.T) { testLongSnapshot(t, h) })
	t.Run("Notices", func(t *testing.T) { testNotices(t, h) })
	t.Run("Reopen", func(t *testing.T) { testReopen(t, h) })
	t.Run("Response", func(t *testing.T) { testResponse(t, h) })
	t.Run("Retention", func(t *testing.T) { testRetention(t, h) })
	t.Run("ResponsePrune", func(t *testing.T) { testResponsePrune(t, h) })
	t.Run("Run", func(t *testing.T) { testRun(t, h) })
	t.Run("SplicedEvents", func(t *testing.T) { testSplicedEvents(t, h) })
	t.Run("ViewRead", func(t *testing.T) { testViewRead(t, h) })
	t.Run("Webhook", func(t *testing.T) { testWebhook(t, h) })
	t.Run("TraceContext", func(t *testing.T) { testTraceContext(t, h) })
	t.Run("RunInspector", func(t *testing.T) { testRunInspector(t, h) })
}

// bundle is what one subtest works with.
type bundle struct {
	ctx context.Context
	s   store.Store
}

// setup gives a subtest a fresh store that is checked when the subtest
// ends.
func (h Harness) setup(t *testing.T) *bundle {
	t.Helper()
	s := h.New(t)
	registerCheck(t, s)
	return &bundle{ctx: t.Context(), s: s}
}

// reopen closes b's store and opens the same database again. A backend may
// release the leases left in the database when it opens it (SQLite does:
// its file lock proves their holder is gone); tests that write after a
// reopen call reclaim.
func (h Harness) reopen(t *testing.T, b *bundle) {
	t.Helper()
	var s store.Store
	if h.Reopen != nil {
		s = h.Reopen(t, b.s)
	} else {
		dsn := h.DSN(t, b.s)
		if err := b.s.Close(); err != nil {
			t.Fatalf("close before reopen: %v", err)
		}
		s = h.Open(t, dsn)
	}
	registerCheck(t, s)
	b.s = s
}

// reclaim claims, for LeaseOwnerDefault, the active runs whose lease was
// released (by a reopen) or expired, so a test can keep writing; it returns
// how many it claimed.
func reclaim(t *testing.T, b *bundle) int {
	t.Helper()
	claimed, err := b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: LeaseOwnerDefault, Duration: LeaseDurationDefault})
	requireNoError(t, err, "LeaseClaim after reopen")
	return len(claimed)
}

// withoutLeases returns a copy of a RunState (anything else is returned
// as is) with the run's lease zeroed: what may differ across a reopen.
func withoutLeases(v any) any {
	st, ok := v.(*RunState)
	if !ok || st.Run == nil {
		return v
	}
	c := *st
	run := *st.Run
	run.Lease = store.Lease{}
	c.Run = &run
	return &c
}

// registerCheck runs store.Check on s when the test ends, before s is
// closed by the cleanups registered earlier. A store closed by the test
// (reopened) is skipped: it answers ErrClosed.
func registerCheck(t *testing.T, s store.Store) {
	t.Helper()
	t.Cleanup(func() {
		err := store.Check(context.Background(), s)
		if err != nil && !errors.Is(err, store.ErrClosed) {
			t.Errorf("store.Check at cleanup: %v", err)
		}
	})
}
