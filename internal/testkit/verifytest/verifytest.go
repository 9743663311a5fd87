// Package verifytest gathers what a process-killing test (e2e/crash,
// e2e/multihost) saw into package verify's input: every response in the
// surviving database with its log, its clients' views and the outcome of a
// crash-free reference run of the same workload, and the journal's
// expected entries per attempt.
//
// Workloads are named by metadata.workload in each create request
// (resumeclient.NewParams sets it), so any response found in the database,
// including one whose create reply a kill cut, has a known reference.
//
// It is a test harness (see internal/testkit): only tests import it.
package verifytest

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/verify"
)

// TB is the part of testing.TB the package uses.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// ForEachResponse calls fn for every response of every run in s, in run
// order; it stops at fn's first error and returns it.
func ForEachResponse(ctx context.Context, s store.Store, fn func(*store.Run, *store.Response) error) error {
	after := ""
	for {
		runs, err := s.RunList(ctx, &store.RunListParams{After: after})
		if err != nil {
			return fmt.Errorf("verifytest: list runs: %w", err)
		}
		if len(runs) == 0 {
			return nil
		}
		for _, run := range runs {
			rs, err := s.ResponseListByRun(ctx, run.ID)
			if err != nil {
				return fmt.Errorf("verifytest: responses of run %s: %w", run.ID, err)
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

// WorkloadOf returns metadata.workload of a create request ("" when it has
// none).
func WorkloadOf(request []byte) string {
	var req struct {
		Metadata map[string]string `json:"metadata"`
	}
	if json.Unmarshal(request, &req) != nil {
		return ""
	}
	return req.Metadata["workload"]
}

// AddResponses runs store.Check on s, then adds every response in s to in
// with its clients' views (by response id) and the reference outcome of its
// workload, and returns each response's workload by response id. A
// response of a workload without a reference fails tb unless noReference
// (nil: never) says the workload has none by design, as one whose outcome
// depends on when a client cancelled it; a client view of a response the
// database lacks fails tb too.
func AddResponses(ctx context.Context, tb TB, s store.Store, in *verify.Input, clients map[string][]verify.ClientView,
	refs map[string]verify.Outcome, noReference func(workload string) bool) map[string]string {
	tb.Helper()
	if err := store.Check(ctx, s); err != nil {
		tb.Errorf("store.Check: %v", err)
	}
	workloads := map[string]string{}
	err := ForEachResponse(ctx, s, func(_ *store.Run, r *store.Response) error {
		rec, log, err := verify.Load(ctx, s, r.ID)
		if err != nil {
			return err
		}
		ri := verify.ResponseInput{ID: r.ID, Log: log, Record: rec, Clients: clients[r.ID]}
		w := WorkloadOf(rec.Request)
		workloads[r.ID] = w
		if ref, ok := refs[w]; ok {
			ri.Reference = &ref
		} else if noReference == nil || !noReference(w) {
			tb.Errorf("response %s: no known workload in its request metadata: %s", r.ID, rec.Request)
		}
		in.Responses = append(in.Responses, ri)
		return nil
	})
	if err != nil {
		tb.Fatalf("%v", err)
	}
	for id := range clients {
		if _, ok := workloads[id]; !ok {
			tb.Errorf("response %s was shown to a client but is not in the database", id)
		}
	}
	return workloads
}

// attemptKey names an executor in a superstep of a workload.
type attemptKey struct {
	workload, executor string
	step               int64
}

// PerAttempt returns the journal's PerAttempt function: how many entries a
// complete attempt of an executor in a superstep writes, counted in the
// crash-free reference runs (refIDs) of the same workload (a fan-in join
// handles one message per worker). once (nil: never) names the attempts
// that write one entry whatever the reference did: workloads without a
// reference, executors that journal once per superstep.
func PerAttempt(entries []verify.JournalEntry, workloads map[string]string, refIDs map[string]bool,
	once func(workload, executor string) bool) func(resp string, step int64, executor string) int {
	counts := map[attemptKey]int{}
	for _, e := range entries {
		if refIDs[e.ResponseID] {
			counts[attemptKey{workloads[e.ResponseID], e.ExecutorID, e.Step}]++
		}
	}
	return func(resp string, step int64, executor string) int {
		if once != nil && once(workloads[resp], executor) {
			return 1
		}
		return counts[attemptKey{workloads[resp], executor, step}]
	}
}

// CheckCommand runs `<binary> check <db>` (the superstep command) and
// fails tb unless it succeeds.
func CheckCommand(ctx context.Context, tb TB, binary, db string) {
	tb.Helper()
	out, err := exec.CommandContext(ctx, binary, "check", db).CombinedOutput()
	if err != nil {
		tb.Errorf("superstep check %s: %v; output:\n%s", db, err, out)
	}
}
