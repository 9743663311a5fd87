package verify

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
)

// JournalEntry is one line of the executor journal the demo workflows
// append to when SUPERSTEP_DEMO_JOURNAL is set: an executor invocation that
// finished its work.
type JournalEntry struct {
	ResponseID string
	Step       int64 // superstep, from 1
	ExecutorID string
}

// Journal is the executor journal of a test and the crashes it went
// through.
type Journal struct {
	Entries []JournalEntry
	// Crashes is the number of times the server was killed while runs were
	// in flight.
	Crashes int
	// Marks, when not empty, has one entry per crash (len(Marks) ==
	// Crashes), in order, and lets Check tell re-runs apart exactly.
	Marks []CrashMark
	// PerAttempt, when not nil, returns how many journal entries one
	// complete attempt of a superstep writes for an executor: the number of
	// messages it handles in that superstep (a fan-in join handles one per
	// worker), or 0 when unknown (the executor is then not counted). Nil
	// means 1 for every executor.
	PerAttempt func(responseID string, step int64, executorID string) int
	// LeaseEnds counts, per response ID, the times its run stopped on a
	// host that did not crash because its lease ended (lapsed while the
	// host was starved, or was taken by another host). Like a crash, each
	// lets the superstep in flight run once more: the journal records
	// executor invocations, which are not themselves durable.
	LeaseEnds map[string]int
}

// CrashMark records the state at one crash, read after the process died and
// before it restarted.
type CrashMark struct {
	// JournalLen is the number of journal entries written before the
	// crash.
	JournalLen int
	// Committed maps a response ID to the last committed step of its run
	// at the crash; responses not in it are not checked against the mark.
	Committed map[string]int64
}

// ReadJournal reads and parses the journal file at path.
func ReadJournal(path string) ([]JournalEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("verify: journal: %w", err)
	}
	defer f.Close()
	return ParseJournal(f)
}

// ParseJournal parses journal lines "<response_id> <superstep>
// <executor_id>". The executor id is the rest of the line. Empty lines are
// skipped; any other malformed line is an error naming its line number.
func ParseJournal(r io.Reader) ([]JournalEntry, error) {
	var out []JournalEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimRight(sc.Bytes(), "\r")
		if len(line) == 0 {
			continue
		}
		e, err := parseJournalLine(string(line))
		if err != nil {
			return nil, fmt.Errorf("verify: journal line %d: %w", n, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("verify: journal: %w", err)
	}
	return out, nil
}

// parseJournalLine parses one journal line.
func parseJournalLine(line string) (JournalEntry, error) {
	f := strings.SplitN(line, " ", 3)
	if len(f) != 3 || f[0] == "" || f[2] == "" {
		return JournalEntry{}, fmt.Errorf("%q: want \"<response_id> <superstep> <executor_id>\"", line)
	}
	step, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || step < 1 {
		return JournalEntry{}, fmt.Errorf("%q: superstep %q is not a number >= 1", line, f[1])
	}
	return JournalEntry{ResponseID: f[0], Step: step, ExecutorID: f[2]}, nil
}

// String formats the entry as its journal line.
func (e JournalEntry) String() string {
	return fmt.Sprintf("%s %d %s", e.ResponseID, e.Step, e.ExecutorID)
}

// stepKey names one superstep of one response.
type stepKey struct {
	resp string
	step int64
}

// checkJournal checks the journal for re-runs a crash cannot explain.
func checkJournal(rep *Report, j *Journal) {
	rep.JournalEntries += len(j.Entries)
	checkJournalOrder(rep, j.Entries)
	checkRerunBudget(rep, j)
	if len(j.Marks) == 0 || !checkMarks(rep, j) {
		return
	}
	checkEpochs(rep, j)
}

// perAttempt returns j.PerAttempt(e), 1 when it is nil.
func (j *Journal) perAttempt(e JournalEntry) int {
	if j.PerAttempt == nil {
		return 1
	}
	return j.PerAttempt(e.ResponseID, e.Step, e.ExecutorID)
}

// checkJournalOrder reports an entry of superstep s that comes after an
// entry of a later superstep of the same response: step s+1 starts only
// after s committed, so s ran again after its commit.
func checkJournalOrder(rep *Report, entries []JournalEntry) {
	top := map[string]int64{}
	reported := map[JournalEntry]bool{}
	for n, e := range entries {
		if t := top[e.ResponseID]; e.Step < t && !reported[e] {
			reported[e] = true
			rep.add(InvCommittedRerun, e.ResponseID, "", "executor %s of superstep %d ran again (journal entry %d) after superstep %d had started, so after its commit",
				e.ExecutorID, e.Step, n+1, t)
		}
		top[e.ResponseID] = max(top[e.ResponseID], e.Step)
	}
}

// checkRerunBudget checks that a response's re-runs fit the crashes. An
// executor's entries make ceil(count/PerAttempt) attempts of its
// superstep; each crash interrupts at most one superstep of a response,
// which then runs once more, so the extra attempts of all its supersteps
// add up to at most Crashes.
func checkRerunBudget(rep *Report, j *Journal) {
	count := map[JournalEntry]int{}
	for _, e := range j.Entries {
		count[e]++
	}
	extra := map[stepKey]int{}
	for e, n := range count {
		if m := j.perAttempt(e); m > 0 {
			k := stepKey{e.ResponseID, e.Step}
			extra[k] = max(extra[k], (n+m-1)/m-1)
		}
	}
	perResp := map[string]int{}
	steps := map[string][]int64{}
	for k, x := range extra {
		if x > 0 {
			perResp[k.resp] += x
			steps[k.resp] = append(steps[k.resp], k.step)
		}
	}
	for _, resp := range slices.Sorted(maps.Keys(perResp)) {
		if perResp[resp] > j.Crashes+j.LeaseEnds[resp] {
			s := steps[resp]
			slices.Sort(s)
			rep.add(InvRerunsPerCrash, resp, "", "supersteps %v re-ran %d times in all, more than the %d crashes and %d lease ends allow",
				s, perResp[resp], j.Crashes, j.LeaseEnds[resp])
		}
	}
}

// checkMarks checks that the crash marks fit the journal; it returns false
// (after reporting) when they do not.
func checkMarks(rep *Report, j *Journal) bool {
	if len(j.Marks) != j.Crashes {
		rep.add(InvJournal, "", "", "%d crash marks for %d crashes", len(j.Marks), j.Crashes)
		return false
	}
	prev := 0
	for i, m := range j.Marks {
		if m.JournalLen < prev || m.JournalLen > len(j.Entries) {
			rep.add(InvJournal, "", "", "crash %d marks journal length %d, outside %d..%d", i+1, m.JournalLen, prev, len(j.Entries))
			return false
		}
		prev = m.JournalLen
	}
	return true
}

// checkEpochs uses the crash marks: between two crashes an executor runs
// at most one attempt's worth of invocations in a superstep, and after a
// crash no invocation belongs to a superstep that was committed at that
// crash.
func checkEpochs(rep *Report, j *Journal) {
	seen := map[JournalEntry]int{}
	mark := -1 // index of the last crash before the current entry
	for n, e := range j.Entries {
		for mark+1 < len(j.Marks) && j.Marks[mark+1].JournalLen <= n {
			mark++
			clear(seen)
		}
		seen[e]++
		// A lease end is not positioned in the journal: the response's
		// lease ends allow as many more attempts between any two crashes.
		if m := j.perAttempt(e); m > 0 && seen[e] == m*(1+j.LeaseEnds[e.ResponseID])+1 {
			rep.add(InvRerunsPerCrash, e.ResponseID, "", "executor %s of superstep %d ran %d times with no crash in between (journal entry %d), one attempt runs it %d times, and its run's lease ended %d times",
				e.ExecutorID, e.Step, seen[e], n+1, m, j.LeaseEnds[e.ResponseID])
		}
		if mark < 0 {
			continue
		}
		if c, ok := j.Marks[mark].Committed[e.ResponseID]; ok && e.Step <= c {
			rep.add(InvCommittedRerun, e.ResponseID, "", "executor %s of superstep %d ran after crash %d (journal entry %d), when the run had committed up to step %d",
				e.ExecutorID, e.Step, mark+1, n+1, c)
		}
	}
}
