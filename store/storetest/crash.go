package storetest

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

var crashKills = flag.Int("storetest.crashes", 3, "storetest: how many times the crash case SIGKILLs a committing child process")

// Environment of a crash child: the database to open and how many runs to
// drive.
const (
	envCrashDSN  = "SUPERSTEP_STORETEST_CRASH_DSN"
	envCrashRuns = "SUPERSTEP_STORETEST_CRASH_RUNS"
)

// crashRuns is how many runs the child commits to concurrently, so kills
// land inside group commits.
const crashRuns = 6

// isCrashChild reports whether this process is a crash case's child.
func isCrashChild() bool { return os.Getenv(envCrashDSN) != "" }

func testCrash(t *testing.T, h Harness) {
	if !isCrashChild() {
		t.Parallel()
	}
	t.Run("SIGKILLMidCommitStream", func(t *testing.T) {
		if isCrashChild() {
			crashChild(t, h)
			return
		}
		t.Parallel()
		crashParent(t, h)
	})
}

// crashParent creates runs, then repeatedly starts a child that commits to
// them, SIGKILLs it after a random number of reported commits, reopens the
// database, runs store.Check and requires every reported commit.
func crashParent(t *testing.T, h Harness) {
	b := h.setup(t)
	for i := range crashRuns {
		CreateResponse(b.ctx, t, b.s, &ResponseOpts{RunID: fmt.Sprintf("crash_run_%d", i), LeaseDuration: 24 * time.Hour})
	}
	dsn := h.DSN(t, b.s)
	requireNoError(t, b.s.Close(), "Close before the child opens the database")
	reported := map[string]int64{}
	for kill := range *crashKills {
		n := runCrashChild(t, dsn, 5+rand.IntN(60), reported)
		s := h.Open(t, dsn)
		requireNoError(t, store.Check(b.ctx, s), fmt.Sprintf("Check after kill %d", kill))
		for i := range crashRuns {
			verifyCrashRun(t, b.ctx, s, fmt.Sprintf("crash_run_%d", i), reported)
		}
		t.Logf("kill %d: after %d reported commits; steps reported %v", kill, n, reported)
		requireNoError(t, s.Close(), "Close")
	}
}

// runCrashChild runs the child until it reported after commits, SIGKILLs
// it and returns how many commits it reported, recording them in reported.
func runCrashChild(t *testing.T, dsn string, after int, reported map[string]int64) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+runPattern(t.Name()), "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), envCrashDSN+"="+dsn, fmt.Sprintf("%s=%d", envCrashRuns, crashRuns))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	requireNoError(t, err, "StdoutPipe")
	requireNoError(t, cmd.Start(), "start child")
	sc := bufio.NewScanner(out)
	n := 0
	var lines []string
	for n < after && sc.Scan() {
		var run string
		var step int64
		if _, err := fmt.Sscanf(sc.Text(), "committed %s %d", &run, &step); err != nil {
			lines = append(lines, sc.Text())
			continue
		}
		reported[run] = max(reported[run], step)
		n++
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if n < after {
		t.Fatalf("child exited after %d of %d commits; its output: %s", n, after, strings.Join(lines, "\n"))
	}
	return n
}

// verifyCrashRun requires the run to hold every reported step and to be
// consistent: one event per step carrying the step, and the checkpoint of
// the last step naming it.
func verifyCrashRun(t *testing.T, ctx context.Context, s store.Store, runID string, reported map[string]int64) {
	t.Helper()
	run, err := s.RunGet(ctx, runID)
	requireNoError(t, err, "RunGet")
	if run.LastStep < reported[runID] {
		t.Fatalf("run %s at step %d, but the child reported step %d committed", runID, run.LastStep, reported[runID])
	}
	evs := ListAll(ctx, t, s, run.HeadResponseID)
	if int64(len(evs)) != run.LastStep+1 {
		t.Fatalf("run %s at step %d has %d events", runID, run.LastStep, len(evs))
	}
	for _, ev := range evs[1:] {
		if ev.Step != ev.Seq || string(ev.Payload) != crashPayload(ev.Seq) {
			t.Fatalf("run %s event %+v", runID, ev)
		}
	}
	last, err := s.CheckpointGetLast(ctx, runID)
	requireNoError(t, err, "CheckpointGetLast")
	switch want := crashPayload(run.LastStep); {
	case last.Step != run.LastStep:
		t.Fatalf("run %s at step %d: last checkpoint is at step %d", runID, run.LastStep, last.Step)
	case run.LastStep == 0:
		// Killed before this run's first commit: its checkpoint is still
		// the one ResponseCreate wrote, not a child's.
	case string(last.Parts[0].Data) != want:
		t.Fatalf("run %s last checkpoint %q, want %q", runID, last.Parts[0].Data, want)
	}
	reported[runID] = run.LastStep
}

// crashChild is the child side: commit to every run concurrently, printing
// each commit after it returned, until killed.
func crashChild(t *testing.T, h Harness) {
	s := h.Open(t, os.Getenv(envCrashDSN))
	ctx := context.Background()
	// The runs' leases may have been released when the database was
	// opened (SQLite); claim those. Runs still leased are written under
	// their current epoch.
	if _, err := s.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "crash-child", Duration: 24 * time.Hour}); err != nil {
		t.Fatalf("LeaseClaim: %v", err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range crashRuns {
		runID := fmt.Sprintf("crash_run_%d", i)
		wg.Go(func() {
			big := Parts(2, 64<<10, byte(i))
			for range 100000 {
				run, err := s.RunGet(ctx, runID)
				if err != nil {
					t.Errorf("RunGet: %v", err)
					return
				}
				step := run.LastStep + 1
				p := &store.CommitParams{RunID: runID, Epoch: run.Lease.Epoch, Step: step, ResponseID: run.HeadResponseID,
					Status: store.StatusInProgress, Snapshot: []byte(crashPayload(step)),
					Checkpoint: append([]store.Part{{Name: "step", Data: []byte(crashPayload(step))}}, big...),
					Events:     []store.EventInput{{Seq: step, Type: "step", Payload: []byte(crashPayload(step))}}}
				if _, err := s.Commit(ctx, p); err != nil {
					t.Errorf("Commit: %v", err)
					return
				}
				mu.Lock()
				fmt.Fprintf(os.Stdout, "committed %s %d\n", runID, step)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

func crashPayload(step int64) string { return fmt.Sprintf(`{"step":%d}`, step) }

// runPattern turns a test name into a -test.run pattern matching exactly
// it.
func runPattern(name string) string {
	elems := strings.Split(name, "/")
	for i, e := range elems {
		elems[i] = "^" + regexp.QuoteMeta(e) + "$"
	}
	return strings.Join(elems, "/")
}
