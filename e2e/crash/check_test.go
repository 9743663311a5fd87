package crash

import (
	"context"
	"encoding/json"
	"os/exec"

	"github.com/superstep/superstep/store"
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
	in := &verify.Input{Journal: &verify.Journal{Entries: entries, Crashes: ch.kills, Marks: ch.marks}}
	workloads := ch.readDatabase(ctx, in, refs)
	in.Journal.PerAttempt = perAttempt(entries, workloads, ch.refIDs, ch.isCancel)
	rep := verify.Check(in)
	t.Logf("%v after %d kills (%d workloads); %d live resets", rep, ch.kills, len(ch.mu.all), liveResets(in))
	if err := rep.Err(); err != nil {
		t.Errorf("seed %d: %v", ch.seed, err)
	}
	if ch.s.check != nil {
		ch.s.check(ch, in)
	}
	ch.checkCommand(ctx)
}

// readDatabase adds every response in the database to in, with its
// clients' views and its reference outcome, and returns each response's
// workload name. It closes the database before it returns.
func (ch *chaos) readDatabase(ctx context.Context, in *verify.Input, refs map[string]verify.Outcome) map[string]string {
	t := ch.t
	clients := map[string][]verify.ClientView{}
	for _, w := range ch.mu.all {
		if w.primary.id != "" {
			clients[w.primary.id] = append(clients[w.primary.id], w.views()...)
		}
	}
	for _, st := range ch.orphans {
		v := st.view
		v.Name = st.name
		clients[st.id] = append(clients[st.id], v)
	}
	s, err := ch.b.open(ctx)
	if err != nil {
		t.Fatalf("open the database: %v", err)
	}
	defer s.Close()
	if err := store.Check(ctx, s); err != nil {
		t.Errorf("store.Check: %v", err)
	}
	workloads := map[string]string{}
	err = forEachResponse(ctx, s, func(_ *store.Run, r *store.Response) error {
		rec, log, err := verify.Load(ctx, s, r.ID)
		if err != nil {
			return err
		}
		ri := verify.ResponseInput{ID: r.ID, Log: log, Record: rec, Clients: clients[r.ID]}
		workloads[r.ID] = workloadOf(rec.Request)
		if ref, ok := refs[workloads[r.ID]]; ok {
			ri.Reference = &ref
		} else if !ch.isCancel(workloads[r.ID]) {
			t.Errorf("response %s: no known workload in its request metadata: %s", r.ID, rec.Request)
		}
		delete(clients, r.ID)
		in.Responses = append(in.Responses, ri)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id := range clients {
		t.Errorf("response %s was shown to a client but is not in the database", id)
	}
	return workloads
}

// attemptKey names an executor in a superstep of a workload.
type attemptKey struct {
	workload, executor string
	step               int64
}

// perAttempt returns the journal's PerAttempt function: how many entries a
// complete attempt writes, taken from the crash-free reference run of the
// same workload (a fan-in join handles one message per worker). Workloads
// without a reference (the cancelled demo.silent) invoke each executor
// once per superstep.
func perAttempt(entries []verify.JournalEntry, workloads map[string]string, refIDs map[string]bool, isCancel func(string) bool) func(string, int64, string) int {
	counts := map[attemptKey]int{}
	for _, e := range entries {
		if refIDs[e.ResponseID] {
			counts[attemptKey{workloads[e.ResponseID], e.ExecutorID, e.Step}]++
		}
	}
	return func(resp string, step int64, executor string) int {
		if isCancel(workloads[resp]) || isToolCall(executor) {
			return 1
		}
		return counts[attemptKey{workloads[resp], executor, step}]
	}
}

// checkCommand runs `superstep check <db>` and requires success.
func (ch *chaos) checkCommand(ctx context.Context) {
	out, err := exec.CommandContext(ctx, binary, "check", ch.b.dbArg).CombinedOutput()
	if err != nil {
		ch.t.Errorf("superstep check %s: %v; output:\n%s", ch.b.dbArg, err, out)
	}
}

// workloadOf returns metadata.workload of a create request.
func workloadOf(request []byte) string {
	var req struct {
		Metadata map[string]string `json:"metadata"`
	}
	if json.Unmarshal(request, &req) != nil {
		return ""
	}
	return req.Metadata["workload"]
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
