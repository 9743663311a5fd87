package multihost

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/verify"
)

// forEachResponse calls fn for every response of every run in s.
func forEachResponse(ctx context.Context, s store.Store, fn func(*store.Run, *store.Response) error) error {
	after := ""
	for {
		runs, err := s.RunList(ctx, &store.RunListParams{After: after})
		if err != nil {
			return fmt.Errorf("multihost: list runs: %w", err)
		}
		if len(runs) == 0 {
			return nil
		}
		for _, run := range runs {
			rs, err := s.ResponseListByRun(ctx, run.ID)
			if err != nil {
				return fmt.Errorf("multihost: responses of run %s: %w", run.ID, err)
			}
			for _, r := range rs {
				if err := fn(run, r); err != nil {
					return err
				}
			}
		}
		after = runs[len(runs)-1].ID
	}
}

// journalLen returns the number of complete lines in the journal (0 before
// it exists). Other hosts append while it reads: a line being written is
// not counted.
func journalLen(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte{'\n'})
}

// crashMark records a crash while the other hosts keep running. Each
// run's last committed step is read before the journal's length: an
// invocation journaled after that length started after the commits read,
// so one belonging to a superstep read as committed ran it again.
func crashMark(ctx context.Context, s store.Store, journal string) (verify.CrashMark, error) {
	m := verify.CrashMark{Committed: map[string]int64{}}
	err := forEachResponse(ctx, s, func(run *store.Run, r *store.Response) error {
		m.Committed[r.ID] = run.LastStep
		return nil
	})
	if err != nil {
		return m, err
	}
	m.JournalLen = journalLen(journal)
	return m, nil
}

// attemptKey names an executor in a superstep of a workload.
type attemptKey struct {
	workload, executor string
	step               int64
}

// perAttempt returns the journal's PerAttempt function: how many entries a
// complete attempt writes, taken from the crash-free reference run of the
// same workload (a fan-in join handles one message per worker).
func perAttempt(entries []verify.JournalEntry, workloads map[string]string, refIDs map[string]bool) func(string, int64, string) int {
	counts := map[attemptKey]int{}
	for _, e := range entries {
		if refIDs[e.ResponseID] {
			counts[attemptKey{workloads[e.ResponseID], e.ExecutorID, e.Step}]++
		}
	}
	return func(resp string, step int64, executor string) int {
		return counts[attemptKey{workloads[resp], executor, step}]
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

// loadResponses adds every response in s to in, with the clients' views
// of it and its reference outcome (by metadata.workload), and returns each
// response's workload name. store.Check runs first.
func loadResponses(ctx context.Context, t *testing.T, s store.Store, in *verify.Input,
	clients map[string][]verify.ClientView, refs map[string]verify.Outcome) map[string]string {
	if err := store.Check(ctx, s); err != nil {
		t.Errorf("store.Check: %v", err)
	}
	workloads := map[string]string{}
	seen := map[string]bool{}
	err := forEachResponse(ctx, s, func(_ *store.Run, r *store.Response) error {
		rec, log, err := verify.Load(ctx, s, r.ID)
		if err != nil {
			return err
		}
		ri := verify.ResponseInput{ID: r.ID, Log: log, Record: rec, Clients: clients[r.ID]}
		workloads[r.ID] = workloadOf(rec.Request)
		if ref, ok := refs[workloads[r.ID]]; ok {
			ri.Reference = &ref
		} else {
			t.Errorf("response %s: no known workload in its request metadata: %s", r.ID, rec.Request)
		}
		seen[r.ID] = true
		in.Responses = append(in.Responses, ri)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id := range clients {
		if !seen[id] {
			t.Errorf("response %s was shown to a client but is not in the database", id)
		}
	}
	return workloads
}

// checkCommand runs `superstep check <db>` and requires success.
func checkCommand(ctx context.Context, t *testing.T, db string) {
	out, err := exec.CommandContext(ctx, binary, "check", db).CombinedOutput()
	if err != nil {
		t.Errorf("superstep check: %v; output:\n%s", err, out)
	}
}
