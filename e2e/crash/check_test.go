package crash

import (
	"context"

	"github.com/superstep/superstep/internal/testkit/resumeclient"
	"github.com/superstep/superstep/internal/testkit/verifytest"
	"github.com/superstep/superstep/verify"
)

// verify checks the surviving database with package verify (logs, client
// views, reference outcomes, journal) and with `superstep check`.
func (ch *chaos) verify(ctx context.Context, refs map[string]verify.Outcome) {
	t := ch.t
	entries, err := verify.ReadJournal(ch.cl.journal)
	if err != nil {
		t.Fatal(err)
	}
	in := &verify.Input{Journal: &verify.Journal{Entries: entries, Crashes: ch.kills, Marks: ch.marks,
		LeaseEnds: leaseEnds(t, ch.cl.dir)}}
	if n := len(in.Journal.LeaseEnds); n > 0 {
		// Not a failure: a host starved past its lease (a loaded machine)
		// stops the run and claims it again, re-running its superstep.
		t.Logf("leases ended without a crash for %d responses: %v", n, in.Journal.LeaseEnds)
	}
	workloads := ch.readDatabase(ctx, in, refs)
	retagReferences(in)
	// Workloads without a reference (the cancelled demo.silent) invoke each
	// executor once per superstep, and so does a tool call.
	in.Journal.PerAttempt = verifytest.PerAttempt(entries, workloads, ch.refIDs, func(workload, executor string) bool {
		return ch.isCancel(workload) || isToolCall(executor)
	})
	rep := verify.Check(in)
	t.Logf("%v after %d kills (%d workloads); %d live resets", rep, ch.kills, len(ch.pool.All()), liveResets(in))
	if err := rep.Err(); err != nil {
		t.Errorf("seed %d: %v", ch.seed, err)
	}
	if ch.s.check != nil {
		ch.s.check(ch, in)
	}
	verifytest.CheckCommand(ctx, t, binary, ch.b.dbArg)
}

// readDatabase adds every response in the database to in, with its
// clients' views and its reference outcome, and returns each response's
// workload name. It closes the database before it returns.
func (ch *chaos) readDatabase(ctx context.Context, in *verify.Input, refs map[string]verify.Outcome) map[string]string {
	var streams []*resumeclient.Stream
	for _, w := range ch.pool.All() {
		streams = append(streams, w.Streams()...)
	}
	clients := resumeclient.ViewsByID(append(streams, ch.orphans...)...)
	s, err := ch.b.open(ctx)
	if err != nil {
		ch.t.Fatalf("open the database: %v", err)
	}
	defer s.Close()
	return verifytest.AddResponses(ctx, ch.t, s, in, clients, refs, ch.isCancel)
}

// isCancel reports whether the named config cancels its responses.
func (ch *chaos) isCancel(name string) bool {
	for _, c := range ch.s.configs {
		if c.name == name {
			return c.cancel
		}
	}
	return false
}

// liveResets counts the reset response.in_progress events (any after the
// first) in the logs: live supersteps a kill interrupted.
func liveResets(in *verify.Input) int {
	n := 0
	for _, r := range in.Responses {
		seen := false
		for _, e := range r.Log {
			if e.Type == "response.in_progress" {
				if seen {
					n++
				}
				seen = true
			}
		}
	}
	return n
}
