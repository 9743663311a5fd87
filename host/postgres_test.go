package host_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/internal/testkit/pgtest"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
)

// pgSchema returns a fresh schema, dropped at cleanup. It fails the test
// when the database is unreachable and CI is set, and skips it otherwise.
func pgSchema(t *testing.T) string {
	t.Helper()
	return pgtest.Schema(t, "hosttest")
}

// openPG opens a store handle on schema (each host gets its own handle, as
// separate processes would).
func openPG(t *testing.T, schema string) store.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), pgtest.URL(), &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatalf("postgres.Open: %v", err)
	}
	return s
}

// TestHost_Postgres_Failover runs two hosts on one PostgreSQL schema: the
// run starts on h1, h1's writes stop (a crash: its lease is neither renewed
// nor released), h2 claims the run once the lease expired and finishes it,
// while a reader on h2 follows the response from sequence 0 throughout.
func TestHost_Postgres_Failover(t *testing.T) {
	t.Parallel()
	schema := pgSchema(t)
	journal := filepath.Join(t.TempDir(), "journal")
	s1, s2 := openPG(t, schema), openPG(t, schema)
	defer s1.Close()
	defer s2.Close()
	cs := &crashStore{Store: s1}
	cfg := host.Config{HostID: "h1", LeaseDuration: 1500 * time.Millisecond, CommitRetries: 1, CommitBackoff: time.Millisecond}
	h1 := journalHost(t, cs, cfg, journal)
	defer shutdown(t, h1)
	cfg.HostID = "h2"
	h2 := journalHost(t, s2, cfg, journal)
	defer shutdown(t, h2)

	r := create(t, h1, examples.Silent, "x", map[string]string{"steps": "12", "step_delay_ms": "5"})
	type result struct {
		evs []event
		err error
	}
	followed := make(chan result, 1)
	go func() { // any host can stream any response
		evs, err := collectErr(testCtx(t), h2, r.ID, -1)
		followed <- result{evs, err}
	}()
	for range 4 {
		h1.WaitCommitted(t)
	}
	cs.crashed.Store(true)
	h1.WaitRunExited(t)
	checkRecovered(t, h2, s2, r.ID, journal, 1)
	res := <-followed
	if res.err != nil {
		t.Fatal(res.err)
	}
	evs := res.evs
	checkLog(t, evs)
	if got := outputs(evs); !slices.Equal(got, []string{"done after 12"}) {
		t.Fatalf("live reader outputs %q", got)
	}
	run, err := s2.RunGet(testCtx(t), r.RunID)
	if err != nil || run.Lease.Epoch < 2 {
		t.Fatalf("run after failover: %+v %v", run, err)
	}
}

// TestHost_Postgres_Demos runs the demos end to end on PostgreSQL.
func TestHost_Postgres_Demos(t *testing.T) {
	t.Parallel()
	s := openPG(t, pgSchema(t))
	defer s.Close()
	h := newHost(t, s, nil, registerDemos)
	defer shutdown(t, h)
	for _, tc := range demoCases {
		r := create(t, h, tc.model, tc.input, tc.md)
		evs := collect(t, h, r.ID, -1)
		checkLog(t, evs)
		if got := outputs(evs); !slices.Equal(got, tc.outputs) {
			t.Fatalf("%s outputs %q, want %q", tc.model, got, tc.outputs)
		}
	}
	if err := store.Check(testCtx(t), s); err != nil {
		t.Fatal(err)
	}
}
