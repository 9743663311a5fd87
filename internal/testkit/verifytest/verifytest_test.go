package verifytest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/superstep/superstep/internal/testkit/verifytest"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/verify"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// openStore returns a SQLite store with n queued responses, one per run,
// response i of workload "w<i%3>"; it returns their ids in order.
func openStore(t *testing.T, n int) (store.Store, []string) {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var ids []string
	for i := range n {
		id := fmt.Sprintf("resp_%04d", i)
		snap := fmt.Sprintf(`{"id":%q,"object":"response","status":"queued","output":[]}`, id)
		_, err := s.ResponseCreate(ctx, &store.ResponseCreateParams{
			RunID: fmt.Sprintf("run_%04d", i),
			Response: &store.Response{ID: id, Model: "demo.silent", Status: store.StatusQueued, Snapshot: []byte(snap),
				Request: []byte(fmt.Sprintf(`{"model":"demo.silent","metadata":{"workload":"w%d"}}`, i%3))},
			Events: []store.EventInput{{Seq: 0, Type: "response.created",
				Payload: []byte(fmt.Sprintf(`{"type":"response.created","sequence_number":0,"response":%s}`, snap))}},
		})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return s, ids
}

// ForEachResponse sees every response once, past the store's first page,
// and stops at fn's error.
func TestForEachResponse(t *testing.T) {
	s, ids := openStore(t, 130)
	var seen []string
	err := verifytest.ForEachResponse(context.Background(), s, func(run *store.Run, r *store.Response) error {
		if run.ID != r.RunID {
			t.Errorf("response %s of run %s given with run %s", r.ID, r.RunID, run.ID)
		}
		seen = append(seen, r.ID)
		return nil
	})
	if err != nil || strings.Join(seen, ",") != strings.Join(ids, ",") {
		t.Fatalf("saw %d responses (%v), want %d", len(seen), err, len(ids))
	}
	stop := fmt.Errorf("stop")
	n := 0
	err = verifytest.ForEachResponse(context.Background(), s, func(*store.Run, *store.Response) error {
		n++
		return stop
	})
	if err != stop || n != 1 {
		t.Fatalf("after fn's error: %v, %d calls", err, n)
	}
}

func TestWorkloadOf(t *testing.T) {
	for in, want := range map[string]string{`{"metadata":{"workload":"a"}}`: "a", `{}`: "", `not json`: ""} {
		if got := verifytest.WorkloadOf([]byte(in)); got != want {
			t.Errorf("WorkloadOf(%s) = %q, want %q", in, got, want)
		}
	}
}

// recorder is a test that records failures instead of failing.
type recorder struct{ errs []string }

func (r *recorder) Helper()                   {}
func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }
func (r *recorder) Fatalf(f string, a ...any) {
	r.errs = append(r.errs, "fatal: "+fmt.Sprintf(f, a...))
}

// AddResponses pairs responses with their clients and references, and
// names responses without a reference and clients without a response.
func TestAddResponses(t *testing.T) {
	s, ids := openStore(t, 6)
	ctx := context.Background()
	refs := map[string]verify.Outcome{"w0": {Status: "completed"}, "w1": {Status: "completed", Output: []string{"x"}}}
	clients := map[string][]verify.ClientView{ids[0]: {{Name: "a"}, {Name: "b"}}, "resp_gone": {{Name: "c"}}}
	in := &verify.Input{}
	rec := &recorder{}
	workloads := verifytest.AddResponses(ctx, rec, s, in, clients, refs, func(w string) bool { return w == "w2" })
	if len(in.Responses) != len(ids) || len(workloads) != len(ids) || workloads[ids[4]] != "w1" {
		t.Fatalf("%d responses, workloads %v", len(in.Responses), workloads)
	}
	r0 := in.Responses[0]
	if r0.ID != ids[0] || len(r0.Clients) != 2 || r0.Reference == nil || r0.Record == nil || len(r0.Log) != 1 {
		t.Errorf("response 0: %+v", r0)
	}
	if in.Responses[2].Reference != nil {
		t.Errorf("w2 got a reference")
	}
	if len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "resp_gone") {
		t.Errorf("failures %q; want only the client of resp_gone", rec.errs)
	}
	rec = &recorder{}
	verifytest.AddResponses(ctx, rec, s, &verify.Input{}, nil, refs, nil)
	if len(rec.errs) != 2 || !strings.Contains(rec.errs[0], "no known workload") {
		t.Errorf("without noReference: failures %q; want the two w2 responses", rec.errs)
	}
}

// PerAttempt counts the reference run's entries by workload, executor and
// step, and once overrides it.
func TestPerAttempt(t *testing.T) {
	entries := []verify.JournalEntry{
		{ResponseID: "ref", ExecutorID: "join", Step: 2},
		{ResponseID: "ref", ExecutorID: "join", Step: 2},
		{ResponseID: "ref", ExecutorID: "fan", Step: 1},
		{ResponseID: "other", ExecutorID: "join", Step: 2},
	}
	workloads := map[string]string{"ref": "fanout", "other": "fanout", "c": "cancel"}
	per := verifytest.PerAttempt(entries, workloads, map[string]bool{"ref": true},
		func(w, e string) bool { return w == "cancel" || strings.HasPrefix(e, "tool:") })
	for _, tc := range []struct {
		resp, executor string
		step           int64
		want           int
	}{{"other", "join", 2, 2}, {"other", "fan", 1, 1}, {"other", "fan", 2, 0}, {"c", "x", 5, 1}, {"other", "tool:calc", 3, 1}} {
		if got := per(tc.resp, tc.step, tc.executor); got != tc.want {
			t.Errorf("PerAttempt(%s, %d, %s) = %d, want %d", tc.resp, tc.step, tc.executor, got, tc.want)
		}
	}
	if got := verifytest.PerAttempt(entries, workloads, map[string]bool{"ref": true}, nil)("c", 5, "x"); got != 0 {
		t.Errorf("without once: %d", got)
	}
}

// CheckCommand fails the test when the command fails.
func TestCheckCommand(t *testing.T) {
	rec := &recorder{}
	verifytest.CheckCommand(context.Background(), rec, "/bin/true", "db")
	if len(rec.errs) != 0 {
		t.Fatalf("a passing check failed: %q", rec.errs)
	}
	verifytest.CheckCommand(context.Background(), rec, "/bin/false", "db")
	if len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "superstep check db") {
		t.Fatalf("a failing check: %q", rec.errs)
	}
}
